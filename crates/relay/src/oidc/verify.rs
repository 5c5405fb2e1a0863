//! The ID token's checks (through `openidconnect`'s verifier: signature by the provider's
//! published keys, `iss`, `aud`, `exp`, `iat`, `nonce`) and who may sign in (allowed domains
//! and required claims, judged only on what the provider vouches for).

use std::time::{Duration, SystemTime};

use base64::Engine as _;
use openidconnect::core::{
    CoreIdToken, CoreIdTokenVerifier, CoreJsonWebKeySet, CoreJwsSigningAlgorithm,
};
use openidconnect::{
    ClaimsVerificationError, ClientId, IssuerUrl, NonceVerifier, SignatureVerificationError,
};
use serde_json::{Map, Value};

use super::args::OidcConfig;
use super::refusal::Refusal;

/// How far the relay's clock and the provider's may disagree: an ID token is accepted this
/// long past its `exp`, and refused if issued further ahead than this.
pub const CLOCK_SKEW: Duration = Duration::from_secs(60);
/// The oldest `iat` accepted: a flow lives this long (`FLOW_TTL`), and the token was issued
/// within it.
pub const MAX_TOKEN_AGE: Duration = Duration::from_secs(15 * 60);

/// Google's issuer: the only one whose `hd` claim counts, as Google sets it for the accounts of
/// a Workspace domain it hosts (another provider may let anyone set any claim).
pub const GOOGLE_ISSUER: &str = "https://accounts.google.com";

/// The signature algorithms accepted: asymmetric only. An HMAC-signed ID token would be signed
/// with the client secret, which a public client does not keep secret; `none` is never accepted.
const ALGORITHMS: [CoreJwsSigningAlgorithm; 10] = [
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256,
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha384,
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha512,
    CoreJwsSigningAlgorithm::RsaSsaPssSha256,
    CoreJwsSigningAlgorithm::RsaSsaPssSha384,
    CoreJwsSigningAlgorithm::RsaSsaPssSha512,
    CoreJwsSigningAlgorithm::EcdsaP256Sha256,
    CoreJwsSigningAlgorithm::EcdsaP384Sha384,
    CoreJwsSigningAlgorithm::EcdsaP521Sha512,
    CoreJwsSigningAlgorithm::EdDsa,
];

/// An ID token that passed every check: who the person is at the provider, and every claim
/// (for the domain and claim rules, and a name).
#[derive(Debug, Clone)]
pub struct VerifiedClaims {
    /// `iss`.
    pub issuer: String,
    /// `sub`: with `iss`, who the person is.
    pub subject: String,
    /// Every claim.
    pub all: Map<String, Value>,
}

/// Verifies `token` now; see [`id_token_at`].
pub fn id_token(
    token: &CoreIdToken,
    config: &OidcConfig,
    jwks: &CoreJsonWebKeySet,
    nonce: impl NonceVerifier,
) -> Result<VerifiedClaims, Refusal> {
    id_token_at(token, config, jwks, nonce, SystemTime::now())
}

/// Verifies `token` as of `now`: signed with one of the provider's keys by an asymmetric
/// algorithm, issued by the configured issuer, for this client, unexpired (within
/// [`CLOCK_SKEW`]), issued within [`MAX_TOKEN_AGE`] and not in the future, and carrying the
/// flow's nonce (`nonce`: the flow's [`openidconnect::Nonce`], or a rule for a refreshed
/// token).
pub fn id_token_at(
    token: &CoreIdToken,
    config: &OidcConfig,
    jwks: &CoreJsonWebKeySet,
    nonce: impl NonceVerifier,
    now: SystemTime,
) -> Result<VerifiedClaims, Refusal> {
    let issuer = IssuerUrl::new(config.issuer.clone())
        .map_err(|error| Refusal::Internal(format!("the issuer URL: {error}")))?;
    let now: chrono::DateTime<chrono::Utc> = now.into();
    let skew = chrono::Duration::from_std(CLOCK_SKEW).expect("small");
    let max_age = chrono::Duration::from_std(MAX_TOKEN_AGE).expect("small");
    let verifier = CoreIdTokenVerifier::new_public_client(
        ClientId::new(config.client_id.clone()),
        issuer,
        jwks.clone(),
    )
    .set_allowed_algs(ALGORITHMS)
    .set_time_fn(move || now - skew)
    .set_issue_time_verifier_fn(move |issued| {
        if issued > now + skew {
            Err(format!("issued in the future ({issued})"))
        } else if issued < now - max_age - skew {
            Err(format!("issued too long ago ({issued})"))
        } else {
            Ok(())
        }
    });
    let claims = token.claims(&verifier, nonce).map_err(refusal)?;
    let all = payload(token)?;
    Ok(VerifiedClaims {
        issuer: claims.issuer().as_str().to_owned(),
        subject: claims.subject().as_str().to_owned(),
        all,
    })
}

/// Every claim of a token whose signature has been verified, as JSON (the payload segment).
fn payload(token: &CoreIdToken) -> Result<Map<String, Value>, Refusal> {
    let text = token.to_string();
    let segment = text
        .split('.')
        .nth(1)
        .ok_or_else(|| Refusal::IdTokenInvalid("not a JWS".into()))?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(segment)
        .map_err(|_| Refusal::IdTokenInvalid("its payload is not base64url".into()))?;
    serde_json::from_slice(&bytes)
        .map_err(|_| Refusal::IdTokenInvalid("its payload is not a JSON object".into()))
}

fn refusal(error: ClaimsVerificationError) -> Refusal {
    match error {
        ClaimsVerificationError::InvalidAudience(why) => Refusal::IdTokenWrongAudience(why),
        ClaimsVerificationError::InvalidIssuer(why) => Refusal::IdTokenWrongIssuer(why),
        ClaimsVerificationError::Expired(why) => Refusal::IdTokenExpired(why),
        ClaimsVerificationError::InvalidNonce(_) => Refusal::IdTokenReplayed,
        ClaimsVerificationError::SignatureVerification(error) => match error {
            SignatureVerificationError::NoSignature => Refusal::IdTokenUnsigned,
            SignatureVerificationError::NoMatchingKey => {
                Refusal::IdTokenUnknownKey("no published key matches its kid and algorithm".into())
            }
            other => Refusal::IdTokenBadSignature(other.to_string()),
        },
        other => Refusal::IdTokenInvalid(other.to_string()),
    }
}

/// Whether the person may sign in: in an allowed domain (when any are listed) and carrying
/// every required claim.
///
/// A domain counts only when the provider vouches for it: `hd` from Google's issuer (set by
/// Google Workspace for its own accounts), or the domain of `email` when `email_verified` is
/// `true`. A bare email address proves nothing: some providers let anyone set any address, and
/// any claim such as `hd`.
pub fn admit(claims: &VerifiedClaims, config: &OidcConfig) -> Result<(), Refusal> {
    if !config.allowed_domains.is_empty() {
        let listed = |domain: &str| {
            config
                .allowed_domains
                .iter()
                .any(|allowed| allowed.eq_ignore_ascii_case(domain))
        };
        let hosted = (claims.issuer == GOOGLE_ISSUER)
            .then(|| claims.all.get("hd").and_then(Value::as_str))
            .flatten();
        let verified_email = (claims.all.get("email_verified") == Some(&Value::Bool(true)))
            .then(|| claims.all.get("email").and_then(Value::as_str))
            .flatten();
        let email_domain = verified_email
            .and_then(|email| email.rsplit_once('@'))
            .map(|(_, d)| d);
        let admitted = hosted.is_some_and(listed) || email_domain.is_some_and(listed);
        if !admitted {
            let why = match (
                claims.all.get("email").and_then(Value::as_str),
                verified_email,
            ) {
                (Some(email), None) => format!(
                    "Your provider has not verified the email address {email}, so its domain \
                     does not count."
                ),
                (Some(email), Some(_)) => {
                    format!("{email} is not in a domain this relay admits.")
                }
                (None, _) => "Your provider did not say which domain your account is in.".into(),
            };
            return Err(Refusal::DomainNotAllowed(why));
        }
    }
    for required in &config.required_claims {
        let holds = match claims.all.get(&required.name) {
            Some(Value::String(value)) => *value == required.value,
            Some(Value::Array(values)) => values
                .iter()
                .any(|value| value.as_str() == Some(required.value.as_str())),
            Some(scalar @ (Value::Bool(_) | Value::Number(_))) => {
                scalar.to_string().as_str() == required.value.as_str()
            }
            _ => false,
        };
        if !holds {
            return Err(Refusal::ClaimRequired(format!(
                "Your account does not carry {}={} as this relay requires.",
                required.name, required.value
            )));
        }
    }
    Ok(())
}

/// The name a new owner gets (what `sealpost-relay owner list` shows): the verified email as
/// it is; otherwise the provider's username or name, or the subject, always followed by a tag
/// of who the person is at the provider, so a name a person chose (`bob@team.example`) never
/// reads as someone's verified address. Never used to find an owner.
pub fn name_hint(claims: &VerifiedClaims) -> String {
    let text = |name: &str| {
        claims
            .all
            .get(name)
            .and_then(Value::as_str)
            .map(|text| {
                text.chars()
                    .filter(|c| !c.is_control())
                    .take(100)
                    .collect::<String>()
            })
            .map(|text| text.trim().to_owned())
            .filter(|text| !text.is_empty())
    };
    let verified = claims.all.get("email_verified") == Some(&Value::Bool(true));
    if let Some(email) = text("email").filter(|_| verified) {
        return email;
    }
    let chosen = text("preferred_username")
        .or_else(|| text("name"))
        .unwrap_or_else(|| claims.subject.chars().take(100).collect());
    format!(
        "{chosen} ({})",
        identity_tag(&claims.issuer, &claims.subject)
    )
}

/// Eight hex digits of SHA-256(issuer, subject): the same for a person on every replica.
pub fn identity_tag(issuer: &str, subject: &str) -> String {
    use sha2::{Digest as _, Sha256};
    let digest = Sha256::new()
        .chain_update(issuer.as_bytes())
        .chain_update([0])
        .chain_update(subject.as_bytes())
        .finalize();
    digest
        .iter()
        .take(4)
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{VerifiedClaims, admit, name_hint};
    use crate::oidc::args::{OidcConfig, RequiredClaim};

    fn config(domains: &[&str], required: &[(&str, &str)]) -> OidcConfig {
        OidcConfig {
            issuer: "https://idp.example".into(),
            client_id: "relay".into(),
            client_secret: None,
            allowed_domains: domains.iter().map(|d| d.to_string()).collect(),
            required_claims: required
                .iter()
                .map(|(name, value)| RequiredClaim {
                    name: name.to_string(),
                    value: value.to_string(),
                })
                .collect(),
            recheck: None,
            prompt_consent: false,
        }
    }

    fn claims(all: serde_json::Value) -> VerifiedClaims {
        VerifiedClaims {
            issuer: "https://idp.example".into(),
            subject: "sub-1".into(),
            all: all.as_object().unwrap().clone(),
        }
    }

    #[test]
    fn a_domain_counts_only_when_the_provider_vouches_for_it() {
        let team = config(&["team.example"], &[]);
        let verified = claims(json!({"email": "a@team.example", "email_verified": true}));
        assert!(admit(&verified, &team).is_ok());
        let upper = claims(json!({"email": "a@TEAM.example", "email_verified": true}));
        assert!(admit(&upper, &team).is_ok());
        let mut hosted = claims(json!({"hd": "team.example"}));
        assert_eq!(
            admit(&hosted, &team).unwrap_err().code(),
            "domain_not_allowed",
            "hd from another issuer than Google's"
        );
        hosted.issuer = super::GOOGLE_ISSUER.into();
        assert!(admit(&hosted, &team).is_ok());
        for refused in [
            json!({"email": "a@team.example", "email_verified": false}),
            json!({"email": "a@team.example"}),
            json!({"email": "a@team.example", "email_verified": "true"}),
            json!({"email": "a@other.example", "email_verified": true}),
            json!({"email": "a@eviltea m.example", "email_verified": true}),
            json!({"email": "a@sub.team.example", "email_verified": true}),
            json!({"hd": "other.example", "email": "a@team.example"}),
            json!({}),
        ] {
            let refusal = admit(&claims(refused.clone()), &team).unwrap_err();
            assert_eq!(refusal.code(), "domain_not_allowed", "{refused}");
        }
        assert!(admit(&claims(json!({})), &config(&[], &[])).is_ok());
    }

    #[test]
    fn a_required_claim_matches_a_value_or_a_member_of_a_list() {
        let needs_group = config(&[], &[("groups", "sealpost")]);
        assert!(admit(&claims(json!({"groups": ["x", "sealpost"]})), &needs_group).is_ok());
        assert!(admit(&claims(json!({"groups": "sealpost"})), &needs_group).is_ok());
        for refused in [
            json!({"groups": ["x"]}),
            json!({}),
            json!({"groups": {"sealpost": 1}}),
        ] {
            let refusal = admit(&claims(refused), &needs_group).unwrap_err();
            assert_eq!(refusal.code(), "claim_required");
        }
        let needs_flag = config(&[], &[("staff", "true")]);
        assert!(admit(&claims(json!({"staff": true})), &needs_flag).is_ok());
        assert!(admit(&claims(json!({"staff": false})), &needs_flag).is_err());
    }

    #[test]
    fn a_name_is_a_verified_email_or_else_carries_the_persons_tag() {
        let name = |all| name_hint(&claims(all));
        assert_eq!(
            name(json!({"email": "a@x.example", "email_verified": true, "name": "A"})),
            "a@x.example"
        );
        let tag = super::identity_tag("https://idp.example", "sub-1");
        assert_eq!(tag.len(), 8);
        assert_eq!(
            name(json!({"email": "a@x.example", "name": "A\u{7}"})),
            format!("A ({tag})")
        );
        assert_eq!(
            name(json!({"preferred_username": "bob@team.example"})),
            format!("bob@team.example ({tag})")
        );
        assert_eq!(name(json!({})), format!("sub-1 ({tag})"));
    }
}
