//! Everything the relay logs in this test binary, captured at TRACE level so a test can check
//! what never appears in it.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn capture() -> &'static Capture {
    static CAPTURE: OnceLock<Capture> = OnceLock::new();
    CAPTURE.get_or_init(|| {
        let capture = Capture::default();
        let writer = capture.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing_subscriber::filter::LevelFilter::TRACE)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .init();
        capture
    })
}

/// Starts capturing (idempotent). Call before starting a relay.
pub fn start() {
    capture();
}

/// Everything logged so far.
pub fn text() -> Vec<u8> {
    capture().0.lock().unwrap().clone()
}
