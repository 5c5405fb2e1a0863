//! The pairing code: one line the web app shows and `sealpost pair` reads.
//!
//! `sppair1_` ‖ base64url-nopad(payload), where payload is
//! `version (1) ‖ P (32) ‖ origin_len (u8) ‖ origin ‖ token_len (u16 BE) ‖ token`.
//! The prefix lets secret scanners match leaked codes.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use zeroize::Zeroizing;

use crate::VERSION;
use crate::error::PairingCodeError;
use crate::fields::Fields;
use crate::origin::{RelayOrigin, validate_relay_origin};
use crate::secret::PairingSecret;

/// Every pairing code starts with this.
pub const PAIRING_CODE_PREFIX: &str = "sppair1_";

/// Longest MCP token a code may carry (a JWT is a few hundred bytes).
const MAX_TOKEN_BYTES: usize = 4096;

/// What a pairing code carries: where the relay is, the MCP token, and `P`.
///
/// The fields are private and every constructor validates, so a `PairingCode` always encodes:
/// the origin is a [`RelayOrigin`] whose length fits the code's one-byte length field, and the
/// token is printable ASCII of at most 4096 bytes.
#[derive(Clone)]
pub struct PairingCode {
    relay_origin: RelayOrigin,
    mcp_token: Zeroizing<String>,
    secret: PairingSecret,
    /// `origin_len` and `token_len` as the payload writes them, computed once by [`Self::new`].
    origin_len: u8,
    token_len: u16,
}

impl PairingCode {
    /// Builds a code, checking the token (and the origin's length) as [`PairingCode::parse`]
    /// would.
    pub fn new(
        relay_origin: RelayOrigin,
        mcp_token: impl Into<String>,
        secret: PairingSecret,
    ) -> Result<Self, PairingCodeError> {
        let mcp_token = Zeroizing::new(mcp_token.into());
        validate_token(&mcp_token)?;
        let origin_len =
            u8::try_from(relay_origin.as_str().len()).map_err(|_| PairingCodeError::WrongLength)?;
        let token_len = u16::try_from(mcp_token.len()).map_err(|_| PairingCodeError::BadToken)?;
        Ok(Self {
            relay_origin,
            mcp_token,
            secret,
            origin_len,
            token_len,
        })
    }

    /// The relay the code points at.
    pub fn relay_origin(&self) -> &RelayOrigin {
        &self.relay_origin
    }

    /// The MCP token. It is a secret: never log it.
    pub fn mcp_token(&self) -> &str {
        &self.mcp_token
    }

    /// The pairing secret `P`.
    pub fn secret(&self) -> &PairingSecret {
        &self.secret
    }

    /// The code's text. It is a secret: never log it.
    pub fn encode(&self) -> Zeroizing<String> {
        let origin = self.relay_origin.as_str().as_bytes();
        let token = self.mcp_token.as_bytes();
        let mut payload = Zeroizing::new(Vec::with_capacity(
            1 + 32 + 1 + origin.len() + 2 + token.len(),
        ));
        payload.push(VERSION);
        payload.extend_from_slice(self.secret.expose());
        payload.push(self.origin_len);
        payload.extend_from_slice(origin);
        payload.extend_from_slice(&self.token_len.to_be_bytes());
        payload.extend_from_slice(token);
        let mut text = String::from(PAIRING_CODE_PREFIX);
        URL_SAFE_NO_PAD.encode_string(payload.as_slice(), &mut text);
        Zeroizing::new(text)
    }

    /// Parses a code as a person pasted it (surrounding whitespace is ignored).
    pub fn parse(text: &str) -> Result<Self, PairingCodeError> {
        let body = text
            .trim()
            .strip_prefix(PAIRING_CODE_PREFIX)
            .ok_or(PairingCodeError::WrongPrefix)?;
        let payload = Zeroizing::new(
            URL_SAFE_NO_PAD
                .decode(body)
                .map_err(|_| PairingCodeError::BadEncoding)?,
        );
        // Fields in the order of the layout above; any short field is the wrong length.
        let mut fields = Fields::new(&payload);
        let [version] = fields.array().ok_or(PairingCodeError::WrongLength)?;
        if version != VERSION {
            return Err(PairingCodeError::UnknownVersion(version));
        }
        let secret =
            PairingSecret::from_bytes(fields.array().ok_or(PairingCodeError::WrongLength)?);
        let [origin_len] = fields.array().ok_or(PairingCodeError::WrongLength)?;
        let origin = fields
            .slice(usize::from(origin_len))
            .ok_or(PairingCodeError::WrongLength)?;
        let token_len = u16::from_be_bytes(fields.array().ok_or(PairingCodeError::WrongLength)?);
        let token = fields
            .slice(usize::from(token_len))
            .ok_or(PairingCodeError::WrongLength)?;
        if !fields.rest().is_empty() {
            return Err(PairingCodeError::WrongLength);
        }
        let origin = std::str::from_utf8(origin).map_err(|_| crate::RelayOriginError::Malformed)?;
        let token = std::str::from_utf8(token).map_err(|_| PairingCodeError::BadToken)?;
        // The origin is checked before the token, as the refusal order in docs/PROTOCOL.md says.
        let origin = validate_relay_origin(origin)?;
        Self::new(origin, token, secret)
    }
}

fn validate_token(token: &str) -> Result<(), PairingCodeError> {
    let printable = token.bytes().all(|b| b.is_ascii_graphic());
    if token.is_empty() || token.len() > MAX_TOKEN_BYTES || !printable {
        return Err(PairingCodeError::BadToken);
    }
    Ok(())
}

impl fmt::Debug for PairingCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PairingCode")
            .field("relay_origin", &self.relay_origin)
            .field("mcp_token", &"<redacted>")
            .field("secret", &self.secret)
            .finish_non_exhaustive()
    }
}
