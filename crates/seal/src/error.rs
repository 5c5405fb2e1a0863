//! Errors. Each names what was wrong without echoing secret or attacker-controlled bytes.

/// Why a pairing code was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PairingCodeError {
    /// It does not start with `sppair1_`.
    #[error("not a Sealpost pairing code: it must start with 'sppair1_'")]
    WrongPrefix,
    /// The text after the prefix is not base64url.
    #[error("the pairing code is damaged: it is not valid base64url (copy it again)")]
    BadEncoding,
    /// A length field runs past the end, bytes remain, or the origin is too long for its field.
    #[error("the pairing code is damaged: its length does not match its contents (copy it again)")]
    WrongLength,
    /// A version this build does not know.
    #[error("the pairing code has version {0}, which this plugin does not know (update sealpost)")]
    UnknownVersion(u8),
    /// The MCP token is empty, too long or not printable ASCII.
    #[error("the pairing code's token is not a printable ASCII token")]
    BadToken,
    /// The relay origin is not acceptable.
    #[error("the pairing code's relay address is not acceptable: {0}")]
    RelayOrigin(#[from] RelayOriginError),
}

/// Why a relay origin (`scheme://host[:port]`) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RelayOriginError {
    /// Not `https://`, and not `http://` to an exact loopback host.
    #[error("it must be https:// (http:// is allowed only for localhost, 127.0.0.1 or [::1])")]
    Insecure,
    /// Not a bare lowercase origin (a path, user info, a bad port or host).
    #[error(
        "it must be a bare origin like https://relay.example.com or https://relay.example.com:8443"
    )]
    Malformed,
}

/// Why a hello or an envelope was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// Shorter than the fixed layout.
    #[error("the record is shorter than its fixed layout")]
    TooShort,
    /// Longer than the limit for its kind.
    #[error("the record is longer than its limit")]
    TooLong,
    /// A version this build does not know.
    #[error("the record has version {0}, which is not known")]
    UnknownVersion(u8),
    /// A length field disagrees with the record's size.
    #[error("the record's length fields do not match its size")]
    BadLength,
    /// The kind byte is neither call (1) nor reply (2).
    #[error("the envelope kind byte is not call (1) or reply (2)")]
    BadKind,
    /// A call where a reply was expected, or the other way round.
    #[error("the envelope is not of the expected kind")]
    WrongKind,
    /// The envelope names another session.
    #[error("the envelope belongs to another session")]
    WrongSession,
    /// The reply names another call (call id, plugin key or expiry differ).
    #[error("the reply belongs to another call")]
    WrongCall,
    /// The AEAD did not authenticate.
    #[error("the envelope did not authenticate")]
    Undecryptable,
    /// The hello's HMAC tag is wrong.
    #[error("the session hello's tag is wrong (another pairing, or tampered)")]
    BadHelloTag,
    /// The hello names another pairing.
    #[error("the session hello is for another pairing")]
    WrongPairing,
    /// The session is over.
    #[error("the session has expired")]
    Expired,
    /// Expiry before creation, or created in the future.
    #[error("the timestamps are inconsistent (expiry before creation, or created in the future)")]
    BadTimes,
    /// The peer's key makes an all-zero Diffie-Hellman output.
    #[error("the peer's public key gives a non-contributory key exchange")]
    NonContributory,
    /// A catalog update numbered 0 (the hello's own catalog is number 0).
    #[error("a catalog update's number must be 1 or more")]
    BadSequence,
}

impl PairingCodeError {
    /// A stable snake_case code, for tests and for second implementations.
    pub fn code(&self) -> &'static str {
        match self {
            Self::WrongPrefix => "wrong_prefix",
            Self::BadEncoding => "bad_encoding",
            Self::WrongLength => "wrong_length",
            Self::UnknownVersion(_) => "unknown_version",
            Self::BadToken => "bad_token",
            Self::RelayOrigin(RelayOriginError::Insecure) => "insecure_relay_url",
            Self::RelayOrigin(RelayOriginError::Malformed) => "bad_relay_url",
        }
    }
}

impl SealError {
    /// A stable snake_case code, for tests and for second implementations.
    pub fn code(&self) -> &'static str {
        match self {
            Self::TooShort => "too_short",
            Self::TooLong => "too_long",
            Self::UnknownVersion(_) => "unknown_version",
            Self::BadLength => "bad_length",
            Self::BadKind => "bad_kind",
            Self::WrongKind => "wrong_kind",
            Self::WrongSession => "wrong_session",
            Self::WrongCall => "wrong_call",
            Self::Undecryptable => "undecryptable",
            Self::BadHelloTag => "bad_hello_tag",
            Self::WrongPairing => "wrong_pairing",
            Self::Expired => "expired",
            Self::BadTimes => "bad_times",
            Self::NonContributory => "non_contributory",
            Self::BadSequence => "bad_sequence",
        }
    }
}
