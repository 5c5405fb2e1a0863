//! The provider as the relay sees it: its discovery document and signing keys, fetched over
//! HTTPS and kept for their HTTP cache lifetimes, and the two requests a sign-in makes of it
//! (the authorization URL, the code exchange), plus the refresh a re-check makes.
//!
//! A provider that does not answer leaves what is cached in use (past its lifetime, with a
//! warning): existing sign-ins never need it, and a sign-in that needs it fails with
//! `provider_unavailable`. An ID token signed by a key the cached set lacks refetches the set
//! once (at sign-in at most every [`JWKS_REFETCH_GAP`]; at a renewal at once), so a key
//! rotation is picked up at once.

use std::time::{Duration, Instant};

use openidconnect::core::{
    CoreAuthenticationFlow, CoreErrorResponseType, CoreJsonWebKeySet, CoreProviderMetadata,
};
use openidconnect::{
    AuthorizationCode, ClientId, ClientSecret, CsrfToken, Nonce, OAuth2TokenResponse as _,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, RefreshToken, RequestTokenError, Scope,
};
use tokio::sync::Mutex;

use super::args::OidcConfig;
use super::at_rest::AtRest;
use super::http::{Http, MIN_LIFETIME, chain};
use super::refusal::Refusal;
use super::tokens::{Client, Tokens};
use super::verify::{self, GOOGLE_ISSUER, VerifiedClaims};

/// With nothing cached, a provider that failed is asked again after this.
const FAILURE_GAP: Duration = Duration::from_secs(5);
/// An unknown `kid` refetches the key set at most this often (a forged token names any kid).
const JWKS_REFETCH_GAP: Duration = Duration::from_secs(10);
/// Each request to the provider.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The relay's callback path; `PUBLIC_URL` + this is the one redirect URI registered.
pub const CALLBACK_PATH: &str = "/auth/oidc/callback";

/// What a sign-in flow sends the provider, and keeps to finish it.
#[derive(Debug)]
pub struct Authorization {
    /// Where the browser goes to sign in.
    pub url: url::Url,
    /// The `state` in the URL.
    pub state: String,
    /// The `nonce` in the URL, which the ID token must carry.
    pub nonce: String,
    /// The verifier of the URL's PKCE challenge.
    pub pkce_verifier: String,
}

/// A finished code exchange: the verified ID token's claims, and the refresh token if the
/// provider gave one.
#[derive(Debug)]
pub struct SignedIn {
    /// The ID token's claims, verified.
    pub claims: VerifiedClaims,
    /// The provider's refresh token, if it gave one.
    pub refresh_token: Option<String>,
}

/// What a refresh at the provider came to: see [`Provider::refresh`].
#[derive(Debug)]
pub enum Refresh {
    /// The provider answered with tokens; the person is confirmed only once
    /// [`Provider::confirm`] has checked them.
    Answered(Refreshed),
    /// The provider refused the refresh token (`invalid_grant`): the person was removed,
    /// disabled, or the grant revoked.
    Refused(String),
    /// The provider did not answer, or said nothing of the person; try again later.
    Unavailable(String),
}

/// The tokens a refresh brought.
#[derive(Debug)]
pub struct Refreshed {
    tokens: Tokens,
}

impl Refreshed {
    /// The refresh token the provider handed back in place of the one presented, which is then
    /// spent: it must be kept before anything else can fail, and the spent one never presented
    /// again (a provider that detects reuse takes it for theft and revokes the grant).
    pub fn rotated_refresh_token(&self) -> Option<&str> {
        self.tokens
            .refresh_token()
            .map(|token| token.secret().as_str())
    }
}

/// Whether a refresh the provider answered confirms the person.
#[derive(Debug)]
pub enum Renewal {
    /// The provider still vouches for the person.
    Confirmed,
    /// The refreshed ID token fails the domain or claim rules: the person may no longer sign in.
    Refused(String),
    /// The answer could not be checked (its ID token does not verify, even with the provider's
    /// keys fetched anew); nothing is said of the person, and the renewal is tried again.
    Unconfirmed(String),
}

/// How far the cached key set is trusted to hold an ID token's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keys {
    /// As cached (refetched only past its lifetime).
    Cached,
    /// A sign-in's token names a key the set lacks: refetched, at most every
    /// [`JWKS_REFETCH_GAP`] (callbacks come from anyone, any number of times).
    Throttled,
    /// A refreshed token names a key the set lacks: refetched now. That token came straight
    /// from the token endpoint for the relay's own client credentials, once per renewal.
    Now,
}

/// The configured provider, its documents cached.
#[derive(Debug)]
pub struct Provider {
    config: OidcConfig,
    /// Refresh tokens' key at rest: with re-checks (which need a confidential client) only.
    at_rest: Option<AtRest>,
    redirect_uri: String,
    http: Http,
    /// One fetch at a time: requests that find the documents stale wait for it.
    documents: Mutex<Cache>,
}

#[derive(Debug, Default)]
struct Cache {
    held: Option<Documents>,
    /// The last failure to fetch, while nothing is held.
    failed: Option<(Instant, Refusal)>,
}

#[derive(Debug, Clone)]
struct Documents {
    metadata: CoreProviderMetadata,
    metadata_fresh_until: Instant,
    jwks: CoreJsonWebKeySet,
    jwks_fresh_until: Instant,
    jwks_fetched_at: Instant,
}

impl Provider {
    /// The provider of `config`, for a relay at `public_url` (its callback's origin).
    pub fn new(config: OidcConfig, public_url: &str) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(REQUEST_TIMEOUT)
            .build()?;
        let at_rest = match (&config.recheck, &config.client_secret) {
            (Some(_), Some(secret)) => Some(AtRest::new(secret)),
            _ => None,
        };
        Ok(Self {
            at_rest,
            redirect_uri: format!("{}{CALLBACK_PATH}", public_url.trim_end_matches('/')),
            config,
            http: Http(client),
            documents: Mutex::new(Cache::default()),
        })
    }

    /// The configuration it was made from.
    pub fn config(&self) -> &OidcConfig {
        &self.config
    }

    /// Reads the provider's documents now (at start, so a wrong issuer shows in the log before
    /// anyone tries to sign in).
    pub async fn check(&self) -> Result<(), Refusal> {
        self.documents(Keys::Cached).await.map(|_| ())
    }

    /// The key refresh tokens are sealed under, when re-checks keep them.
    pub fn at_rest(&self) -> Option<&AtRest> {
        self.at_rest.as_ref()
    }

    /// The provider's documents, refetching what is past its lifetime (or the key set, as
    /// `keys` says).
    async fn documents(&self, keys: Keys) -> Result<Documents, Refusal> {
        let mut cached = self.documents.lock().await;
        let now = Instant::now();
        let Some(held) = cached.held.as_mut() else {
            // Nothing cached yet: a provider that just failed is not asked again at once, so
            // requests queued on the lock do not each wait out a timeout.
            if let Some((at, refusal)) = &cached.failed
                && now.duration_since(*at) < FAILURE_GAP
            {
                return Err(refusal.clone());
            }
            return match self.fetch_all().await {
                Ok(fresh) => {
                    cached.held = Some(fresh.clone());
                    cached.failed = None;
                    Ok(fresh)
                }
                Err(refusal) => {
                    cached.failed = Some((Instant::now(), refusal.clone()));
                    Err(refusal)
                }
            };
        };
        if now >= held.metadata_fresh_until {
            match self.fetch_metadata().await {
                Ok((metadata, lifetime)) => {
                    held.metadata = metadata;
                    held.metadata_fresh_until = now + lifetime;
                }
                Err(refusal) => {
                    // Kept, and not asked for again before the shortest lifetime.
                    held.metadata_fresh_until = now + MIN_LIFETIME;
                    tracing::warn!(
                        code = refusal.code(),
                        "provider discovery refetch failed; keeping the cached document"
                    );
                }
            }
        }
        let rotated = match keys {
            Keys::Cached => false,
            Keys::Throttled => now.duration_since(held.jwks_fetched_at) >= JWKS_REFETCH_GAP,
            Keys::Now => true,
        };
        if now >= held.jwks_fresh_until || rotated {
            match self.fetch_jwks(&held.metadata).await {
                Ok((jwks, lifetime)) => {
                    held.jwks = jwks;
                    held.jwks_fresh_until = now + lifetime;
                    held.jwks_fetched_at = now;
                }
                Err(refusal) => {
                    held.jwks_fresh_until = now + MIN_LIFETIME;
                    held.jwks_fetched_at = now;
                    tracing::warn!(
                        code = refusal.code(),
                        "provider key set refetch failed; keeping the cached keys"
                    );
                }
            }
        }
        Ok(held.clone())
    }

    async fn fetch_all(&self) -> Result<Documents, Refusal> {
        let (metadata, metadata_lifetime) = self.fetch_metadata().await?;
        let (jwks, jwks_lifetime) = self.fetch_jwks(&metadata).await?;
        let now = Instant::now();
        Ok(Documents {
            metadata,
            metadata_fresh_until: now + metadata_lifetime,
            jwks,
            jwks_fresh_until: now + jwks_lifetime,
            jwks_fetched_at: now,
        })
    }

    async fn fetch_metadata(&self) -> Result<(CoreProviderMetadata, Duration), Refusal> {
        let url = format!(
            "{}/.well-known/openid-configuration",
            self.config.issuer.trim_end_matches('/')
        );
        let (body, lifetime) = self.http.get(&url).await?;
        let metadata: CoreProviderMetadata = serde_json::from_slice(&body).map_err(|error| {
            Refusal::ProviderUnavailable(format!("its discovery document does not parse: {error}"))
        })?;
        // OpenID Connect Discovery 1.0, 4.3: the document's issuer is exactly the one asked.
        if metadata.issuer().as_str() != self.config.issuer {
            return Err(Refusal::ProviderUnavailable(format!(
                "its discovery document names the issuer {}, not {}",
                metadata.issuer().as_str(),
                self.config.issuer
            )));
        }
        Ok((metadata, lifetime))
    }

    async fn fetch_jwks(
        &self,
        metadata: &CoreProviderMetadata,
    ) -> Result<(CoreJsonWebKeySet, Duration), Refusal> {
        let (body, lifetime) = self.http.get(metadata.jwks_uri().as_str()).await?;
        let jwks = serde_json::from_slice(&body).map_err(|error| {
            Refusal::ProviderUnavailable(format!("its key set does not parse: {error}"))
        })?;
        Ok((jwks, lifetime))
    }

    fn client_id(&self) -> ClientId {
        ClientId::new(self.config.client_id.clone())
    }

    fn client_secret(&self) -> Option<ClientSecret> {
        self.config
            .client_secret
            .as_ref()
            .map(|secret| ClientSecret::new(secret.expose().to_owned()))
    }

    fn redirect_url(&self) -> Result<RedirectUrl, Refusal> {
        RedirectUrl::new(self.redirect_uri.clone())
            .map_err(|error| Refusal::Internal(format!("the callback URL: {error}")))
    }

    /// A new sign-in: the authorization URL with a fresh state, nonce and PKCE challenge.
    pub async fn authorize(&self) -> Result<Authorization, Refusal> {
        let documents = self.documents(Keys::Cached).await?;
        let client = Client::from_provider_metadata(
            documents.metadata,
            self.client_id(),
            self.client_secret(),
        )
        .set_redirect_uri(self.redirect_url()?);
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client
            .authorize_url(
                CoreAuthenticationFlow::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .add_scope(Scope::new("email".into()))
            .add_scope(Scope::new("profile".into()))
            .set_pkce_challenge(challenge);
        if self.at_rest.is_some() {
            // Re-checks renew with a refresh token. Google refuses the standard scope and asks
            // for its own parameters instead; everyone else takes `offline_access` (OpenID
            // Connect Core 1.0, 11).
            // A strict provider grants `offline_access` only with `prompt=consent`
            // (`--oidc-prompt-consent`); Google never gives a second refresh token without it.
            if self.config.issuer == GOOGLE_ISSUER {
                request = request
                    .add_extra_param("access_type", "offline")
                    .add_extra_param("prompt", "consent");
            } else {
                request = request.add_scope(Scope::new("offline_access".into()));
                if self.config.prompt_consent {
                    request = request.add_extra_param("prompt", "consent");
                }
            }
        }
        let (url, state, nonce) = request.url();
        Ok(Authorization {
            url,
            state: state.secret().clone(),
            nonce: nonce.secret().clone(),
            pkce_verifier: verifier.secret().clone(),
        })
    }

    /// Exchanges an authorization code (with the flow's PKCE verifier) and verifies the ID
    /// token it brings against the flow's nonce.
    pub async fn exchange(
        &self,
        code: String,
        pkce_verifier: String,
        nonce: &str,
    ) -> Result<SignedIn, Refusal> {
        let documents = self.documents(Keys::Cached).await?;
        let client = Client::from_provider_metadata(
            documents.metadata.clone(),
            self.client_id(),
            self.client_secret(),
        )
        .set_redirect_uri(self.redirect_url()?);
        let response: Tokens = client
            .exchange_code(AuthorizationCode::new(code))
            .map_err(|error| {
                Refusal::ProviderUnavailable(format!("it has no token endpoint: {error}"))
            })?
            .set_pkce_verifier(PkceCodeVerifier::new(pkce_verifier))
            .request_async(&self.http)
            .await
            .map_err(token_error)?;
        let id_token = response.parsed_id_token().ok_or_else(|| {
            Refusal::IdTokenInvalid("the token response has no ID token".into())
        })??;
        let id_token = &id_token;
        let nonce = Nonce::new(nonce.to_owned());
        let claims = match verify::id_token(id_token, &self.config, &documents.jwks, &nonce) {
            Err(Refusal::IdTokenUnknownKey(_)) => {
                let documents = self.documents(Keys::Throttled).await?;
                verify::id_token(id_token, &self.config, &documents.jwks, &nonce)?
            }
            other => other?,
        };
        Ok(SignedIn {
            claims,
            refresh_token: response.refresh_token().map(|token| token.secret().clone()),
        })
    }

    /// Presents `refresh_token` to the provider. Only `invalid_grant` is a refusal (the grant
    /// is gone: the person removed or disabled, or the token revoked); any other error says
    /// nothing about the person. An answer may carry a rotated refresh token, which the caller
    /// keeps at once ([`Refreshed::rotated_refresh_token`]) before [`Self::confirm`] checks it.
    pub async fn refresh(&self, refresh_token: &str) -> Refresh {
        let documents = match self.documents(Keys::Cached).await {
            Ok(documents) => documents,
            Err(refusal) => return Refresh::Unavailable(refusal.to_string()),
        };
        let client = Client::from_provider_metadata(
            documents.metadata,
            self.client_id(),
            self.client_secret(),
        );
        let token = RefreshToken::new(refresh_token.to_owned());
        let request = match client.exchange_refresh_token(&token) {
            Ok(request) => request,
            Err(error) => return Refresh::Unavailable(format!("no token endpoint: {error}")),
        };
        match request.request_async(&self.http).await {
            Ok(tokens) => Refresh::Answered(Refreshed { tokens }),
            Err(RequestTokenError::ServerResponse(refused))
                if *refused.error() == CoreErrorResponseType::InvalidGrant =>
            {
                Refresh::Refused(refused.to_string())
            }
            Err(other) => Refresh::Unavailable(chain(&other)),
        }
    }

    /// Whether a refresh's answer confirms `subject`. A fresh ID token in it is verified (its
    /// key fetched anew when the cached set lacks it, as at sign-in: a rotation at the
    /// provider costs nothing) and held to the domain and claim rules again, so a person taken
    /// out of a required group is refused too.
    pub async fn confirm(&self, refreshed: &Refreshed, subject: &str) -> Renewal {
        let Some(id_token) = refreshed.tokens.parsed_id_token() else {
            return Renewal::Confirmed;
        };
        let id_token = match id_token {
            Ok(id_token) => id_token,
            Err(refusal) => {
                return Renewal::Unconfirmed(format!("the refreshed ID token: {refusal}"));
            }
        };
        // OpenID Connect Core 1.0, 12.2: the same person, no nonce to hold it to.
        let any_nonce = |_: Option<&Nonce>| Ok(());
        let verified = match self.documents(Keys::Cached).await {
            Ok(documents) => verify::id_token(&id_token, &self.config, &documents.jwks, any_nonce),
            Err(refusal) => Err(refusal),
        };
        let verified = match verified {
            Err(Refusal::IdTokenUnknownKey(_)) => match self.documents(Keys::Now).await {
                Ok(documents) => {
                    verify::id_token(&id_token, &self.config, &documents.jwks, any_nonce)
                }
                Err(refusal) => Err(refusal),
            },
            other => other,
        };
        let claims = match verified {
            Ok(claims) if claims.subject == subject => claims,
            Ok(_) => {
                return Renewal::Unconfirmed("the refreshed ID token names another subject".into());
            }
            Err(refusal) => {
                return Renewal::Unconfirmed(format!("the refreshed ID token: {refusal}"));
            }
        };
        match verify::admit(&claims, &self.config) {
            Ok(()) => Renewal::Confirmed,
            Err(refusal) => Renewal::Refused(refusal.to_string()),
        }
    }
}

/// How a failed code exchange reads: the provider refused it, or did not answer.
fn token_error<E: std::error::Error, T: openidconnect::ErrorResponse>(
    error: RequestTokenError<E, T>,
) -> Refusal {
    match error {
        RequestTokenError::ServerResponse(refused) => {
            Refusal::ProviderRefused(format!("the code exchange: {refused}"))
        }
        other => Refusal::ProviderUnavailable(format!("the code exchange: {}", chain(&other))),
    }
}
