//! The relay's HTTP client for the provider (no redirects followed, a timeout, a cap on what
//! is read) and how long what it fetches may be kept.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use openidconnect::{AsyncHttpClient, HttpRequest, HttpResponse};

use super::refusal::Refusal;

/// A document the provider sends without a cache lifetime is kept this long.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(3600);
/// The shortest and longest a document is kept, whatever its headers say: `no-store` must not
/// turn every sign-in into two fetches, nor a year's `max-age` pin a rotated key out.
pub(super) const MIN_LIFETIME: Duration = Duration::from_secs(60);
const MAX_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// The largest document or token response read from the provider.
const MAX_RESPONSE_BYTES: usize = 1 << 20;

/// An error and its sources, `outer: inner: …`.
pub(super) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// The relay's HTTP client for the provider: no redirects followed, a timeout, and a cap on
/// what is read.
#[derive(Debug, Clone)]
pub(super) struct Http(pub(super) reqwest::Client);

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(super) struct HttpError(String);

impl Http {
    /// A document and how long it may be kept.
    pub(super) async fn get(&self, url: &str) -> Result<(Vec<u8>, Duration), Refusal> {
        let unavailable = |what: String| Refusal::ProviderUnavailable(format!("{url}: {what}"));
        let response = self
            .0
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|error| unavailable(error.to_string()))?;
        if !response.status().is_success() {
            return Err(unavailable(format!("HTTP {}", response.status())));
        }
        let lifetime = cache_lifetime(response.headers());
        let body = read_capped(response)
            .await
            .map_err(|error| unavailable(error.0))?;
        Ok((body, lifetime))
    }
}

async fn read_capped(mut response: reqwest::Response) -> Result<Vec<u8>, HttpError> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| HttpError(error.to_string()))?
    {
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(HttpError(format!(
                "a response above {MAX_RESPONSE_BYTES} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

impl<'c> AsyncHttpClient<'c> for Http {
    type Error = HttpError;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, HttpError>> + Send + 'c>>;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        Box::pin(async move {
            let request = reqwest::Request::try_from(request)
                .map_err(|error| HttpError(error.to_string()))?;
            let response = self
                .0
                .execute(request)
                .await
                .map_err(|error| HttpError(chain(&error)))?;
            let mut answer = openidconnect::http::Response::builder().status(response.status());
            for (name, value) in response.headers() {
                answer = answer.header(name, value);
            }
            let body = read_capped(response).await?;
            answer
                .body(body)
                .map_err(|error| HttpError(error.to_string()))
        })
    }
}

/// How long a response may be kept, from its `Cache-Control` (`max-age`; `no-store` and
/// `no-cache` count as zero), within the floor and ceiling above.
fn cache_lifetime(headers: &reqwest::header::HeaderMap) -> Duration {
    let mut lifetime = None;
    for value in headers.get_all(reqwest::header::CACHE_CONTROL) {
        let Ok(text) = value.to_str() else { continue };
        for directive in text.split(',').map(str::trim) {
            let lower = directive.to_ascii_lowercase();
            if lower == "no-store" || lower == "no-cache" {
                lifetime = Some(Duration::ZERO);
            } else if let Some(seconds) = lower.strip_prefix("max-age=")
                && let Ok(seconds) = seconds.trim_matches('"').parse::<u64>()
            {
                lifetime = Some(
                    lifetime
                        .unwrap_or(Duration::MAX)
                        .min(Duration::from_secs(seconds)),
                );
            }
        }
    }
    lifetime
        .unwrap_or(DEFAULT_LIFETIME)
        .clamp(MIN_LIFETIME, MAX_LIFETIME)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use reqwest::header::{CACHE_CONTROL, HeaderMap, HeaderValue};

    use super::cache_lifetime;

    fn lifetime(values: &[&str]) -> Duration {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(CACHE_CONTROL, HeaderValue::from_str(value).unwrap());
        }
        cache_lifetime(&headers)
    }

    #[test]
    fn a_document_is_kept_for_its_max_age_within_bounds() {
        assert_eq!(lifetime(&["public, max-age=600"]), Duration::from_secs(600));
        assert_eq!(lifetime(&[]), Duration::from_secs(3600));
        assert_eq!(lifetime(&["no-store"]), Duration::from_secs(60));
        assert_eq!(lifetime(&["max-age=5"]), Duration::from_secs(60));
        assert_eq!(
            lifetime(&["max-age=31536000"]),
            Duration::from_secs(24 * 3600)
        );
        assert_eq!(
            lifetime(&["max-age=900", "max-age=300"]),
            Duration::from_secs(300)
        );
        assert_eq!(lifetime(&["max-age=bogus"]), Duration::from_secs(3600));
    }
}
