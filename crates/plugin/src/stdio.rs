//! MCP's stdio transport: one JSON-RPC message per line on stdin and stdout.
//!
//! rmcp's own reader drops an over-long line silently; this one bounds every line at
//! [`MAX_LINE_BYTES`] before buffering past it, answers an over-long line with a JSON-RPC
//! error (id `null`, as for any message whose id cannot be read), and keeps serving. A message
//! may arrive in many writes and many messages in one write: lines are framed, not reads.
//! stdout carries protocol messages only; everything else goes to stderr.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::ErrorCode;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio::sync::Mutex;

/// Longest accepted line, newline excluded.
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// The server side of a stdio connection.
pub struct LineTransport<R, W> {
    reader: BufReader<R>,
    line: Vec<u8>,
    /// Inside an over-long line, dropping bytes until its newline.
    discarding: bool,
    max_line: usize,
    writer: Arc<Mutex<W>>,
    /// Cancelled when stdin reaches its end, so the process can exit without waiting for
    /// calls still in flight (their client is gone).
    closed: tokio_util::sync::CancellationToken,
}

impl<R, W> std::fmt::Debug for LineTransport<R, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineTransport")
            .field("max_line", &self.max_line)
            .finish_non_exhaustive()
    }
}

/// What one bounded read produced.
enum Line {
    Complete,
    TooLong,
    Eof,
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin> LineTransport<R, W> {
    /// A transport reading `reader` and writing `writer`, lines capped at `max_line` bytes.
    pub fn new(reader: R, writer: W, max_line: usize) -> Self {
        Self {
            reader: BufReader::with_capacity(64 * 1024, reader),
            line: Vec::new(),
            discarding: false,
            max_line,
            writer: Arc::new(Mutex::new(writer)),
            closed: tokio_util::sync::CancellationToken::new(),
        }
    }

    /// Cancelled when stdin reaches its end.
    pub fn closed(&self) -> tokio_util::sync::CancellationToken {
        self.closed.clone()
    }

    /// Reads one line into `self.line` without letting it grow past the cap. Cancel-safe: a
    /// partial line stays in `self.line` for the next call.
    async fn read_line(&mut self) -> std::io::Result<Line> {
        loop {
            let available = self.reader.fill_buf().await?;
            if available.is_empty() {
                return Ok(Line::Eof);
            }
            let newline = available.iter().position(|&b| b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            if !self.discarding {
                let content = newline.unwrap_or(take);
                if self.line.len() + content > self.max_line {
                    self.line.clear();
                    self.discarding = true;
                } else {
                    self.line.extend_from_slice(&available[..take]);
                }
            }
            self.reader.consume(take);
            if newline.is_some() {
                return Ok(if std::mem::take(&mut self.discarding) {
                    Line::TooLong
                } else {
                    Line::Complete
                });
            }
        }
    }

    async fn write_line(writer: &Mutex<W>, bytes: &[u8]) -> std::io::Result<()> {
        let mut writer = writer.lock().await;
        writer.write_all(bytes).await?;
        writer.flush().await
    }

    /// A line that is not a message this server understands. Not JSON: a parse error. JSON
    /// with an id: an invalid request for that id. A notification (no id): ignored, as
    /// JSON-RPC requires.
    async fn unreadable(writer: &Mutex<W>, text: &[u8], error: serde_json::Error) {
        let Ok(value) = serde_json::from_slice::<Value>(text) else {
            tracing::debug!(%error, "a line that is not JSON");
            let message = "The message is not valid JSON.";
            Self::answer_error(writer, &Value::Null, ErrorCode::PARSE_ERROR, message).await;
            return;
        };
        let Some(id) = value
            .get("id")
            .filter(|id| id.is_string() || id.is_number())
        else {
            tracing::debug!(%error, "ignored a notification this server does not know");
            return;
        };
        let message = "The request is not one this server understands.";
        Self::answer_error(writer, id, ErrorCode::INVALID_REQUEST, message).await;
    }

    /// An error response for request `id`; `null` when the id could not be read, as JSON-RPC
    /// says.
    async fn answer_error(writer: &Mutex<W>, id: &Value, code: ErrorCode, message: &str) {
        let response = json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": code.0, "message": message},
        });
        let mut bytes = serde_json::to_vec(&response).expect("an error serialises");
        bytes.push(b'\n');
        if let Err(error) = Self::write_line(writer, &bytes).await {
            tracing::debug!(%error, "could not write an error response");
        }
    }
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = self.writer.clone();
        let bytes = serde_json::to_vec(&item).map(|mut bytes| {
            bytes.push(b'\n');
            bytes
        });
        async move {
            let bytes = bytes.map_err(std::io::Error::other)?;
            Self::write_line(&writer, &bytes).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            match self.read_line().await {
                Ok(Line::Complete) => {}
                Ok(Line::TooLong) => {
                    tracing::warn!(max = self.max_line, "discarded a message over the line cap");
                    let message = format!(
                        "The message was longer than {} bytes and was discarded.",
                        self.max_line
                    );
                    Self::answer_error(
                        &self.writer,
                        &Value::Null,
                        ErrorCode::INVALID_REQUEST,
                        &message,
                    )
                    .await;
                    continue;
                }
                Ok(Line::Eof) => {
                    self.closed.cancel();
                    return None;
                }
                Err(error) => {
                    tracing::debug!(%error, "stdin failed");
                    self.closed.cancel();
                    return None;
                }
            }
            let line = std::mem::take(&mut self.line);
            let text = line.strip_suffix(b"\n").unwrap_or(&line);
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
            if text.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(text) {
                Ok(message) => return Some(message),
                Err(error) => Self::unreadable(&self.writer, text, error).await,
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.writer.lock().await.flush().await
    }
}
