//! `serve`'s team sign-in flags (each with its `SEALPOST_*` variable, derived as every serve
//! flag's is) and what they become: [`OidcConfig`].

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};

/// How an operator points the relay at the team's identity provider.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Team sign-in (OpenID Connect)")]
pub struct OidcArgs {
    /// The provider's issuer URL, exactly as its discovery document states it (e.g.
    /// https://accounts.google.com, https://login.microsoftonline.com/TENANT/v2.0). Turns on
    /// "Sign in with your team's account"; register RELAY/auth/oidc/callback as the client's
    /// only redirect URI.
    #[arg(long, value_name = "URL")]
    pub oidc_issuer: Option<String>,
    /// The client id the provider gave this relay.
    #[arg(long, value_name = "ID", requires = "oidc_issuer")]
    pub oidc_client_id: Option<String>,
    /// File holding the client secret (a confidential client). Without it the relay signs in
    /// as a public client, with PKCE alone.
    #[arg(long, value_name = "FILE", requires = "oidc_issuer")]
    pub oidc_client_secret_file: Option<PathBuf>,
    /// Email domains whose people may sign in, separated by commas. A domain counts only
    /// through claims the provider vouches for: `hd` (Google Workspace), or `email` with
    /// `email_verified: true`. Without any, everyone the provider signs in may (a
    /// tenant-specific issuer is then the boundary).
    #[arg(
        long,
        value_name = "DOMAINS",
        value_delimiter = ',',
        requires = "oidc_issuer"
    )]
    pub oidc_allowed_domains: Vec<String>,
    /// A claim the ID token must carry with this value (or, for a list such as `groups`,
    /// contain), e.g. groups=sealpost-users. Repeat the flag or separate claims with commas
    /// (as the variable does); all must hold.
    #[arg(
        long,
        value_name = "NAME=VALUE",
        value_parser = RequiredClaim::parse,
        value_delimiter = ',',
        requires = "oidc_issuer"
    )]
    pub oidc_required_claim: Vec<RequiredClaim>,
    /// Confirm every person at the provider at least this often (hours; fractions allowed):
    /// the relay renews each sign-in with the provider's refresh token in the background, and
    /// past this many hours without a confirmation the person's tokens stop working until one
    /// succeeds. Access therefore ends within this time of the person's removal at the provider.
    /// Needs a confidential client (--oidc-client-secret-file).
    #[arg(long, value_name = "HOURS", requires = "oidc_client_secret_file")]
    pub oidc_recheck_hours: Option<f64>,
    /// With re-checks, also send prompt=consent when asking for offline access: a provider that
    /// strictly follows OpenID Connect Core grants a refresh token only then (the person sees
    /// its consent page at each sign-in). Google always gets it.
    #[arg(long, requires = "oidc_recheck_hours")]
    pub oidc_prompt_consent: bool,
}

/// `NAME=VALUE`: a claim the ID token must carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequiredClaim {
    /// The claim's name.
    pub name: String,
    /// The value it must have, or a list of it must contain.
    pub value: String,
}

impl RequiredClaim {
    fn parse(text: &str) -> Result<Self, String> {
        match text.split_once('=') {
            Some((name, value)) if !name.trim().is_empty() => Ok(Self {
                name: name.trim().to_owned(),
                value: value.to_owned(),
            }),
            _ => Err(format!("{text:?} is not NAME=VALUE")),
        }
    }
}

/// The provider's client secret: never printed, never logged.
#[derive(Clone)]
pub struct ClientSecret(String);

impl ClientSecret {
    /// A secret read from elsewhere than the flag's file.
    pub fn new(secret: impl Into<String>) -> Self {
        Self(secret.into())
    }

    /// The secret itself, to send to the provider.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ClientSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientSecret(..)")
    }
}

/// Team sign-in as configured: who the provider is and who may sign in.
#[derive(Debug, Clone)]
pub struct OidcConfig {
    /// The issuer, as the provider's discovery document and ID tokens state it.
    pub issuer: String,
    /// The client id the provider gave the relay.
    pub client_id: String,
    /// The client secret; `None`: a public client.
    pub client_secret: Option<ClientSecret>,
    /// Lower-case email domains; empty: any.
    pub allowed_domains: Vec<String>,
    /// Claims the ID token must carry.
    pub required_claims: Vec<RequiredClaim>,
    /// How often a person must be confirmed at the provider; `None`: only at sign-in.
    pub recheck: Option<Duration>,
    /// Whether the sign-in asks for consent (`prompt=consent`) with offline access.
    pub prompt_consent: bool,
}

impl OidcArgs {
    /// The configuration these flags ask for; `None` without `--oidc-issuer`.
    pub fn into_config(self) -> anyhow::Result<Option<OidcConfig>> {
        let Some(issuer) = self.oidc_issuer else {
            return Ok(None);
        };
        let parsed = url::Url::parse(&issuer)
            .with_context(|| format!("--oidc-issuer {issuer:?} is not a URL"))?;
        let loopback = matches!(parsed.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"));
        ensure!(
            parsed.scheme() == "https" || (parsed.scheme() == "http" && loopback),
            "--oidc-issuer must be an https URL (http only on loopback, for tests)"
        );
        let client_id = self
            .oidc_client_id
            .context("--oidc-issuer needs --oidc-client-id")?;
        let client_secret = match self.oidc_client_secret_file {
            None => None,
            Some(path) => {
                let secret = std::fs::read_to_string(&path)
                    .with_context(|| format!("read {}", path.display()))?;
                let secret = secret.trim().to_owned();
                ensure!(!secret.is_empty(), "{} is empty", path.display());
                Some(ClientSecret(secret))
            }
        };
        let recheck = match self.oidc_recheck_hours {
            None => None,
            Some(hours) if hours.is_finite() && hours > 0.0 && hours <= 24.0 * 366.0 => {
                Some(Duration::from_secs_f64(hours * 3600.0))
            }
            Some(hours) => bail!("--oidc-recheck-hours {hours} must be above 0 and at most a year"),
        };
        let allowed_domains = self
            .oidc_allowed_domains
            .iter()
            .map(|domain| domain.trim().trim_start_matches('@').to_ascii_lowercase())
            .filter(|domain| !domain.is_empty())
            .collect();
        Ok(Some(OidcConfig {
            issuer,
            client_id,
            client_secret,
            allowed_domains,
            required_claims: self.oidc_required_claim,
            recheck,
            prompt_consent: self.oidc_prompt_consent,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::{OidcArgs, RequiredClaim};

    #[test]
    fn a_required_claim_is_name_equals_value() {
        assert_eq!(
            RequiredClaim::parse("groups=sealpost=users").unwrap(),
            RequiredClaim {
                name: "groups".into(),
                value: "sealpost=users".into()
            }
        );
        assert!(RequiredClaim::parse("=x").is_err());
        assert!(RequiredClaim::parse("groups").is_err());
    }

    #[test]
    fn an_issuer_is_https_or_loopback_http() {
        let args = |issuer: &str| OidcArgs {
            oidc_issuer: Some(issuer.into()),
            oidc_client_id: Some("relay".into()),
            ..OidcArgs::default()
        };
        assert!(args("https://idp.example").into_config().unwrap().is_some());
        assert!(
            args("http://127.0.0.1:9000")
                .into_config()
                .unwrap()
                .is_some()
        );
        assert!(args("http://idp.example").into_config().is_err());
        assert!(OidcArgs::default().into_config().unwrap().is_none());
    }
}
