//! The tokens the relay signs: HS256 JWTs with one issuer, an audience per kind (owner or
//! MCP), the owner as `sub` and the token row as `sid`, and the [`Bearer`] a verified one names.

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use sealpost_protocol::api::TokenKind;
use serde::{Deserialize, Serialize};

use crate::store::{Bearer, TokenRow};

/// Issuer of every token.
pub const ISSUER: &str = "sealpost-relay";
const OWNER_AUDIENCE: &str = "sealpost-owner";
const MCP_AUDIENCE: &str = "sealpost-mcp";

/// The claims the relay signs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claims {
    /// Issuer: always [`ISSUER`].
    pub iss: String,
    /// Audience: the token's kind (`sealpost-owner` or `sealpost-mcp`).
    pub aud: String,
    /// Owner id.
    pub sub: String,
    /// Token row id.
    pub sid: String,
    /// Expiry, Unix seconds.
    pub exp: u64,
    /// Issue time, Unix seconds.
    pub iat: u64,
    /// The pairing an MCP token acts for; absent from owner tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair_id: Option<String>,
}

/// Signing and verification keys (HS256 only).
#[derive(Clone)]
pub struct Keys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
}

impl std::fmt::Debug for Keys {
    // Never print key material.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keys(..)")
    }
}

fn audience(kind: TokenKind) -> &'static str {
    match kind {
        TokenKind::Owner => OWNER_AUDIENCE,
        TokenKind::Mcp => MCP_AUDIENCE,
    }
}

impl Keys {
    /// `secret` must not be empty (the relay uses 32 random bytes or a configured key).
    pub fn new(secret: &[u8]) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[ISSUER]);
        validation.set_audience(&[OWNER_AUDIENCE, MCP_AUDIENCE]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        // Expiry is exact: the token row carries the same expiry and is checked too.
        validation.leeway = 0;
        Self {
            encoding: EncodingKey::from_secret(secret).expect("a non-empty secret"),
            decoding: DecodingKey::from_secret(secret).expect("a non-empty secret"),
            validation,
        }
    }

    /// Signs a token for `row`.
    pub fn sign(&self, row: &TokenRow) -> String {
        let claims = Claims {
            iss: ISSUER.into(),
            aud: audience(row.kind).into(),
            sub: row.owner_id.to_string(),
            sid: row.id.to_string(),
            exp: row.expires_at.as_ms() / 1000,
            iat: row.created_at.as_ms() / 1000,
            pair_id: row.pair_id.map(|p| p.to_string()),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .expect("HS256 signing cannot fail")
    }

    pub(super) fn verify(&self, token: &str) -> Option<Claims> {
        jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)
            .ok()
            .map(|data| data.claims)
    }
}

/// The token the claims describe; `None` if they are malformed or mix the two kinds.
pub(super) fn bearer_of(claims: &Claims) -> Option<Bearer> {
    let kind = match claims.aud.as_str() {
        OWNER_AUDIENCE => TokenKind::Owner,
        MCP_AUDIENCE => TokenKind::Mcp,
        _ => return None,
    };
    let pair_id = match (kind, claims.pair_id.as_deref()) {
        (TokenKind::Owner, None) => None,
        (TokenKind::Mcp, Some(pair_id)) => Some(pair_id.parse().ok()?),
        _ => return None,
    };
    Some(Bearer {
        token_id: claims.sid.parse().ok()?,
        owner_id: claims.sub.parse().ok()?,
        kind,
        pair_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::auth::tests::row;
    use sealpost_protocol::ids::PairId;
    use sealpost_time::UnixMillis;

    #[test]
    fn a_signed_token_carries_its_rows_times_in_seconds_and_verifies_to_its_bearer() {
        let keys = Keys::new(b"a test secret of some length");
        let mcp = row(TokenKind::Mcp, Some(PairId::from_bytes([3; 16])));
        let claims = keys.verify(&keys.sign(&mcp)).expect("verifies");
        assert_eq!((claims.exp, claims.iat), (4_000_000_000, 1_700_000_000));
        let bearer = bearer_of(&claims).expect("well formed");
        assert_eq!(
            (
                bearer.token_id,
                bearer.owner_id,
                bearer.kind,
                bearer.pair_id
            ),
            (mcp.id, mcp.owner_id, TokenKind::Mcp, mcp.pair_id)
        );
    }

    #[test]
    fn a_token_past_its_expiry_fails_on_its_own_whatever_its_row_says() {
        let keys = Keys::new(b"a test secret of some length");
        let mut past = row(TokenKind::Owner, None);
        past.expires_at = UnixMillis::from_ms(1_000_000_000_000);
        assert!(keys.verify(&keys.sign(&past)).is_none());
    }

    #[test]
    fn claims_that_mix_the_two_kinds_name_no_bearer() {
        let keys = Keys::new(b"a test secret of some length");
        let owner = keys
            .verify(&keys.sign(&row(TokenKind::Owner, None)))
            .unwrap();
        assert!(bearer_of(&owner).is_some());
        let with_pairing = Claims {
            pair_id: Some(PairId::from_bytes([3; 16]).to_string()),
            ..owner.clone()
        };
        assert!(
            bearer_of(&with_pairing).is_none(),
            "an owner token names no pairing"
        );
        let mcp_without_pairing = Claims {
            aud: MCP_AUDIENCE.into(),
            ..owner.clone()
        };
        assert!(bearer_of(&mcp_without_pairing).is_none());
        let unknown = Claims {
            aud: "someone-else".into(),
            ..owner
        };
        assert!(bearer_of(&unknown).is_none());
    }
}
