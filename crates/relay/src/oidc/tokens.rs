//! The token endpoint's answer as the relay reads it: the OAuth 2.0 fields through `oauth2`,
//! and the ID token kept as sent, for the relay to parse itself. A malformed ID token is then
//! refused as such (`id_token_invalid`), not taken for an answer that did not parse, which
//! would read as the provider being down.

use std::time::Duration;

use openidconnect::core::{
    CoreAuthDisplay, CoreAuthPrompt, CoreErrorResponseType, CoreGenderClaim, CoreIdToken,
    CoreJsonWebKey, CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm, CoreRevocableToken,
    CoreRevocationErrorResponse, CoreTokenIntrospectionResponse, CoreTokenType,
};
use openidconnect::{
    AccessToken, EmptyAdditionalClaims, EndpointNotSet, ExtraTokenFields, IdToken,
    OAuth2TokenResponse, RefreshToken, Scope, StandardErrorResponse, StandardTokenResponse,
    TokenResponse,
};
use serde::{Deserialize, Serialize};

use super::refusal::Refusal;

/// `openidconnect`'s core client, answering [`Tokens`].
pub(super) type Client<
    HasAuthUrl = EndpointNotSet,
    HasDeviceAuthUrl = EndpointNotSet,
    HasIntrospectionUrl = EndpointNotSet,
    HasRevocationUrl = EndpointNotSet,
    HasTokenUrl = EndpointNotSet,
    HasUserInfoUrl = EndpointNotSet,
> = openidconnect::Client<
    EmptyAdditionalClaims,
    CoreAuthDisplay,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJsonWebKey,
    CoreAuthPrompt,
    StandardErrorResponse<CoreErrorResponseType>,
    Tokens,
    CoreTokenIntrospectionResponse,
    CoreRevocableToken,
    CoreRevocationErrorResponse,
    HasAuthUrl,
    HasDeviceAuthUrl,
    HasIntrospectionUrl,
    HasRevocationUrl,
    HasTokenUrl,
    HasUserInfoUrl,
>;

/// The `id_token` field, whatever its JSON type.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct RawIdToken {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id_token: Option<serde_json::Value>,
}

impl ExtraTokenFields for RawIdToken {}

/// A token response.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub(super) struct Tokens(StandardTokenResponse<RawIdToken, CoreTokenType>);

impl Tokens {
    /// The ID token, parsed: `None` without one. Its standard claims are read leniently where
    /// providers are known to differ (a boolean as text, a time as an ISO 8601 string: the
    /// crate's `accept-string-booleans` and `accept-rfc3339-timestamps`); the relay's own
    /// rules read the claims as sent (`verify::admit`).
    pub(super) fn parsed_id_token(&self) -> Option<Result<CoreIdToken, Refusal>> {
        let raw = self.0.extra_fields().id_token.clone()?;
        Some(serde_json::from_value(raw).map_err(|error| {
            Refusal::IdTokenInvalid(format!("the ID token does not parse: {error}"))
        }))
    }
}

impl OAuth2TokenResponse for Tokens {
    type TokenType = CoreTokenType;

    fn access_token(&self) -> &AccessToken {
        self.0.access_token()
    }

    fn token_type(&self) -> &CoreTokenType {
        self.0.token_type()
    }

    fn expires_in(&self) -> Option<Duration> {
        self.0.expires_in()
    }

    fn refresh_token(&self) -> Option<&RefreshToken> {
        self.0.refresh_token()
    }

    fn scopes(&self) -> Option<&Vec<Scope>> {
        self.0.scopes()
    }
}

impl
    TokenResponse<
        EmptyAdditionalClaims,
        CoreGenderClaim,
        CoreJweContentEncryptionAlgorithm,
        CoreJwsSigningAlgorithm,
    > for Tokens
{
    /// Never: the relay parses the ID token itself ([`Tokens::parsed_id_token`]).
    fn id_token(
        &self,
    ) -> Option<
        &IdToken<
            EmptyAdditionalClaims,
            CoreGenderClaim,
            CoreJweContentEncryptionAlgorithm,
            CoreJwsSigningAlgorithm,
        >,
    > {
        None
    }
}
