//! Team sign-in's two pages, browser navigations outside `/v1` (`START_PATH`, `CALLBACK_PATH`),
//! and `GET /v1/auth/providers`, which tells an app whether to offer it. docs/SIGNIN.md walks
//! through the flow.
//!
//! The app sends the browser to the start with its own PKCE challenge; the relay keeps a flow
//! (state, nonce, its own PKCE verifier, a hash of a cookie it sets on this browser) and sends
//! the browser on to the provider. The provider sends it back to the callback, on any replica:
//! the flow is used up, the cookie compared, the code exchanged and the ID token verified, the
//! person's owner found by (issuer, subject), and the browser sent back to the app with a
//! one-time code that only the app's PKCE verifier unlocks (`POST /v1/auth/signin`).

use std::net::IpAddr;

use axum::Json;
use axum::Router;
use axum::extract::{Extension, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use sealpost_protocol::api::{AuthProviders, ErrorBody, OidcProvider};
use serde::Deserialize;
use subtle::ConstantTimeEq as _;

use super::client::ClientAddr;
use super::oidc_page;
use super::state::AppState;
use crate::accounts::{create_bound_signin_link, new_code, secret_hash};
use crate::clock::now_ms;
use crate::oidc::{self, CALLBACK_PATH, Refusal, START_PATH};
use crate::scope::AppScope;
use crate::store::{ConfirmedIdentity, OidcFlow};

/// The cookie that binds a flow to the browser that started it, one per flow
/// (`sealpost_oidc_` and a tag of its state), so two sign-ins started in one browser do not
/// undo each other. `SameSite=Lax`: a browser sends it on the provider's top-level redirect
/// back, and on nothing a third site embeds.
const COOKIE_PREFIX: &str = "sealpost_oidc_";

/// The cookie name of the flow whose state is `state`.
fn cookie_name(state: &str) -> String {
    let tag: String = secret_hash(state)
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("{COOKIE_PREFIX}{tag}")
}

/// The start and callback pages.
pub(crate) fn pages() -> Router<AppState> {
    Router::new()
        .route(START_PATH, get(start))
        .route(CALLBACK_PATH, get(callback))
}

/// `GET /v1/auth/providers`
#[utoipa::path(
    get,
    path = "/v1/auth/providers",
    tag = "accounts",
    responses(
        (status = 200, description = "How people may sign in besides sign-in links: `oidc` is present when the relay is set up for team sign-in.", body = AuthProviders),
        (status = 503, description = "`unavailable`", body = ErrorBody),
    )
)]
pub async fn providers(State(state): State<AppState>) -> Json<AuthProviders> {
    Json(AuthProviders {
        oidc: state.oidc.as_ref().map(|provider| OidcProvider {
            issuer: provider.config().issuer.clone(),
            start_url: format!(
                "{}{START_PATH}",
                state.config.public_url.trim_end_matches('/')
            ),
        }),
    })
}

/// The start's query: the app the sign-in is for and the app's PKCE challenge.
#[derive(Debug, Deserialize)]
struct StartQuery {
    app_origin: Option<String>,
    code_challenge: Option<String>,
    code_challenge_method: Option<String>,
}

/// The callback's query, as the provider sends it (RFC 6749, 4.1.2 and 4.1.2.1).
#[derive(Debug, Deserialize)]
struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

async fn start(
    State(state): State<AppState>,
    Extension(ClientAddr(client)): Extension<ClientAddr>,
    query: Result<Query<StartQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let back = match &query {
        Ok(Query(q)) => app_page(&state, q.app_origin.as_deref()),
        Err(_) => state.config.public_url.clone(),
    };
    let query = match query {
        Ok(Query(query)) => query,
        Err(rejection) => {
            return refused(&Refusal::BadRequest(rejection.body_text()), &back, None);
        }
    };
    match begin(&state, client, query).await {
        Ok(response) => response,
        Err(refusal) => refused(&refusal, &back, None),
    }
}

async fn begin(state: &AppState, client: IpAddr, query: StartQuery) -> Result<Response, Refusal> {
    let provider = state.oidc.as_ref().ok_or(Refusal::NotConfigured)?;
    state
        .rate
        .check_oidc_start(client)
        .map_err(|_| Refusal::RateLimited)?;
    let app = AppScope::named(query.app_origin.as_deref(), &state.config.app_origins)
        .map_err(|not_listed| Refusal::AppOriginNotListed(not_listed.to_string()))?;
    if query.code_challenge_method.as_deref() != Some("S256") {
        return Err(Refusal::BadRequest(
            "The app must send a PKCE challenge with code_challenge_method=S256.".into(),
        ));
    }
    let app_challenge = query
        .code_challenge
        .as_deref()
        .and_then(|text| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(text)
                .ok()
        })
        .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
        .ok_or_else(|| {
            Refusal::BadRequest(
                "code_challenge must be the base64url SHA-256 of the app's verifier.".into(),
            )
        })?;
    let authorization = provider.authorize().await?;
    let browser = new_code();
    let expires_at = now_ms().saturating_add_ms(oidc::FLOW_TTL.as_millis() as u64);
    state
        .store
        .create_oidc_flow(&OidcFlow {
            state_hash: secret_hash(&authorization.state),
            browser_hash: secret_hash(&browser),
            nonce: authorization.nonce,
            pkce_verifier: authorization.pkce_verifier,
            app,
            app_challenge,
            expires_at,
        })
        .await
        .map_err(|error| Refusal::Internal(format!("store the flow: {error}")))?;
    let cookie = format!(
        "{}={browser}; Path=/auth/oidc; Max-Age={}; HttpOnly; SameSite=Lax{}",
        cookie_name(&authorization.state),
        oidc::FLOW_TTL.as_secs(),
        secure(state)
    );
    Ok(redirect(authorization.url.as_str(), Some(&cookie)))
}

async fn callback(
    State(state): State<AppState>,
    Extension(ClientAddr(client)): Extension<ClientAddr>,
    headers: HeaderMap,
    query: Result<Query<CallbackQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let query = match query {
        Ok(Query(query)) => query,
        Err(rejection) => {
            let refusal = Refusal::BadRequest(rejection.body_text());
            return refused(&refusal, &state.config.public_url, None);
        }
    };
    // This flow's cookie, spent whatever the outcome.
    let clear = query.state.as_deref().map(|flow| {
        format!(
            "{}=; Path=/auth/oidc; Max-Age=0; HttpOnly; SameSite=Lax{}",
            cookie_name(flow),
            secure(&state)
        )
    });
    let clear = clear.as_deref();
    let mut back = state.config.public_url.clone();
    // Before the flow is looked up (and deleted): each callback costs the database a write.
    if state.rate.check_oidc_callback(client).is_err() {
        return refused(&Refusal::RateLimited, &back, None);
    }
    match finish(&state, &headers, query, &mut back).await {
        Ok(link) => redirect(&link, clear),
        Err(refusal) => refused(&refusal, &back, clear),
    }
}

/// The callback's work; `back` becomes the flow's app once the flow is known. Returns the link
/// that hands the app its one-time code.
async fn finish(
    state: &AppState,
    headers: &HeaderMap,
    query: CallbackQuery,
    back: &mut String,
) -> Result<String, Refusal> {
    let provider = state.oidc.as_ref().ok_or(Refusal::NotConfigured)?;
    let state_param = query.state.as_deref().ok_or(Refusal::StateUnknown)?;
    let now = now_ms();
    let flow = state
        .store
        .consume_oidc_flow(secret_hash(state_param), now)
        .await
        .map_err(|error| Refusal::Internal(format!("read the flow: {error}")))?
        .ok_or(Refusal::StateUnknown)?;
    *back = app_page(state, flow.app.origin().map(|origin| origin.as_str()));
    let browser = cookie(headers, &cookie_name(state_param)).ok_or(Refusal::BrowserMismatch)?;
    if !bool::from(secret_hash(browser).ct_eq(&flow.browser_hash)) {
        return Err(Refusal::BrowserMismatch);
    }
    if let Some(error) = query.error {
        let description = query.error_description.unwrap_or_default();
        return Err(Refusal::ProviderRefused(format!("{error}: {description}")));
    }
    let code = query.code.ok_or_else(|| {
        Refusal::BadRequest("The provider sent neither a code nor an error.".into())
    })?;
    let signed_in = provider
        .exchange(code, flow.pkce_verifier, &flow.nonce)
        .await?;
    let config = provider.config();
    oidc::admit(&signed_in.claims, config)?;
    let confirmed_until = config
        .recheck
        .map(|every| now.saturating_add_ms(every.as_millis() as u64));
    if provider.at_rest().is_some() && signed_in.refresh_token.is_none() {
        tracing::warn!(issuer = %signed_in.claims.issuer, "the provider gave no refresh token: this person signs in again at each re-check period");
    }
    // Kept only for re-checks, sealed at rest.
    let sealed_refresh_token = provider.at_rest().and_then(|at_rest| {
        let token = signed_in.refresh_token.as_deref()?;
        Some(at_rest.seal(&signed_in.claims.issuer, &signed_in.claims.subject, token))
    });
    let owner = state
        .store
        .owner_for_identity(&ConfirmedIdentity {
            issuer: signed_in.claims.issuer.clone(),
            subject: signed_in.claims.subject.clone(),
            name: oidc::name_hint(&signed_in.claims),
            now,
            confirmed_until,
            sealed_refresh_token,
        })
        .await
        .map_err(|error| Refusal::Internal(format!("find the owner: {error}")))?;
    if owner.disabled {
        return Err(Refusal::OwnerDisabled);
    }
    let link = create_bound_signin_link(
        state.store.as_ref(),
        &state.config.public_url,
        owner.id,
        &flow.app,
        oidc::HANDOFF_CODE_TTL_S,
        flow.app_challenge,
    )
    .await
    .map_err(|error| Refusal::Internal(format!("make the code: {error}")))?;
    tracing::info!(owner = %owner.id, issuer = %signed_in.claims.issuer, app = %flow.app, "team sign-in");
    Ok(link)
}

/// The page a refused sign-in leads back to: the app's own, when it is one the relay lists.
fn app_page(state: &AppState, origin: Option<&str>) -> String {
    match AppScope::named(origin, &state.config.app_origins) {
        Ok(app) => app.origin().map_or_else(
            || format!("{}/", state.config.public_url.trim_end_matches('/')),
            |origin| format!("{origin}/"),
        ),
        Err(_) => format!("{}/", state.config.public_url.trim_end_matches('/')),
    }
}

fn refused(refusal: &Refusal, back: &str, cookie: Option<&str>) -> Response {
    // The code and the reason; never the token, the code or the state.
    tracing::warn!(code = refusal.code(), reason = %refusal, "team sign-in refused");
    let mut response = oidc_page::refused(refusal, back);
    if let Some(cookie) = cookie.and_then(|c| HeaderValue::from_str(c).ok()) {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    response
}

fn redirect(location: &str, cookie: Option<&str>) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(location) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    if let Some(cookie) = cookie.and_then(|c| HeaderValue::from_str(c).ok()) {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// `; Secure` when the relay is served over HTTPS.
fn secure(state: &AppState) -> &'static str {
    if state.config.public_url.starts_with("https://") {
        "; Secure"
    } else {
        ""
    }
}

/// The value of the cookie `name` from the request's `Cookie` headers.
fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(found, _)| *found == name)
        .map(|(_, value)| value)
}
