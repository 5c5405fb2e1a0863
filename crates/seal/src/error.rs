//! Errors. Each names what was wrong without echoing secret or attacker-controlled bytes.

/// Why a pairing code was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PairingCodeError {
    #[error("not a Sealpost pairing code: it must start with 'sppair1_'")]
    WrongPrefix,
    #[error("the pairing code is damaged: it is not valid base64url (copy it again)")]
    BadEncoding,
    #[error("the pairing code is damaged: its length does not match its contents (copy it again)")]
    WrongLength,
    #[error("the pairing code has version {0}, which this plugin does not know (update sealpost)")]
    UnknownVersion(u8),
    #[error("the pairing code's token is not a printable ASCII token")]
    BadToken,
    #[error("the pairing code's relay address is not acceptable: {0}")]
    RelayOrigin(#[from] RelayOriginError),
}

/// Why a relay origin (`scheme://host[:port]`) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RelayOriginError {
    #[error("it must be https:// (http:// is allowed only for localhost, 127.0.0.1 or [::1])")]
    Insecure,
    #[error(
        "it must be a bare origin like https://relay.example.com or https://relay.example.com:8443"
    )]
    Malformed,
}

/// Why a hello or an envelope was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("the record is shorter than its fixed layout")]
    TooShort,
    #[error("the record is longer than its limit")]
    TooLong,
    #[error("the record has version {0}, which is not known")]
    UnknownVersion(u8),
    #[error("the record's length fields do not match its size")]
    BadLength,
    #[error("the envelope kind byte is not call (1) or reply (2)")]
    BadKind,
    #[error("the envelope is not of the expected kind")]
    WrongKind,
    #[error("the envelope belongs to another session")]
    WrongSession,
    #[error("the reply belongs to another call")]
    WrongCall,
    #[error("the envelope did not authenticate")]
    Undecryptable,
    #[error("the session hello's tag is wrong (another pairing, or tampered)")]
    BadHelloTag,
    #[error("the session hello is for another pairing")]
    WrongPairing,
    #[error("the session has expired")]
    Expired,
    #[error("the timestamps are inconsistent (expiry before creation, or created in the future)")]
    BadTimes,
    #[error("the peer's public key gives a non-contributory key exchange")]
    NonContributory,
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
        }
    }
}
