//! The HTTP API: routes (each with its OpenAPI annotation), the request log, and the
//! operational endpoints. Handlers live in
//! `accounts`, `sessions` and `calls`; every one is scoped by the token's owner.

use std::net::SocketAddr;
use std::time::Instant;

use axum::Router;
use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use sealpost_protocol::api::ErrorBody;
use sealpost_protocol::ids::Id;
use tower_http::services::ServeDir;
use tower_http::set_header::SetResponseHeaderLayer;
use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(crate) mod accounts;
pub mod auth;
pub(crate) mod body;
pub(crate) mod calls;
pub(crate) mod channel;
pub(crate) mod client;
pub(crate) mod cors;
#[cfg(feature = "documented-errors")]
mod documented;
pub mod error;
pub(crate) mod links;
pub(crate) mod oidc;
mod oidc_page;
mod openapi;
pub(crate) mod reads;
pub(crate) mod session_watch;
pub(crate) mod sessions;
pub(crate) mod state;

use error::{ApiError, ApiResult};
use state::AppState;

/// The web app's content security policy (docs/SECURITY.md, "The relay operator"): only its
/// own origin, wasm allowed.
const CSP: &str = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; connect-src 'self'; frame-ancestors 'none'";

/// Parses an id from a path. A malformed id names nothing, so it answers 404 like a missing one.
pub(crate) fn path_id<I: Id>(text: &str, what: &str) -> ApiResult<I> {
    text.parse().map_err(|_| ApiError::not_found(what))
}

/// Every route with its OpenAPI annotation: the router and the document are built from this one
/// list, so a route cannot be served undocumented (`openapi.rs`).
fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .routes(routes!(accounts::signin))
        .routes(routes!(accounts::signout))
        .routes(routes!(links::signin_link))
        .routes(routes!(accounts::me))
        .routes(routes!(oidc::providers))
        .routes(routes!(
            accounts::create_mcp_token,
            accounts::list_mcp_tokens
        ))
        .routes(routes!(accounts::revoke_mcp_token))
        .routes(routes!(accounts::list_owner_tokens))
        .routes(routes!(accounts::revoke_owner_token))
        .routes(routes!(links::list_signin_links))
        .routes(routes!(links::revoke_signin_link))
        .routes(routes!(sessions::create))
        .routes(routes!(sessions::end))
        .routes(routes!(sessions::live))
        .routes(routes!(sessions::update_catalog))
        .routes(routes!(calls::post))
        .routes(routes!(calls::claim))
        .routes(routes!(calls::reply))
        .routes(routes!(calls::cancel))
        .routes(routes!(reads::read))
        .routes(routes!(channel::open))
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics))
        .routes(routes!(openapi::serve))
}

/// The OpenAPI document of every route the router serves.
pub(crate) fn document() -> utoipa::openapi::OpenApi {
    let mut document = routes().into_openapi();
    openapi::document_origin_refusal(&mut document);
    document
}

/// The generated OpenAPI document as served at `/v1/openapi.json` (pretty JSON).
pub fn document_json() -> &'static str {
    openapi::document_json()
}

/// Builds the router.
pub(crate) fn router(state: AppState) -> Router {
    let (api, _) = routes().split_for_parts();
    let api = api
        .merge(oidc::pages())
        .fallback_service(web_service(&state))
        // Bodies are read by `body::read_capped`, which enforces each endpoint's own cap.
        .layer(axum::extract::DefaultBodyLimit::disable());
    #[cfg(feature = "documented-errors")]
    let api = api.layer(middleware::from_fn(documented::check));
    let api = api
        .layer(middleware::from_fn(api_responses))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth::forget_dead_tokens,
        ));
    // Outside everything that answers a request, so a refused origin reaches none of it and
    // every answer to a listed one (an error `api_responses` reshaped too) has its CORS
    // headers; inside the request log, so a refusal is timed and counted like any answer.
    let api = match cors::OriginGate::new(&state.config) {
        Some(gate) => api.layer(middleware::from_fn_with_state(gate, cors::gate)),
        None => api,
    };
    let api = api
        .layer(middleware::from_fn_with_state(
            state.clone(),
            observe_request,
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ));
    api.with_state(state)
}

fn web_service(state: &AppState) -> Router {
    match &state.config.web_dir {
        Some(dir) => Router::new()
            .fallback_service(ServeDir::new(dir).append_index_html_on_directories(true))
            .layer(middleware::from_fn(no_dotfiles)),
        None => Router::new().fallback(|| async {
            (
                StatusCode::NOT_FOUND,
                "This relay serves no web app. Start it with --web DIR.\n",
            )
        }),
    }
}

/// The web folder never serves a path with a segment that starts with a dot (`.env`, `.git/`):
/// such files are the operator's, not the app's.
async fn no_dotfiles(request: Request, next: Next) -> Response {
    if request.uri().path().split('/').any(|segment| {
        segment.starts_with('.') || segment.starts_with("%2e") || segment.starts_with("%2E")
    }) {
        return (StatusCode::NOT_FOUND, "Not found.\n").into_response();
    }
    next.run(request).await
}

/// Every `/v1` response carries `Cache-Control: no-store` (sign-in and `/v1/me` carry tokens),
/// and every `/v1` error has the documented JSON shape, whoever produced it: the router's 404
/// and 405, or axum's rejection of a path or query. Such a rejection's own text is kept, but
/// bounded (it may quote what the client sent).
async fn api_responses(request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let api = path == "/v1" || path.starts_with("/v1/");
    let mut response = next.run(request).await;
    if !api {
        return response;
    }
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if (status.is_client_error() || status.is_server_error()) && !is_json {
        let allow = response.headers().get(header::ALLOW).cloned();
        let text = axum::body::to_bytes(std::mem::take(response.body_mut()), 4096)
            .await
            .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
            .unwrap_or_default();
        response = shaped_error(status, &text).into_response();
        *response.status_mut() = status;
        if let Some(allow) = allow {
            response.headers_mut().insert(header::ALLOW, allow);
        }
    }
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The documented error for a status that something other than a handler answered with.
fn shaped_error(status: StatusCode, text: &str) -> ApiError {
    use sealpost_protocol::api::ErrorCode;
    match status {
        StatusCode::NOT_FOUND => ApiError::new(ErrorCode::NotFound, "No such endpoint."),
        StatusCode::METHOD_NOT_ALLOWED => ApiError::new(
            ErrorCode::MethodNotAllowed,
            "This endpoint does not take that method (see the Allow header).",
        ),
        StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::new(ErrorCode::BodyTooLarge, "The request body is too large.")
        }
        s if s.is_server_error() => ApiError::new(
            ErrorCode::Unavailable,
            "The relay could not answer. Try again shortly.",
        ),
        _ if text.is_empty() => ApiError::new(ErrorCode::BadRequest, "The request is malformed."),
        _ => ApiError::new(
            ErrorCode::BadRequest,
            format!("The request is malformed: {}", error::bounded(text)),
        ),
    }
}

/// One log line and one latency sample per request: method, route template (ids stay out of
/// the path field), status and duration. Never a body, header value or query string.
async fn observe_request(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(SocketAddr::from(([0, 0, 0, 0], 0)), |info| info.0);
    let client = client::client_addr(request.headers(), peer, state.config.trust_proxy);
    request.extensions_mut().insert(client::ClientAddr(client));
    // `MatchedPath` is shared text: cloning it allocates nothing.
    let route = request.extensions().get::<MatchedPath>().cloned();
    let response = next.run(request).await;
    let (status, ms) = (
        response.status().as_u16(),
        started.elapsed().as_secs_f64() * 1000.0,
    );
    let route = route.as_ref().map_or("static", MatchedPath::as_str);
    state
        .metrics
        .request(method.as_str(), route, status, started.elapsed());
    if response.extensions().get::<error::StoreFailure>().is_some() {
        state.metrics.store_error();
    }
    // Per-request lines are debug-level: at thousands of calls a second they would cost more
    // than the calls. Server errors are always logged.
    if status >= 500 {
        tracing::warn!(%method, route, status, ms, %client, "request failed");
    } else {
        tracing::debug!(%method, route, status, ms, %client, "request");
    }
    response
}

#[utoipa::path(
    get,
    path = "/healthz",
    tag = "operations",
    responses((status = 200, description = "The process is up.", body = String, content_type = "text/plain"))
)]
async fn healthz() -> &'static str {
    "ok"
}

#[utoipa::path(
    get,
    path = "/readyz",
    tag = "operations",
    responses(
        (status = 200, description = "Ready: the database answers.", body = String, content_type = "text/plain"),
        (status = 503, description = "Shutting down, or the database is unavailable.", body = String, content_type = "text/plain"),
    )
)]
async fn readyz(State(state): State<AppState>) -> Response {
    if state.shutdown.is_cancelled() {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down").into_response();
    }
    match state.store.ping().await {
        Ok(()) => (StatusCode::OK, "ready").into_response(),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "database unavailable").into_response(),
    }
}

#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "Prometheus text exposition.", body = String, content_type = "text/plain"),
        (status = 404, description = "`not_found`: the relay serves metrics on their own address (`--metrics-listen`), or the bearer token is not the metrics token (`--metrics-token-file`).", body = ErrorBody),
    )
)]
/// Metrics on the main address: only to a request bearing the configured metrics token. Where
/// a request comes from decides nothing (a proxy on the same host makes every request local).
async fn metrics(State(state): State<AppState>, headers: axum::http::HeaderMap) -> Response {
    let allowed = state.config.metrics_token.as_deref().is_some_and(|token| {
        auth::bearer(&headers).is_some_and(|given| auth::same_secret(given, token))
    });
    if !allowed {
        return ApiError::not_found("page").into_response();
    }
    render_metrics(&state).await
}

async fn render_metrics(state: &AppState) -> Response {
    let by_state = state.store.count_calls_by_state().await.unwrap_or_default();
    let text = state.metrics.render(
        &by_state,
        state.hub.waiters(),
        &state.rate,
        state.large_bodies.in_flight(),
        state.admitted.len(),
        crate::metrics::Standing {
            claims: state.standing_claims.standing(),
            reads: state.standing_reads.standing(),
        },
    );
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// The router of the metrics address: `/metrics` and nothing else, to whoever can reach it.
pub(crate) fn metrics_router(state: AppState) -> Router {
    Router::new()
        .route(
            "/metrics",
            axum::routing::get(|State(state): State<AppState>| async move {
                render_metrics(&state).await
            }),
        )
        .with_state(state)
}
