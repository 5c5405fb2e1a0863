//! stdin and stdout as the MCP connection reads and writes them.
//!
//! tokio's own `stdin()` and `stdout()` do every read and write on a blocking thread and hand
//! the result back, two thread switches per message each way. When the client starts the
//! plugin with a pipe or a socket on each (every MCP client does: Node's `child_process` gives a
//! socket pair, Rust's `Command` a pipe), the plugin instead reads and writes them as the
//! runtime's own non-blocking streams, woken by the same poller as its relay connections, and a
//! message is handled on the thread that sees it arrive. Anything else (a terminal, a file)
//! goes through tokio's blocking-thread streams as before.
//!
//! The non-blocking mode is set on the open file, which a process sharing it also sees; the
//! client's end of a pipe or socket is its own, so only a program that hands the plugin its
//! own stdin or stdout could notice, and an MCP server's stdout carries nothing but its
//! messages.

use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};

/// The read half of the connection.
pub type Reader = Pin<Box<dyn AsyncRead + Send>>;
/// The write half of the connection.
pub type Writer = Pin<Box<dyn AsyncWrite + Send>>;

/// stdin and stdout, each on the runtime's poller where it can be (a pipe or a socket).
pub fn streams() -> (Reader, Writer) {
    let reader = polled::reader().unwrap_or_else(|| Box::pin(tokio::io::stdin()));
    let writer = polled::writer().unwrap_or_else(|| Box::pin(tokio::io::stdout()));
    (reader, writer)
}

#[cfg(unix)]
mod polled {
    use std::fs::File;
    use std::os::fd::{AsFd, OwnedFd};
    use std::os::unix::fs::FileTypeExt as _;

    use tokio::net::unix::pipe;

    use super::{Reader, Writer};

    /// What an inherited stream is.
    enum Kind {
        Pipe,
        Socket,
    }

    /// A copy of `fd` and what it is, when it is a pipe or a socket.
    fn inherited(fd: std::os::fd::BorrowedFd<'_>) -> Option<(OwnedFd, Kind)> {
        let fd = fd.try_clone_to_owned().ok()?;
        let file = File::from(fd);
        let kind = file.metadata().ok()?.file_type();
        let kind = if kind.is_fifo() {
            Kind::Pipe
        } else if kind.is_socket() {
            Kind::Socket
        } else {
            return None;
        };
        Some((OwnedFd::from(file), kind))
    }

    /// A socket the runtime polls: one end of a socket pair, used here in one direction only.
    fn socket(fd: OwnedFd) -> Option<tokio::net::UnixStream> {
        let socket = std::os::unix::net::UnixStream::from(fd);
        socket.set_nonblocking(true).ok()?;
        tokio::net::UnixStream::from_std(socket).ok()
    }

    pub(super) fn reader() -> Option<Reader> {
        let (fd, kind) = inherited(std::io::stdin().as_fd())?;
        Some(match kind {
            Kind::Pipe => Box::pin(pipe::Receiver::from_owned_fd(fd).ok()?),
            Kind::Socket => Box::pin(socket(fd)?),
        })
    }

    pub(super) fn writer() -> Option<Writer> {
        let (fd, kind) = inherited(std::io::stdout().as_fd())?;
        Some(match kind {
            Kind::Pipe => Box::pin(pipe::Sender::from_owned_fd(fd).ok()?),
            Kind::Socket => Box::pin(socket(fd)?),
        })
    }
}

#[cfg(not(unix))]
mod polled {
    use super::{Reader, Writer};

    pub(super) fn reader() -> Option<Reader> {
        None
    }

    pub(super) fn writer() -> Option<Writer> {
        None
    }
}
