//! Relay HTTP API: request and response bodies and stable error codes.
//!
//! The relay, the plugin and the browser all (de)serialise these types, so a field renamed here
//! is renamed everywhere at once. Envelopes and hellos are opaque [`Base64Bytes`]; each id kind
//! has its type ([`OwnerId`], [`TokenId`], [`PairId`], [`SessionId`], [`CallId`]), all written
//! as the same 22-character text; times are [`UnixMillis`], a JSON integer. Error codes are
//! listed once, in [`ErrorCode`].

use sealpost_time::UnixMillis;
use serde::{Deserialize, Serialize};
use strum::{IntoStaticStr, VariantArray};

use crate::content::CancelReason;
use crate::ids::{Base64Bytes, CallId, LinkId, OwnerId, PairId, SessionId, TokenId};

pub mod channel;
mod errors;

pub use errors::{ErrorBody, ErrorCode, ErrorDetail};

/// `POST /v1/auth/signin`: exchange a one-time sign-in code for an owner token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SigninRequest {
    /// The one-time code from the sign-in link.
    pub code: String,
    /// For a code a team sign-in handed back: the PKCE verifier whose S256 challenge the app
    /// started the sign-in with (RFC 7636). Ignored for a link's code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_verifier: Option<String>,
}

/// `GET /v1/auth/providers`: how people may sign in besides sign-in links.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuthProviders {
    /// Present when the relay is set up for team sign-in through an OpenID provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oidc: Option<OidcProvider>,
}

/// The team's OpenID provider, as an app offers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OidcProvider {
    /// The provider's issuer URL.
    pub issuer: String,
    /// Where the app sends the browser to sign in, adding `code_challenge` (S256 of a
    /// verifier the app keeps), `code_challenge_method=S256` and, for a host app, its
    /// `app_origin`. The browser comes back to the app as a sign-in link does
    /// (`#signin=CODE`), or to a page of the relay's that says why not.
    pub start_url: String,
}

/// Who a token belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OwnerInfo {
    /// The owner's id.
    pub id: OwnerId,
    /// The owner's name, as `sealpost-relay owner add` gave it.
    pub name: String,
}

/// Answer to a sign-in, and to `GET /v1/me` (which hands out a refreshed token, so a sign-in
/// that keeps being used slides forward).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SigninResponse {
    /// The owner token, sent as `Authorization: Bearer`. A secret: never log it.
    pub token: String,
    /// Who signed in.
    pub owner: OwnerInfo,
    /// When the token expires, Unix ms.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub expires_at: UnixMillis,
    /// The host app's origin the sign-in is scoped to (its link was made for it); absent for
    /// the relay's own app.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_origin: Option<String>,
}

/// `GET /v1/me`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MeResponse {
    /// Who the token belongs to.
    pub owner: OwnerInfo,
    /// "owner" or "mcp".
    pub token_kind: TokenKind,
    /// For an MCP token: the pairing it acts for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair_id: Option<PairId>,
    /// A fresh owner token with a renewed expiry (absent for MCP tokens, which do not slide).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The host app's origin the token is scoped to; absent for the relay's own app.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_origin: Option<String>,
    /// When the token expires, Unix ms.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub expires_at: UnixMillis,
    /// The relay's clock when it answered, Unix ms.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub now_ms: UnixMillis,
}

/// The two kinds of bearer token the relay issues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, strum::IntoStaticStr)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum TokenKind {
    /// A person signed in to the web app.
    Owner,
    /// A plugin acting for one pairing.
    Mcp,
}

impl TokenKind {
    /// The snake_case name, as it is serialised.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// `POST /v1/auth/signin-links` (the body is optional): the app the link signs in to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SigninLinkRequest {
    /// A host app's origin, one the relay lists (`--app-origin`): the link opens that app and
    /// the sign-in is scoped to it. Absent: the relay's own app. A host app's token may name
    /// only its own origin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_origin: Option<String>,
}

/// Answer to `POST /v1/auth/signin-links`: a signed-in owner mints a sign-in link for another
/// device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SigninLinkResponse {
    /// The link to open on the other device. It carries a one-time code: never log it.
    pub link: String,
    /// When the link's code expires, Unix ms.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub expires_at: UnixMillis,
}

/// `POST /v1/mcp-tokens`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateMcpTokenRequest {
    /// A name for the token, shown when tokens are listed.
    pub label: String,
    /// The pairing the token will act for.
    pub pair_id: PairId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The token's lifetime in seconds; the relay's default when absent.
    pub ttl_s: Option<u64>,
}

/// Answer to `POST /v1/mcp-tokens`. The token is shown once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateMcpTokenResponse {
    /// The token's id, for listing and revoking it.
    pub id: TokenId,
    /// The MCP token itself, shown this once. A secret: never log it.
    pub token: String,
    /// When the token expires, Unix ms.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub expires_at: UnixMillis,
}

/// One MCP token as listed (never the token itself).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct McpTokenInfo {
    /// The token's id.
    pub id: TokenId,
    /// The name given when the token was made.
    pub label: String,
    /// The pairing the token acts for.
    pub pair_id: PairId,
    /// When the token was made, Unix ms.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub created_at: UnixMillis,
    /// When the token expires, Unix ms.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub expires_at: UnixMillis,
    /// The host app's origin whose sign-in made the token; absent for the relay's own app.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_origin: Option<String>,
}

/// `GET /v1/mcp-tokens`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct McpTokenList {
    /// The owner's MCP tokens, in id order.
    pub tokens: Vec<McpTokenInfo>,
    /// When more remain: pass it as `after` for the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<TokenId>,
}

/// One owner sign-in as listed: one per signed-in device (never the token itself).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OwnerTokenInfo {
    /// The sign-in's id, for revoking it.
    pub id: TokenId,
    /// When the person signed in, Unix ms.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub created_at: UnixMillis,
    /// When the sign-in lapses unless used, Unix ms (never past its absolute lifetime).
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub expires_at: UnixMillis,
    /// Whether this is the token the request was made with.
    pub current: bool,
    /// The host app's origin the sign-in is scoped to; absent for the relay's own app.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_origin: Option<String>,
    /// The sign-in whose link this one was made from: signing that one out ends this one
    /// too. Absent for a sign-in from the operator's link or a team sign-in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<TokenId>,
}

/// `GET /v1/owner-tokens`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OwnerTokenList {
    /// The owner's live sign-ins, oldest first.
    pub tokens: Vec<OwnerTokenInfo>,
}

/// One unused sign-in link as listed (never its code, which the relay does not keep).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SigninLinkInfo {
    /// The link's id, for revoking it.
    pub id: LinkId,
    /// The host app's origin the link signs in to; absent for the relay's own app.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_origin: Option<String>,
    /// The sign-in that made it: signing that one out voids the link. Absent for the
    /// operator's links (`owner add|link`, the first start) and a team sign-in's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minted_by: Option<TokenId>,
    /// When it was made, Unix ms; absent for links made before the relay recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<u64>))]
    pub created_at: Option<UnixMillis>,
    /// When it lapses unused, Unix ms.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub expires_at: UnixMillis,
}

/// `GET /v1/signin-links`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SigninLinkList {
    /// The owner's unused, unexpired sign-in links, soonest to lapse first.
    pub links: Vec<SigninLinkInfo>,
}

/// `POST /v1/sessions`. The hello is stored and returned byte for byte, never parsed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateSessionRequest {
    /// The id the browser chose (the hello carries it too).
    pub session_id: SessionId,
    /// The pairing the session serves.
    pub pair_id: PairId,
    /// The session hello (binary; layout in docs/PROTOCOL.md).
    pub hello: Base64Bytes,
    /// How long the session lives, in seconds.
    pub ttl_s: u64,
}

/// `PUT /v1/sessions/{session_id}/catalog`: a live session's tool list, sealed again. The
/// relay reads only the update's clear header (its session and number) and keeps it when it is
/// newer than the one it holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CatalogUpdateRequest {
    /// The catalog update (binary; layout in docs/PROTOCOL.md, "Catalog update").
    pub update: Base64Bytes,
}

/// Answer to `POST /v1/sessions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateSessionResponse {
    /// The new session's id.
    pub session_id: SessionId,
    /// When the session ends, Unix ms.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub expires_at: UnixMillis,
}

/// `GET /v1/pairings/{pair_id}/session`: the live session of a pairing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LiveSessionResponse {
    /// The live session's id; the plugin checks it is the hello's.
    pub session_id: SessionId,
    /// The hello byte for byte as the browser posted it.
    pub hello: Base64Bytes,
    /// When the session ends, Unix ms.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub expires_at: UnixMillis,
    /// When the tab last asked for calls; `None` if it never has.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<u64>))]
    pub claimer_seen_at: Option<UnixMillis>,
    /// When the pairing's plugin last looked the session up; `None` if it never has.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<u64>))]
    pub plugin_seen_at: Option<UnixMillis>,
    /// The newest catalog update the tab posted for the session, byte for byte (binary;
    /// layout in docs/PROTOCOL.md); absent while the hello's catalog is current.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_update: Option<Base64Bytes>,
    /// The relay's clock when it answered, Unix ms.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub now_ms: UnixMillis,
}

/// `POST /v1/sessions/{session_id}/calls`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PostCallRequest {
    /// The id the plugin chose (the envelope's header carries it too).
    pub call_id: CallId,
    /// The sealed call.
    pub envelope: Base64Bytes,
    /// How long the call may wait for an answer, in seconds.
    pub ttl_s: u64,
}

/// Answer (201) to `POST /v1/sessions/{session_id}/calls`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PostCallResponse {
    /// The call's id.
    pub call_id: CallId,
    /// When the call expires, Unix ms.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub expires_at: UnixMillis,
    /// The relay's clock when it answered, Unix ms.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub now_ms: UnixMillis,
    /// With `wait_ms`: the call as a read at the end of the wait found it (an answered call's
    /// reply, which this marks delivered). Absent without `wait_ms`, or when the wait could
    /// not be made: read the call then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<CallStatusResponse>,
}

/// One call handed to an executor by a claim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClaimedCall {
    /// The call's id.
    pub call_id: CallId,
    /// The sealed call.
    pub envelope: Base64Bytes,
    /// When the claim's lease ends, Unix ms: a reply after it is refused.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub lease_expires_at: UnixMillis,
}

/// Answer to `POST /v1/sessions/{session_id}/claims?wait_ms=&max=`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClaimResponse {
    /// The calls this claim took (empty when the wait ran out).
    pub calls: Vec<ClaimedCall>,
    /// The relay's clock when it answered, Unix ms.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub now_ms: UnixMillis,
}

/// `PUT /v1/calls/{call_id}/reply`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ReplyRequest {
    /// The sealed reply.
    pub envelope: Base64Bytes,
}

/// `POST /v1/calls/{call_id}/cancel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CancelRequest {
    /// Why; the relay accepts only [`CancelReason::ALL`].
    pub reason: CancelReason,
}

/// Where a call is in its life. `pending → claimed → answered → delivered`;
/// `pending|claimed → expired | cancelled`. New states may be added: an older reader parses one
/// it does not know as [`CallState::Unknown`]; the relay stores and sends only [`CallState::ALL`].
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, IntoStaticStr, VariantArray,
)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[strum(serialize_all = "snake_case")]
pub enum CallState {
    /// Posted; waiting for the browser to claim it.
    Pending,
    /// Claimed by the browser, under a lease.
    Claimed,
    /// The reply is stored and not yet read.
    Answered,
    /// The reply has been read (and reads the same until the call expires).
    Delivered,
    /// The call's TTL or its claim's lease ran out.
    Expired,
    /// Cancelled, with a [`CancelReason`].
    Cancelled,
    /// A state this build does not know (a newer relay's). Only ever read, never sent: a reader
    /// keeps waiting, as for a call not yet answered, until its own deadline.
    #[serde(other)]
    Unknown,
}

impl CallState {
    /// Every state the relay stores and sends ([`CallState::Unknown`] is not one).
    pub const ALL: &'static [Self] = crate::wire::known(<Self as strum::VariantArray>::VARIANTS);

    /// The snake_case name, as it is serialised.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The value `as_str` names, if any.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|s| s.as_str() == text)
    }

    /// A final state: nothing more will happen to the call. An unknown state is not known to
    /// be final.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            Self::Answered | Self::Delivered | Self::Expired | Self::Cancelled
        )
    }
}

/// Answer to `GET /v1/calls/{call_id}?wait_ms=`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CallStatusResponse {
    /// Where the call is.
    pub state: CallState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The sealed reply, once the call is answered.
    pub reply: Option<Base64Bytes>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Why the call was cancelled, when it was.
    pub reason: Option<CancelReason>,
    /// When the call expires, Unix ms.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub expires_at: UnixMillis,
    /// The relay's clock when it answered, Unix ms.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub now_ms: UnixMillis,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_old_reader_parses_a_cancel_reason_added_later() {
        let status: CallStatusResponse = serde_json::from_str(
            r#"{"state":"cancelled","reason":"owner_revoked","expires_at":5,"now_ms":1}"#,
        )
        .unwrap();
        assert_eq!(status.reason, Some(CancelReason::Unknown));
        assert!(!CancelReason::ALL.contains(&CancelReason::Unknown));
    }

    #[test]
    fn an_old_reader_parses_a_call_state_added_later_as_not_final() {
        let status: CallStatusResponse =
            serde_json::from_str(r#"{"state":"held","expires_at":5,"now_ms":1}"#).unwrap();
        assert_eq!(status.state, CallState::Unknown);
        assert!(!status.state.is_final());
        assert!(!CallState::ALL.contains(&CallState::Unknown));
        assert_eq!(CallState::parse("unknown"), None, "never stored");
    }

    #[test]
    fn an_old_reader_parses_a_tool_kind_added_later() {
        let entry: crate::content::CatalogEntry = serde_json::from_value(serde_json::json!({
            "name": "wipe", "description": "d", "input_schema": {"type": "object"},
            "kind": "destructive", "builtin": false,
        }))
        .unwrap();
        assert_eq!(entry.kind, crate::content::ToolKind::Unknown);
    }

    #[test]
    fn call_states_round_trip() {
        for &state in CallState::ALL {
            assert_eq!(CallState::parse(state.as_str()), Some(state));
            assert_eq!(
                serde_json::to_value(state).unwrap(),
                serde_json::Value::String(state.as_str().into())
            );
        }
    }
}
