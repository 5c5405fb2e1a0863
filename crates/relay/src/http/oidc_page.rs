//! The pages a team sign-in answers with when it cannot go on: a heading, what happened, what
//! to do, the stable code, and a link back to the app. No script, nothing from elsewhere; the
//! relay's own app's stylesheet when it serves one (`--web`), so the page looks like the app.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use crate::oidc::Refusal;

/// The page for `refusal`, linking back to `back` (the app the sign-in was for, or the
/// relay's own).
pub fn refused(refusal: &Refusal, back: &str) -> Response {
    let detail = match refusal {
        Refusal::ProviderRefused(why)
        | Refusal::DomainNotAllowed(why)
        | Refusal::ClaimRequired(why)
        | Refusal::BadRequest(why)
        | Refusal::ProviderUnavailable(why) => bounded(why),
        _ => String::new(),
    };
    let body = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <link rel=\"stylesheet\" href=\"/style.css\">\
         <title>{title} · Sealpost</title></head>\n<body>\n<header><p><strong>Sealpost</strong></p>\
         </header>\n<main>\n<h2>{title}</h2>\n<p>{detail}</p>\n<p>{advice}</p>\n\
         <p><a href=\"{back}\">Back to sign-in</a></p>\n\
         <p class=\"muted\"><small>Error code: <code id=\"signin-error\">{code}</code></small></p>\n\
         </main>\n</body></html>\n",
        title = escape(refusal.title()),
        detail = escape(&detail),
        advice = escape(refusal.advice()),
        back = escape(back),
        code = refusal.code(),
    );
    let mut response = (refusal.status(), body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Text from elsewhere (the provider's error description) at most 300 characters, control
/// characters dropped.
fn bounded(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).take(300).collect()
}

/// HTML-escapes text for an element's content or a quoted attribute.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn text_from_elsewhere_cannot_open_markup() {
        assert_eq!(
            escape("<script>\"x\"&'y'</script>"),
            "&lt;script&gt;&quot;x&quot;&amp;&#39;y&#39;&lt;/script&gt;"
        );
    }
}
