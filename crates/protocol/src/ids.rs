//! 16-byte random ids (sessions, calls, pairings, tokens) written as unpadded base64url.

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Length of an id's text form: 16 bytes as unpadded base64url.
pub const ID_TEXT_LEN: usize = 22;

/// A 16-byte id. Text form: 22 characters of unpadded base64url.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(value_type = String, example = "AAECAwQFBgcICQoLDA0ODw"))]
pub struct Id16(pub [u8; 16]);

impl Id16 {
    /// An id from its 16 bytes.
    pub const fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(bytes)
    }

    /// The id's 16 bytes.
    pub const fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }
}

/// Why a string is not an id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("an id is 22 characters of unpadded base64url (16 bytes)")]
pub struct BadId;

impl FromStr for Id16 {
    type Err = BadId;

    fn from_str(text: &str) -> Result<Self, BadId> {
        if text.len() != ID_TEXT_LEN {
            return Err(BadId);
        }
        let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| BadId)?;
        let bytes: [u8; 16] = bytes.try_into().map_err(|_| BadId)?;
        // Refuse non-canonical spellings (trailing bits set) so one id has one text form.
        let id = Id16(bytes);
        if id.to_string() != text {
            return Err(BadId);
        }
        Ok(id)
    }
}

impl fmt::Display for Id16 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&URL_SAFE_NO_PAD.encode(self.0))
    }
}

impl fmt::Debug for Id16 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Id16({self})")
    }
}

impl Serialize for Id16 {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Id16 {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_round_trips_through_its_text_form() {
        let id = Id16([7; 16]);
        let text = id.to_string();
        assert_eq!(text.len(), ID_TEXT_LEN);
        assert_eq!(text.parse::<Id16>().unwrap(), id);
    }

    #[test]
    fn a_non_canonical_or_wrong_length_id_is_refused() {
        assert_eq!("short".parse::<Id16>(), Err(BadId));
        let mut text = Id16([0; 16]).to_string();
        text.replace_range(21..22, "B"); // sets trailing bits the 16 bytes do not use
        assert_eq!(text.parse::<Id16>(), Err(BadId));
        assert_eq!("AAAAAAAAAAAAAAAAAAAA+/".parse::<Id16>(), Err(BadId));
    }
}
