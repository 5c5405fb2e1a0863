//! The session channel: a WebSocket on which a tab claims, answers and cancels calls, as it
//! would with `POST …/claims`, `PUT …/reply` and `POST …/cancel`, without a `fetch` per step
//! (in a browser, a message on an open socket costs about a quarter of a `fetch` round trip).
//!
//! The tab opens `GET /v1/channel` with the WebSocket subprotocols [`CHANNEL_PROTOCOL`] and
//! `sealpost.bearer.<owner token>` (a browser cannot set `Authorization` on a WebSocket). Each
//! text message is one [`ChannelRequest`]; each answer is one [`ChannelAnswer`], carrying the
//! HTTP status and body the same request would have got over HTTP, so one client maps both.
//! Answers come in the order they complete, not the order asked: a claim waits, a reply does
//! not.

use serde::{Deserialize, Serialize};

use crate::content::CancelReason;
use crate::ids::{Base64Bytes, CallId, SessionId};

/// The subprotocol a channel speaks; the relay selects it.
pub const CHANNEL_PROTOCOL: &str = "sealpost.v1";
/// The subprotocol that carries the owner token: `sealpost.bearer.<token>` (a JWT is made of
/// characters a subprotocol name may hold).
pub const CHANNEL_BEARER_PREFIX: &str = "sealpost.bearer.";
/// The channel's path.
pub const CHANNEL_PATH: &str = "/v1/channel";

/// One request on the channel, `{"id": n, "op": …, …}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelRequest {
    /// Chosen by the client; its answer carries it back.
    pub id: u32,
    /// What to do.
    #[serde(flatten)]
    pub op: ChannelOp,
}

/// The operations of the channel, each the same as its HTTP endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum ChannelOp {
    /// `POST /v1/sessions/{session_id}/claims?wait_ms=&max=`.
    Claim {
        /// The session to claim from.
        session_id: SessionId,
        /// Wait up to this long for a call (default 0).
        #[serde(default)]
        wait_ms: u64,
        /// Most calls to claim.
        max: u32,
    },
    /// `PUT /v1/calls/{call_id}/reply`.
    Reply {
        /// The claimed call.
        call_id: CallId,
        /// The sealed reply.
        envelope: Base64Bytes,
    },
    /// `POST /v1/calls/{call_id}/cancel`.
    Cancel {
        /// The call.
        call_id: CallId,
        /// Why.
        reason: CancelReason,
    },
}

/// The answer to one [`ChannelRequest`]: the HTTP status the same request would have got, and
/// its body (a [`crate::api::ClaimResponse`], `null` for 204, or an
/// [`crate::api::ErrorBody`]). A request that could not be read at all is answered with id 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelAnswer {
    /// The request's id.
    pub id: u32,
    /// The HTTP status.
    pub status: u16,
    /// The HTTP body.
    pub body: serde_json::Value,
    /// `Retry-After`, in seconds, where HTTP would send it (a 429 or a 503).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_s: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_read_as_documented() {
        let text = r#"{"id":7,"op":"claim","session_id":"AAAAAAAAAAAAAAAAAAAAAA","wait_ms":25000,"max":50}"#;
        let request: ChannelRequest = serde_json::from_str(text).unwrap();
        assert_eq!(request.id, 7);
        assert_eq!(
            request.op,
            ChannelOp::Claim {
                session_id: SessionId::from_bytes([0; 16]),
                wait_ms: 25_000,
                max: 50
            }
        );
        assert_eq!(
            serde_json::to_value(&request).unwrap(),
            serde_json::from_str::<serde_json::Value>(text).unwrap()
        );
        let cancel =
            r#"{"id":1,"op":"cancel","call_id":"AAAAAAAAAAAAAAAAAAAAAA","reason":"undecryptable"}"#;
        assert!(matches!(
            serde_json::from_str::<ChannelRequest>(cancel).unwrap().op,
            ChannelOp::Cancel { .. }
        ));
    }

    #[test]
    fn unknown_operations_and_fields_are_refused() {
        for text in [
            r#"{"id":1,"op":"post","session_id":"AAAAAAAAAAAAAAAAAAAAAA"}"#,
            r#"{"id":1,"op":"claim","session_id":"AAAAAAAAAAAAAAAAAAAAAA","max":1,"extra":1}"#,
            r#"{"op":"claim","session_id":"AAAAAAAAAAAAAAAAAAAAAA","max":1}"#,
        ] {
            assert!(
                serde_json::from_str::<ChannelRequest>(text).is_err(),
                "{text}"
            );
        }
    }
}
