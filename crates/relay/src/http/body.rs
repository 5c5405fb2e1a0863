//! Reading request bodies with a hard cap: a declared `Content-Length` above the cap is refused
//! before any byte is read, and a chunked body stops being read at the cap, so an oversized
//! request never costs more memory than the cap. A body that trickles in hits a deadline.

use std::time::Duration;

use axum::body::Body;
use axum::http::HeaderMap;
use axum::http::header::CONTENT_LENGTH;
use http_body_util::BodyExt;
use sealpost_protocol::api::ErrorCode;
use serde::de::DeserializeOwned;

use super::error::{ApiError, ApiResult};

fn too_large(cap: usize) -> ApiError {
    ApiError::new(
        ErrorCode::BodyTooLarge,
        format!("The request body exceeds {cap} bytes."),
    )
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
    let read = async {
        let mut body = body;
        let mut buffer = Vec::new();
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
    serde_json::from_slice(&bytes).map_err(|error| {
        // serde's message names fields and types, never values of unknown size.
        ApiError::new(
            ErrorCode::BadRequest,
            format!("The request body is not valid: {error}."),
        )
    })
}
