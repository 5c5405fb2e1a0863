//! Built with the `documented-errors` feature, which the relay's own tests turn on: an error a
//! route answers must be one its OpenAPI entry lists for that status, or the answer becomes a
//! 500 `undocumented_error` that names the gap. So every error the suite provokes checks the
//! handler's documented list against what the handler really sends, and the lists cannot drift.

use std::collections::HashMap;
use std::sync::OnceLock;

use axum::Json;
use axum::extract::{MatchedPath, Request};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sealpost_protocol::api::ErrorCode;

/// (method in lower case, path template, status) → what the document says of that status.
type Documented = HashMap<(String, String, u16), String>;

fn documented() -> &'static Documented {
    static DOCUMENTED: OnceLock<Documented> = OnceLock::new();
    DOCUMENTED.get_or_init(|| {
        let document: serde_json::Value =
            serde_json::from_str(super::document_json()).expect("the document is JSON");
        let mut documented = Documented::new();
        for (template, item) in document["paths"].as_object().into_iter().flatten() {
            for (method, operation) in item.as_object().into_iter().flatten() {
                for (status, response) in operation["responses"].as_object().into_iter().flatten() {
                    let (Ok(status), Some(description)) =
                        (status.parse(), response["description"].as_str())
                    else {
                        continue;
                    };
                    documented.insert(
                        (method.clone(), template.clone(), status),
                        description.to_owned(),
                    );
                }
            }
        }
        documented
    })
}

pub(super) async fn check(request: Request, next: Next) -> Response {
    let method = request.method().as_str().to_ascii_lowercase();
    let template = request
        .extensions()
        .get::<MatchedPath>()
        .map(|path| path.as_str().to_owned());
    let response = next.run(request).await;
    let (Some(template), Some(&code)) = (template, response.extensions().get::<ErrorCode>()) else {
        return response;
    };
    let status = response.status().as_u16();
    let listed = documented().get(&(method.clone(), template.clone(), status));
    if listed.is_some_and(|description| description.contains(&format!("`{}`", code.as_str()))) {
        return response;
    }
    let gap = format!(
        "{} {template} answered {status} `{}`, which its OpenAPI entry does not list",
        method.to_uppercase(),
        code.as_str()
    );
    eprintln!("undocumented error: {gap}");
    let body = serde_json::json!({"error": {"code": "undocumented_error", "message": gap}});
    (StatusCode::INTERNAL_SERVER_ERROR, Json(body)).into_response()
}
