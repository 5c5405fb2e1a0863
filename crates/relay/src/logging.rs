//! The relay's log: lines go to stderr from a thread of their own, so a log reader that stalls
//! or goes away never blocks a request, a background task or shutdown.
//!
//! A line that finds the queue full is dropped rather than waited for; a write that fails
//! (the reader closed its end) is ignored. At exit, the lines still queued (and a final error)
//! get [`FLUSH_DEADLINE`] to be written, and the process exits whether or not they were.

use std::io::Write as _;
use std::sync::mpsc;
use std::time::Duration;

use tracing_appender::non_blocking::{NonBlockingBuilder, WorkerGuard};

/// How long exit waits for queued lines to reach stderr.
pub const FLUSH_DEADLINE: Duration = Duration::from_secs(2);

/// The installed log, flushed by [`Log::finish`].
#[derive(Debug)]
#[must_use = "finish the log at exit so its last lines are written"]
pub struct Log {
    guard: WorkerGuard,
}

impl Log {
    /// Installs the global subscriber, filtered by `SEALPOST_LOG` (default `info`).
    pub fn install() -> Self {
        let (writer, guard) = NonBlockingBuilder::default()
            .lossy(true)
            .thread_name("sealpost-relay-log")
            .finish(std::io::stderr());
        tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_env("SEALPOST_LOG")
                    .unwrap_or_else(|_| "info".into()),
            )
            .with_writer(writer)
            // Its report of a failed write goes to stderr with `eprintln!`, which panics (or
            // blocks) on the very stderr that failed.
            .log_internal_errors(false)
            .init();
        Self { guard }
    }

    /// Writes what is queued, then `error` (as `error: …`), within [`FLUSH_DEADLINE`]; gives up
    /// on a reader that does not take them.
    pub fn finish(self, error: Option<String>) {
        let (done, finished) = mpsc::channel();
        let guard = self.guard;
        // The guard's own drop waits for the writer thread and may then print to stderr; on
        // a thread of its own, exit does not wait on either past the deadline.
        let spawned = std::thread::Builder::new()
            .name("sealpost-relay-log-flush".into())
            .spawn(move || {
                drop(guard);
                if let Some(error) = error {
                    let _ = writeln!(std::io::stderr(), "error: {error}");
                }
                let _ = done.send(());
            });
        if spawned.is_ok() {
            let _ = finished.recv_timeout(FLUSH_DEADLINE);
        }
    }
}
