//! The tab's end of the session channel (`GET /v1/channel`), as the browser's Worker speaks it:
//! one WebSocket, each request a message, each answer carrying the status and body HTTP would
//! have given (`sealpost_protocol::api::channel`).

use anyhow::{Context as _, Result, bail};
use futures_util::{SinkExt as _, StreamExt as _};
use sealpost_protocol::api::ClaimResponse;
use sealpost_protocol::api::channel::{
    CHANNEL_BEARER_PREFIX, CHANNEL_PATH, CHANNEL_PROTOCOL, ChannelAnswer, ChannelOp, ChannelRequest,
};
use sealpost_protocol::content::CancelReason;
use sealpost_protocol::ids::{Base64Bytes, CallId, SessionId};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::http::HeaderValue;

/// An open channel's socket.
pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens a channel to the relay at `base` (`http://…`) with the owner token `token`.
pub async fn open(base: &str, token: &str) -> Result<Socket> {
    let url = format!("{}{CHANNEL_PATH}", base.replacen("http://", "ws://", 1));
    let mut request = url.into_client_request()?;
    let protocols = format!("{CHANNEL_PROTOCOL}, {CHANNEL_BEARER_PREFIX}{token}");
    request
        .headers_mut()
        .insert("sec-websocket-protocol", HeaderValue::from_str(&protocols)?);
    let (socket, _) = tokio_tungstenite::connect_async(request)
        .await
        .context("open the session channel")?;
    Ok(socket)
}

/// A channel used one request at a time.
#[derive(Debug)]
pub struct Channel {
    socket: Socket,
    next_id: u32,
}

impl Channel {
    pub async fn open(base: &str, token: &str) -> Result<Self> {
        Ok(Self {
            socket: open(base, token).await?,
            next_id: 1,
        })
    }

    /// Sends `op` and waits for its answer: the status, and the body when it is a success.
    async fn request(&mut self, op: ChannelOp) -> Result<serde_json::Value> {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1).max(1);
        let text = serde_json::to_string(&ChannelRequest { id, op })?;
        self.socket.send(Message::Text(text.into())).await?;
        loop {
            let message = self.socket.next().await.context("the channel closed")??;
            let Message::Text(text) = message else {
                continue;
            };
            let answer: ChannelAnswer = serde_json::from_str(&text)?;
            if answer.id != id {
                continue;
            }
            if !(200..300).contains(&answer.status) {
                bail!("the channel answered {}: {}", answer.status, answer.body);
            }
            return Ok(answer.body);
        }
    }

    /// Claims up to `max` calls of `session_id`, waiting up to `wait_ms` for one.
    pub async fn claim(
        &mut self,
        session_id: SessionId,
        max: u32,
        wait_ms: u64,
    ) -> Result<ClaimResponse> {
        let body = self
            .request(ChannelOp::Claim {
                session_id,
                wait_ms,
                max,
            })
            .await?;
        Ok(serde_json::from_value(body)?)
    }

    /// Answers a claimed call with its sealed reply.
    pub async fn reply(&mut self, call_id: CallId, envelope: Vec<u8>) -> Result<()> {
        self.request(ChannelOp::Reply {
            call_id,
            envelope: Base64Bytes(envelope),
        })
        .await
        .map(drop)
    }

    /// Cancels a claimed call.
    pub async fn cancel(&mut self, call_id: CallId, reason: CancelReason) -> Result<()> {
        self.request(ChannelOp::Cancel { call_id, reason })
            .await
            .map(drop)
    }
}
