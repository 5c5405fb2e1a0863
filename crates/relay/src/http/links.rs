//! Sign-in links: a signed-in owner makes one for another device of their own, lists the
//! unused ones (whoever made them) and voids any.

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use sealpost_protocol::api::{
    ErrorBody, ErrorCode, SigninLinkInfo, SigninLinkList, SigninLinkRequest, SigninLinkResponse,
};

use super::accounts::{app_origin, deadline, small_body_timeout};
use super::auth::OwnerAuth;
use super::body::read_optional_json;
use super::error::{ApiError, ApiResult};
use super::path_id;
use super::state::AppState;
use crate::accounts::{Minter, create_app_signin_link};
use crate::clock::now_ms;
use crate::scope::AppScope;
use crate::shares::{has_room, refusal};

/// `Retry-After` of `too_many_signin_links`: unused links expire within their TTL.
const SIGNIN_LINKS_RETRY_S: u64 = 60;

/// `POST /v1/auth/signin-links`: a signed-in owner links another device of their own, to the
/// relay's own app or a listed host app.
#[utoipa::path(
    post,
    path = "/v1/auth/signin-links",
    tag = "accounts",
    security(("bearer" = [])),
    request_body(content = Option<SigninLinkRequest>, description = "Optional: the app the link signs in to; without a body, the relay's own app."),
    responses(
        (status = 200, description = "A one-time sign-in link for another device: `ORIGIN/#signin=CODE&relay=RELAY` for a host app. The sign-in it makes keeps the absolute end of the sign-in that asked for it.", body = SigninLinkResponse),
        (status = 400, description = "`bad_request`, `app_origin_not_listed`: an origin the relay does not list.", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`wrong_token_kind`: an MCP token. `outside_app_scope`: a host app's token asked for the relay's own app or another origin.", body = ErrorBody),
        (status = 408, description = "`body_timeout`", body = ErrorBody),
        (status = 413, description = "`body_too_large`", body = ErrorBody),
        (status = 429, description = "`rate_limited`, `owner_rate_limited`, `too_many_signin_links`", body = ErrorBody),
        (status = 503, description = "`unavailable`", body = ErrorBody),
    )
)]
pub async fn signin_link(
    State(state): State<AppState>,
    auth: OwnerAuth,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<SigninLinkResponse>> {
    let (cap, timeout) = small_body_timeout(&state);
    let request: SigninLinkRequest = read_optional_json(&headers, body, cap, timeout).await?;
    let target = AppScope::named(request.app_origin.as_deref(), &state.config.app_origins)
        .map_err(|not_listed| {
            ApiError::new(
                ErrorCode::AppOriginNotListed,
                format!("{not_listed}. Leave app_origin out for the relay's own app."),
            )
        })?;
    let own = auth.app_scope();
    if !own.may_link_to(&target) {
        return Err(ApiError::new(
            ErrorCode::OutsideAppScope,
            format!(
                "This sign-in belongs to {own}, which makes sign-in links for itself only \
                 (app_origin \"{own}\"); a link for {target} is made from the relay's own app."
            ),
        ));
    }
    let now = now_ms();
    let quota = state.config.limits.max_live_signin_codes_per_owner;
    // A link counts against the app it signs in to.
    let held = state
        .store
        .live_grants(auth.owner_id(), now)
        .await?
        .signin_codes_by_app();
    if !has_room(quota, &held, &target) {
        return Err(ApiError::quota(
            ErrorCode::TooManySigninLinks,
            format!(
                "{} Use one, revoke one on the Tokens page of the relay's own app, or wait for \
                 them to expire.",
                refusal("unused sign-in links", quota, &held, &target)
            ),
            SIGNIN_LINKS_RETRY_S,
        ));
    }
    // The sign-in made from the link keeps this one's absolute end: chaining links never
    // lengthens a sign-in's life. It is this one's child: signing this one out ends it.
    let minter = Minter {
        token: auth.row().id,
        lifetime_ends_at: deadline(&state, auth.row()),
    };
    let (link, expires_at) = create_app_signin_link(
        state.store.as_ref(),
        &state.config.public_url,
        auth.owner_id(),
        &target,
        state.config.limits.signin_code_ttl_s,
        Some(minter),
    )
    .await?;
    Ok(Json(SigninLinkResponse { link, expires_at }))
}

/// `GET /v1/signin-links`: the owner's unused sign-in links, so one kept in reserve by a
/// stolen sign-in can be found and voided.
#[utoipa::path(
    get,
    path = "/v1/signin-links",
    tag = "accounts",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The owner's unused, unexpired sign-in links (never their codes), with the app each signs in to and the sign-in that made it: every app's for a token of the relay's own app, its own app's for a host app's token.", body = SigninLinkList),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`wrong_token_kind`: an MCP token.", body = ErrorBody),
        (status = 429, description = "`rate_limited`, `owner_rate_limited`", body = ErrorBody),
        (status = 503, description = "`unavailable`", body = ErrorBody),
    )
)]
pub async fn list_signin_links(
    State(state): State<AppState>,
    auth: OwnerAuth,
) -> ApiResult<Json<SigninLinkList>> {
    let rows = state
        .store
        .list_signin_links(auth.owner_id(), auth.app_scope(), now_ms())
        .await?;
    let links = rows
        .into_iter()
        .map(|row| SigninLinkInfo {
            id: row.id,
            app_origin: app_origin(&row.app),
            minted_by: row.minted_by,
            created_at: row.created_at,
            expires_at: row.expires_at,
        })
        .collect();
    Ok(Json(SigninLinkList { links }))
}

/// `DELETE /v1/signin-links/{id}`: voids one unused sign-in link.
#[utoipa::path(
    delete,
    path = "/v1/signin-links/{id}",
    tag = "accounts",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The link's id.")),
    responses(
        (status = 204, description = "Voided: the link signs no one in."),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`wrong_token_kind`: an MCP token.", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
        (status = 429, description = "`rate_limited`, `owner_rate_limited`", body = ErrorBody),
        (status = 503, description = "`unavailable`", body = ErrorBody),
    )
)]
pub async fn revoke_signin_link(
    State(state): State<AppState>,
    auth: OwnerAuth,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let id = path_id(&id, "link")?;
    if !state
        .store
        .revoke_signin_link(auth.owner_id(), auth.app_scope(), id)
        .await?
    {
        return Err(ApiError::not_found("link"));
    }
    tracing::info!(link = %id, "sign-in link revoked by its owner");
    Ok(StatusCode::NO_CONTENT)
}
