//! Ids (one type per kind, from `sealpost-ids`) and bytes carried in JSON as unpadded base64url.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use sealpost_ids::{
    BadId, CallId, ID_LEN, ID_TEXT_LEN, Id, LinkId, OwnerId, PairId, ProposalId, SessionId, TokenId,
};

/// Bytes carried in JSON as unpadded base64url (envelopes, hellos).
#[derive(Clone, PartialEq, Eq, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(value_type = String, format = "base64url"))]
pub struct Base64Bytes(pub Vec<u8>);

impl fmt::Debug for Base64Bytes {
    // Never print the bytes: they are ciphertext at best and would bloat logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Base64Bytes({} bytes)", self.0.len())
    }
}

impl Serialize for Base64Bytes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&URL_SAFE_NO_PAD.encode(&self.0))
    }
}

impl<'de> Deserialize<'de> for Base64Bytes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        URL_SAFE_NO_PAD
            .decode(text.as_bytes())
            .map(Base64Bytes)
            .map_err(|_| serde::de::Error::custom("expected unpadded base64url"))
    }
}
