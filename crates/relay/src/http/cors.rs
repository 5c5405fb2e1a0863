//! The Origin gate, installed only when the operator lists app origins (`--app-origin`): a
//! request from a listed origin's page is answered with CORS headers (tower-http's
//! `CorsLayer`), one from the relay's own app or with no `Origin` as it always is, and one from
//! any other origin 403 `origin_not_allowed` before anything else runs: a CORS preflight, and
//! the session channel's upgrade, which browsers open from any page without asking CORS. With
//! no list the gate is not installed: no CORS headers, no `Origin` checked
//! (`origins::OriginRule` says which origin is which).
//!
//! CORS allows no credentials: the API's tokens are bearer tokens in `Authorization` (on the
//! channel, a subprotocol), never cookies, so a listed page uses a token only if it holds one.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE, HOST, ORIGIN, RETRY_AFTER};
use axum::http::{HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use tower::{Layer as _, ServiceExt as _};
use tower_http::cors::{AllowOrigin, CorsLayer};

use super::error::ApiError;
use crate::config::Config;
use crate::origins::{AppOrigin, OriginRule, Verdict};

/// How long a browser may reuse a preflight's answer, in seconds (`Access-Control-Max-Age`):
/// two hours, the most Chromium honours. The answer never changes while the relay runs, and a
/// preflight is per URL, so a page already pays one for each new call it replies to or reads.
pub(crate) const PREFLIGHT_MAX_AGE_S: u64 = 2 * 3600;

/// The judge and the CORS answers of a relay that lists app origins.
#[derive(Debug, Clone)]
pub(crate) struct OriginGate(Arc<Gate>);

#[derive(Debug)]
struct Gate {
    rule: OriginRule,
    cors: CorsLayer,
}

impl OriginGate {
    /// The gate for `config`, or none when it lists no app origin.
    pub(crate) fn new(config: &Config) -> Option<Self> {
        if config.app_origins.is_empty() {
            return None;
        }
        Some(Self(Arc::new(Gate {
            rule: OriginRule::new(&config.app_origins, &config.public_url),
            cors: cors_layer(&config.app_origins),
        })))
    }
}

/// CORS for exactly the listed origins: the API's methods and the two request headers it
/// reads, and `Retry-After` readable (the browser module waits by it), without credentials.
fn cors_layer(origins: &[AppOrigin]) -> CorsLayer {
    let origins = origins.iter().map(|origin| {
        HeaderValue::from_str(origin.as_str()).expect("an app origin is a header value")
    });
    CorsLayer::new()
        .allow_origin(AllowOrigin::list(origins))
        .allow_methods([Method::GET, Method::POST, Method::PUT, Method::DELETE])
        .allow_headers([AUTHORIZATION, CONTENT_TYPE])
        .expose_headers([RETRY_AFTER])
        .max_age(Duration::from_secs(PREFLIGHT_MAX_AGE_S))
}

/// Serves a request as its `Origin` allows: as always, with CORS, or not at all.
pub(crate) async fn gate(State(gate): State<OriginGate>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    match gate.0.rule.judge(headers.get(ORIGIN), headers.get(HOST)) {
        Verdict::Absent | Verdict::Own => next.run(request).await,
        Verdict::Listed => match gate.0.cors.clone().layer(next).oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        },
        Verdict::Refused => {
            let origin = headers.get(ORIGIN).map(HeaderValue::as_bytes);
            let mut refusal =
                ApiError::origin_not_allowed(&String::from_utf8_lossy(origin.unwrap_or_default()))
                    .into_response();
            // The gate stands outside `api_responses`, so that a reshaped error keeps its CORS
            // headers; its own answer is not to be kept either.
            refusal
                .headers_mut()
                .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
            refusal
        }
    }
}
