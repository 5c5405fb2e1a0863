//! Reading request bodies with a hard cap: a declared `Content-Length` above the cap is refused
//! before any byte is read, and a chunked body stops being read at the cap, so an oversized
//! request never costs more memory than the cap. A body that trickles in hits a deadline.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::HeaderMap;
use axum::http::header::CONTENT_LENGTH;
use axum::response::{IntoResponse as _, Response};
use http_body_util::BodyExt;
use sealpost_protocol::api::ErrorCode;
use sealpost_protocol::ids::OwnerId;
use serde::de::DeserializeOwned;

use crate::caps::{LargePlace, NoPlace};
use crate::metrics::RefusedRequest;

use super::error::{ApiError, ApiResult, bounded};

fn too_large(cap: usize) -> ApiError {
    ApiError::new(
        ErrorCode::BodyTooLarge,
        format!("The request body exceeds {cap} bytes."),
    )
}

/// Admits `owner`'s request whose body may be up to `cap` bytes, holding one of the few places
/// for a large body while the returned guard lives; before any of the body is read, 429
/// `too_many_large_bodies` when the owner holds their share of the places, 503 `busy` when they
/// are all taken.
pub fn admit(
    state: &super::state::AppState,
    owner: OwnerId,
    headers: &HeaderMap,
    cap: usize,
) -> ApiResult<Option<LargePlace>> {
    state
        .large_bodies
        .admit(owner, headers, cap)
        .map_err(|refused| no_place(state, refused))
}

/// The refusal of a large body that found no place (HTTP and the channel alike), counted.
pub(crate) fn no_place(state: &super::state::AppState, refused: NoPlace) -> ApiError {
    match refused {
        NoPlace::Owner => {
            state
                .metrics
                .request_refused(RefusedRequest::LargeBodiesPerOwner);
            ApiError::quota(
                ErrorCode::TooManyLargeBodies,
                format!(
                    "Your tokens are already sending {} large bodies, the most allowed at once; \
                     retry when one is done.",
                    state.config.limits.max_large_bodies_per_owner
                ),
                1,
            )
            // An unread body may follow on this connection: close it rather than read it.
            .closing()
        }
        NoPlace::All => {
            state.metrics.request_refused(RefusedRequest::LargeBodies);
            ApiError::busy(
                "The relay is receiving as many large bodies as it allows at once; retry.",
            )
        }
    }
}

/// Reads at most `cap` bytes of `body` within `timeout`.
pub async fn read_capped(
    headers: &HeaderMap,
    body: Body,
    cap: usize,
    timeout: Duration,
) -> ApiResult<Vec<u8>> {
    if let Some(declared) = headers.get(CONTENT_LENGTH) {
        let declared: u64 = declared
            .to_str()
            .ok()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| {
                ApiError::new(ErrorCode::BadRequest, "Content-Length is not a number.")
            })?;
        if declared > cap as u64 {
            return Err(too_large(cap));
        }
    }
    // Sized once from what the client declared (never above the cap), not grown by doubling.
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
        .map_or(0, |n| n.min(cap));
    let read = async {
        let mut body = body;
        let mut buffer = Vec::with_capacity(declared);
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|_| {
                ApiError::new(ErrorCode::BadRequest, "The request body was cut off.")
            })?;
            if let Ok(data) = frame.into_data() {
                if buffer.len() + data.len() > cap {
                    return Err(too_large(cap));
                }
                buffer.extend_from_slice(&data);
            }
        }
        Ok(buffer)
    };
    tokio::time::timeout(timeout, read).await.map_err(|_| {
        ApiError::new(
            ErrorCode::BodyTimeout,
            "The request body arrived too slowly.",
        )
    })?
}

/// Reads and parses a JSON body of at most `cap` bytes.
pub async fn read_json<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Body,
    cap: usize,
    timeout: Duration,
) -> ApiResult<T> {
    let bytes = read_capped(headers, body, cap, timeout).await?;
    parse_json(&bytes)
}

/// Reads and parses a JSON body of at most `cap` bytes that may be left out: an empty body, or
/// `null`, is `T::default()`.
pub async fn read_optional_json<T: DeserializeOwned + Default>(
    headers: &HeaderMap,
    body: Body,
    cap: usize,
    timeout: Duration,
) -> ApiResult<T> {
    let bytes = read_capped(headers, body, cap, timeout).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    parse_json::<Option<T>>(&bytes).map(Option::unwrap_or_default)
}

fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> ApiResult<T> {
    serde_json::from_slice(bytes).map_err(|error| {
        // serde may quote what it was sent (an unknown field's name): bounded.
        ApiError::new(
            ErrorCode::BadRequest,
            format!(
                "The request body is not valid: {}.",
                bounded(&error.to_string())
            ),
        )
    })
}

/// Frames a large response body is sent in: hyper asks for the next only once its write buffer
/// has room, so a guard released with the last frame is held until nearly all was sent.
const SEND_FRAME_BYTES: usize = 64 * 1024;

/// `value` as a JSON response whose `guard` is held while the body is being sent (or until the
/// connection is dropped), so a cap on large replies counts the sending, not only the building.
pub fn json_holding<T: serde::Serialize, G: Send + Sync + Unpin + 'static>(
    value: &T,
    guard: G,
) -> Response {
    let bytes = match serde_json::to_vec(value) {
        Ok(bytes) => bytes::Bytes::from(bytes),
        Err(_) => {
            return ApiError::new(ErrorCode::Unavailable, "The reply could not be encoded.")
                .into_response();
        }
    };
    let mut response = Response::new(Body::new(Framed {
        rest: bytes,
        guard: Some(guard),
    }));
    response.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    response
}

struct Framed<G> {
    rest: bytes::Bytes,
    guard: Option<G>,
}

impl<G: Unpin> http_body::Body for Framed<G> {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        if self.rest.is_empty() {
            self.guard = None;
            return Poll::Ready(None);
        }
        let n = self.rest.len().min(SEND_FRAME_BYTES);
        let frame = self.rest.split_to(n);
        Poll::Ready(Some(Ok(http_body::Frame::data(frame))))
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.rest.len() as u64)
    }
}
