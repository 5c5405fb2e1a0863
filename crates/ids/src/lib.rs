//! Sealpost's ids: 16 random bytes each, one type per kind, so an owner id cannot be passed
//! where a session id is asked for, and a call id cannot stand in for a token id.
//!
//! ```compile_fail
//! use sealpost_ids::{OwnerId, SessionId};
//! fn end_session(_owner: OwnerId, _session: SessionId) {}
//! let (owner, session) = (OwnerId::from_bytes([1; 16]), SessionId::from_bytes([2; 16]));
//! end_session(session, owner); // swapped: does not compile
//! ```
//!
//! The bytes are private: an id is made from bytes only by saying which kind it is.
//!
//! ```compile_fail
//! let id = sealpost_ids::CallId::from_bytes([1; 16]);
//! let _bytes = id.0; // private: does not compile
//! ```
//!
//! Every kind has the same text form, 22 characters of unpadded base64url, and one spelling
//! per id (non-canonical spellings are refused). On the wire an id is its 16 bytes (inside
//! sealed records) or its text (JSON), the same for every kind, so typing them changed no byte.
//!
//! A leaf crate (base64 and thiserror; serde and utoipa behind features) so `seal`, which may
//! depend on crypto crates alone, and `protocol` name the same types.

#![warn(missing_docs)]

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Length of an id in bytes.
pub const ID_LEN: usize = 16;

/// Length of an id's text form: 16 bytes as unpadded base64url.
pub const ID_TEXT_LEN: usize = 22;

/// Why a string is not an id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("an id is 22 characters of unpadded base64url (16 bytes)")]
pub struct BadId;

/// What every id kind offers, for code that handles ids of any kind alike (storage columns,
/// random draws, path segments).
pub trait Id:
    Copy
    + Eq
    + std::hash::Hash
    + fmt::Debug
    + fmt::Display
    + FromStr<Err = BadId>
    + Send
    + Sync
    + 'static
{
    /// An id of this kind from its 16 bytes.
    fn from_bytes(bytes: [u8; ID_LEN]) -> Self;
    /// The id's 16 bytes.
    fn as_bytes(&self) -> &[u8; ID_LEN];
}

fn parse(text: &str) -> Result<[u8; ID_LEN], BadId> {
    if text.len() != ID_TEXT_LEN {
        return Err(BadId);
    }
    let bytes: [u8; ID_LEN] = URL_SAFE_NO_PAD
        .decode(text)
        .map_err(|_| BadId)?
        .try_into()
        .map_err(|_| BadId)?;
    // Refuse non-canonical spellings (trailing bits set) so one id has one text form.
    if URL_SAFE_NO_PAD.encode(bytes) != text {
        return Err(BadId);
    }
    Ok(bytes)
}

macro_rules! id_kinds {
    ($($(#[$doc:meta])* $name:ident,)*) => {$(
        $(#[$doc])*
        ///
        /// Text form: 22 characters of unpadded base64url (16 bytes).
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[cfg_attr(
            feature = "openapi",
            derive(utoipa::ToSchema),
            schema(value_type = String, example = "AAECAwQFBgcICQoLDA0ODw")
        )]
        pub struct $name([u8; ID_LEN]);

        impl $name {
            /// An id of this kind from its 16 bytes.
            pub const fn from_bytes(bytes: [u8; ID_LEN]) -> Self {
                Self(bytes)
            }

            /// The id's 16 bytes.
            pub const fn as_bytes(&self) -> &[u8; ID_LEN] {
                &self.0
            }
        }

        impl Id for $name {
            fn from_bytes(bytes: [u8; ID_LEN]) -> Self {
                Self(bytes)
            }

            fn as_bytes(&self) -> &[u8; ID_LEN] {
                &self.0
            }
        }

        impl AsRef<[u8]> for $name {
            fn as_ref(&self) -> &[u8] {
                &self.0
            }
        }

        impl FromStr for $name {
            type Err = BadId;

            fn from_str(text: &str) -> Result<Self, BadId> {
                parse(text).map(Self)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&URL_SAFE_NO_PAD.encode(self.0))
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({})"), self)
            }
        }

        #[cfg(feature = "serde")]
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        #[cfg(feature = "serde")]
        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserializer.deserialize_str(serde_impl::IdVisitor::<Self>::new())
            }
        }
    )*};
}

id_kinds! {
    /// An owner: the account a team's tokens, pairings and calls belong to.
    OwnerId,
    /// A bearer token (owner or MCP kind), named by its id in lists and revocations.
    TokenId,
    /// A pairing: derived from the pairing secret, shared by the plugin and the tab it paired.
    PairId,
    /// A session: one tab's hello, chosen by the tab, and the calls sealed to it.
    SessionId,
    /// A call: one sealed request and its reply.
    CallId,
    /// A proposal: a note change (create, append, edit) waiting for the person's review.
    ProposalId,
    /// An unused sign-in link: its one-time code is never stored, so lists and revocations
    /// name it by this id.
    LinkId,
}

#[cfg(feature = "serde")]
mod serde_impl {
    use std::fmt;
    use std::marker::PhantomData;

    use super::Id;

    /// Reads borrowed, owned and escaped strings alike.
    pub(crate) struct IdVisitor<I>(PhantomData<I>);

    impl<I> IdVisitor<I> {
        pub(crate) fn new() -> Self {
            Self(PhantomData)
        }
    }

    impl<I: Id> serde::de::Visitor<'_> for IdVisitor<I> {
        type Value = I;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an id: 22 characters of unpadded base64url")
        }

        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<I, E> {
            super::parse(text).map(I::from_bytes).map_err(E::custom)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_round_trips_through_its_text_form() {
        let id = CallId::from_bytes([7; 16]);
        let text = id.to_string();
        assert_eq!(text.len(), ID_TEXT_LEN);
        assert_eq!(text.parse::<CallId>().unwrap(), id);
        assert_eq!(format!("{id:?}"), format!("CallId({text})"));
    }

    #[test]
    fn a_non_canonical_or_wrong_length_id_is_refused() {
        assert_eq!("short".parse::<SessionId>(), Err(BadId));
        let mut text = SessionId::from_bytes([0; 16]).to_string();
        text.replace_range(21..22, "B"); // sets trailing bits the 16 bytes do not use
        assert_eq!(text.parse::<SessionId>(), Err(BadId));
        assert_eq!("AAAAAAAAAAAAAAAAAAAA+/".parse::<SessionId>(), Err(BadId));
    }

    #[test]
    fn every_kind_has_the_same_text_for_the_same_bytes() {
        let bytes = [0xA5; 16];
        let text = OwnerId::from_bytes(bytes).to_string();
        for other in [
            TokenId::from_bytes(bytes).to_string(),
            PairId::from_bytes(bytes).to_string(),
            SessionId::from_bytes(bytes).to_string(),
            CallId::from_bytes(bytes).to_string(),
            ProposalId::from_bytes(bytes).to_string(),
            LinkId::from_bytes(bytes).to_string(),
        ] {
            assert_eq!(other, text);
        }
    }

    #[cfg(feature = "serde")]
    #[test]
    fn json_reads_plain_and_escaped_text_and_refuses_the_rest() {
        let id = PairId::from_bytes([3; 16]);
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(serde_json::from_str::<PairId>(&json).unwrap(), id);
        // An escaped character makes serde_json hand over an owned string.
        let escaped = json.replacen('A', "\\u0041", 1);
        assert_ne!(escaped, json);
        assert_eq!(serde_json::from_str::<PairId>(&escaped).unwrap(), id);
        assert!(serde_json::from_str::<PairId>("\"short\"").is_err());
        assert!(serde_json::from_str::<PairId>("7").is_err());
    }
}
