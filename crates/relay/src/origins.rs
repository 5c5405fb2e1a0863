//! Which other web origins may host pages that use the relay's API from a browser
//! (`--app-origin`, `SEALPOST_APP_ORIGINS`), and the rule a request's `Origin` is judged by.
//!
//! [`AppOrigin`] exists only validated ([`AppOrigin::parse`]): `http://` or `https://`, a host
//! and an optional port, and nothing else, kept as a browser writes an `Origin` header (lower
//! case, international names in punycode, no default port), so the relay compares headers
//! with it byte for byte. The list is exact: no wildcard, no `null`.
//!
//! `OriginRule` judges a request's `Origin` header, once the operator lists any: absent (the
//! plugin, curl, a browser's same-origin `GET`), the relay's own, listed, or another. The
//! relay's own origin is the one its web app is served from; TLS and the public name end at a
//! proxy, so the relay knows it two ways and either is enough:
//! - the `Origin`'s host and port are the request's `Host` (the browser sends both for the page
//!   it shows and the address it asks; the scheme is not compared, since the relay behind a
//!   proxy cannot see it), which keeps the relay's app working whatever `--public-url` says;
//! - or the `Origin` is `--public-url`'s origin, for a proxy that rewrites `Host`.
//!
//! A page can make its `Origin` match `Host` only by being served from a name that leads to
//! the relay (DNS rebinding): it then is, to the browser, a page of that name, holding none of
//! the relay's app's tokens, and no cookie or other ambient credential opens anything here.

use std::fmt;
use std::str::FromStr;

use axum::http::HeaderValue;
use axum::http::uri::Authority;
use url::Url;

/// An origin the operator lists: `http(s)://host[:port]`, as a browser writes it in `Origin`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AppOrigin(String);

/// What is wrong with a value given as an app origin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AppOriginError {
    /// Nothing was given (an empty item of a comma-separated list, say).
    #[error("it is empty")]
    Empty,
    /// `*`, alone or in a host.
    #[error("`*` is not an origin: list each origin that may use the relay")]
    Wildcard,
    /// `null`, the serialised origin of sandboxed, `file:` and `data:` pages.
    #[error("`null` is the origin of sandboxed, file and data pages, which cannot be told apart")]
    Null,
    /// A space, tab, newline or other control character.
    #[error("it contains a space or a control character")]
    Whitespace,
    /// Not `http://` or `https://`.
    #[error("it does not start with http:// or https://")]
    Scheme,
    /// No host after the scheme.
    #[error("it names no host")]
    NoHost,
    /// What the URL parser refused (a bad port, a malformed host).
    #[error("it is not a URL ({0})")]
    Malformed(url::ParseError),
    /// `user@` or `user:password@` before the host.
    #[error("it carries a user name or password")]
    UserInfo,
    /// Something after the port other than a lone `/`.
    #[error("it has a path ({0})")]
    Path(String),
    /// A `?`.
    #[error("it has a query")]
    Query,
    /// A `#`.
    #[error("it has a fragment")]
    Fragment,
}

/// The rule every refusal repeats, after what was wrong.
const RULE: &str = "an app origin is http:// or https://, a host and an optional port, and \
                    nothing else (e.g. https://app.example.com or http://localhost:5173)";

/// A value refused as an app origin: what was wrong, shown with the rule (the command line
/// shows it beside the value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidAppOrigin {
    /// What was wrong.
    pub problem: AppOriginError,
}

impl fmt::Display for InvalidAppOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; {RULE}", self.problem)
    }
}

impl std::error::Error for InvalidAppOrigin {}

impl AppOrigin {
    /// Validates `value` as an app origin and returns it as a browser writes it: scheme and
    /// host in lower case, an international name in punycode, a default port left out, and a
    /// lone trailing `/` dropped. Spaces around it are ignored (a comma-separated list may
    /// have them); anything after the port is refused.
    pub fn parse(value: &str) -> Result<Self, InvalidAppOrigin> {
        Self::check(value.trim()).map_err(|problem| InvalidAppOrigin { problem })
    }

    fn check(value: &str) -> Result<Self, AppOriginError> {
        if value.is_empty() {
            return Err(AppOriginError::Empty);
        }
        if value.contains('*') {
            return Err(AppOriginError::Wildcard);
        }
        if value.eq_ignore_ascii_case("null") {
            return Err(AppOriginError::Null);
        }
        // The URL parser drops tabs and newlines anywhere, and spaces at the ends: an origin
        // that needed that is not written as an origin.
        if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(AppOriginError::Whitespace);
        }
        let scheme_end = value.find("://").ok_or(AppOriginError::Scheme)?;
        let scheme = &value[..scheme_end];
        if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
            return Err(AppOriginError::Scheme);
        }
        // Where the authority ends, as the URL standard reads it for http(s) (`\` is `/`).
        let rest = &value[scheme_end + 3..];
        let authority_end = rest.find(['/', '\\', '?', '#']).unwrap_or(rest.len());
        if authority_end == 0 {
            return Err(AppOriginError::NoHost);
        }
        let url = Url::parse(value).map_err(|error| match error {
            url::ParseError::EmptyHost => AppOriginError::NoHost,
            other => AppOriginError::Malformed(other),
        })?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(AppOriginError::UserInfo);
        }
        if url.query().is_some() {
            return Err(AppOriginError::Query);
        }
        if url.fragment().is_some() {
            return Err(AppOriginError::Fragment);
        }
        // The parser turns `/./` into `/`, so the path is judged as written.
        let path = &rest[authority_end..];
        if !path.is_empty() && path != "/" {
            return Err(AppOriginError::Path(path.to_owned()));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(AppOriginError::NoHost);
        }
        Ok(Self(url.origin().ascii_serialization()))
    }

    /// The origin as a browser writes it, e.g. `https://app.example.com:8443`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for AppOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for AppOrigin {
    type Err = InvalidAppOrigin;

    fn from_str(value: &str) -> Result<Self, InvalidAppOrigin> {
        Self::parse(value)
    }
}

/// What a request's `Origin` is, to a relay that lists app origins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// No `Origin` header: not a browser's cross-origin request. Served as always.
    Absent,
    /// The relay's own web app. Served as always (the browser needs no CORS for it).
    Own,
    /// A listed app origin: served, with CORS headers.
    Listed,
    /// Any other origin, `null` included: refused.
    Refused,
}

/// The listed origins and the relay's public origin, against which requests are judged.
#[derive(Debug, Clone)]
pub(crate) struct OriginRule {
    listed: Vec<AppOrigin>,
    /// `--public-url`'s origin, when it is an http(s) URL.
    public: Option<String>,
}

impl OriginRule {
    pub(crate) fn new(listed: &[AppOrigin], public_url: &str) -> Self {
        let public = Url::parse(public_url)
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https"))
            .map(|url| url.origin().ascii_serialization());
        Self {
            listed: listed.to_vec(),
            public,
        }
    }

    /// Judges a request by its `Origin` and `Host` headers.
    pub(crate) fn judge(
        &self,
        origin: Option<&HeaderValue>,
        host: Option<&HeaderValue>,
    ) -> Verdict {
        let Some(origin) = origin else {
            return Verdict::Absent;
        };
        let origin = origin.as_bytes();
        if self.listed.iter().any(|o| o.as_str().as_bytes() == origin) {
            return Verdict::Listed;
        }
        let own = self
            .public
            .as_deref()
            .is_some_and(|p| p.as_bytes() == origin)
            || host.is_some_and(|host| same_host(origin, host.as_bytes()));
        if own { Verdict::Own } else { Verdict::Refused }
    }
}

/// Whether `origin` (an `Origin` header, as browsers write it) names the host and port of
/// `host` (a `Host` header; without a port, the default of the origin's scheme).
fn same_host(origin: &[u8], host: &[u8]) -> bool {
    let Ok(origin) = std::str::from_utf8(origin) else {
        return false;
    };
    let Ok(url) = Url::parse(origin) else {
        return false;
    };
    if !matches!(url.scheme(), "http" | "https") || url.origin().ascii_serialization() != origin {
        return false;
    }
    let Ok(authority) = Authority::try_from(host) else {
        return false;
    };
    let (Some(origin_host), Some(origin_port)) = (url.host_str(), url.port_or_known_default())
    else {
        return false;
    };
    authority.host().eq_ignore_ascii_case(origin_host)
        && authority.port_u16().unwrap_or(origin_port) == origin_port
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(value: &str, expected: Result<&str, AppOriginError>) {
        let parsed = AppOrigin::parse(value);
        assert_eq!(
            parsed
                .as_ref()
                .map(AppOrigin::as_str)
                .map_err(|e| &e.problem),
            expected.as_ref().map(|s| *s),
            "{value:?}"
        );
    }

    #[test]
    fn an_origin_is_kept_as_a_browser_writes_it() {
        check("https://app.example.com", Ok("https://app.example.com"));
        check(
            "https://app.example.com:8443",
            Ok("https://app.example.com:8443"),
        );
        check("HTTPS://App.Example.COM", Ok("https://app.example.com"));
        check("https://app.example.com:443", Ok("https://app.example.com"));
        check("http://localhost:80", Ok("http://localhost"));
        check("http://localhost:5173", Ok("http://localhost:5173"));
        check("http://127.0.0.1:8080", Ok("http://127.0.0.1:8080"));
        check("http://[::1]:8080", Ok("http://[::1]:8080"));
        check("https://app.example.com/", Ok("https://app.example.com"));
        check(
            "https://bücher.example",
            Ok("https://xn--bcher-kva.example"),
        );
        check(" https://app.example.com ", Ok("https://app.example.com"));
    }

    #[test]
    fn anything_but_an_exact_web_origin_is_refused() {
        use AppOriginError::*;
        check("", Err(Empty));
        check("  ", Err(Empty));
        check("*", Err(Wildcard));
        check("https://*.example.com", Err(Wildcard));
        check("null", Err(Null));
        check("NULL", Err(Null));
        check("app.example.com", Err(Scheme));
        check("https:app.example.com", Err(Scheme));
        check("ftp://app.example.com", Err(Scheme));
        check("ws://app.example.com", Err(Scheme));
        check("file:///home/app", Err(Scheme));
        check("https://", Err(NoHost));
        check("https:///app.example.com", Err(NoHost));
        check("https://:443", Err(NoHost));
        check("https://app.example.com/app", Err(Path("/app".into())));
        check("https://app.example.com//", Err(Path("//".into())));
        check("https://app.example.com/.", Err(Path("/.".into())));
        check("https://app.example.com\\", Err(Path("\\".into())));
        check("https://app.example.com?x=1", Err(Query));
        check("https://app.example.com/?", Err(Query));
        check("https://app.example.com#top", Err(Fragment));
        check("https://user@app.example.com", Err(UserInfo));
        check("https://user:secret@app.example.com", Err(UserInfo));
        check("https://app example.com", Err(Whitespace));
        check("https://app.exa\tmple.com", Err(Whitespace));
        check(
            "https://app.example.com:99999",
            Err(Malformed(url::ParseError::InvalidPort)),
        );
        check(
            "https://[::1",
            Err(Malformed(url::ParseError::InvalidIpv6Address)),
        );
    }

    #[test]
    fn a_refusal_says_what_is_wrong_and_the_rule() {
        let error = AppOrigin::parse("https://app.example.com/app").unwrap_err();
        let text = error.to_string();
        assert!(text.contains("has a path (/app)"), "{text}");
        assert!(
            text.contains("http:// or https://, a host and an optional port"),
            "{text}"
        );
    }

    fn judge(rule: &OriginRule, origin: Option<&str>, host: &str) -> Verdict {
        let origin = origin.map(|o| HeaderValue::from_str(o).unwrap());
        let host = HeaderValue::from_str(host).unwrap();
        rule.judge(origin.as_ref(), Some(&host))
    }

    #[test]
    fn a_request_is_judged_by_its_origin_against_the_list_and_the_relays_own() {
        let listed = [AppOrigin::parse("https://app.example.com").unwrap()];
        let rule = OriginRule::new(&listed, "https://relay.example.com");
        let relay = "relay.internal:8080";
        assert_eq!(judge(&rule, None, relay), Verdict::Absent);
        assert_eq!(
            judge(&rule, Some("https://app.example.com"), relay),
            Verdict::Listed
        );
        // Exactly as listed: another port, scheme or spelling is another origin.
        assert_eq!(
            judge(&rule, Some("https://app.example.com:8443"), relay),
            Verdict::Refused
        );
        assert_eq!(
            judge(&rule, Some("http://app.example.com"), relay),
            Verdict::Refused
        );
        assert_eq!(
            judge(&rule, Some("https://app.example.com/"), relay),
            Verdict::Refused
        );
        // The public URL's origin, whatever the Host a proxy passes on.
        assert_eq!(
            judge(&rule, Some("https://relay.example.com"), relay),
            Verdict::Own
        );
        // The Host the browser asked, whatever the public URL says.
        assert_eq!(
            judge(&rule, Some("http://relay.internal:8080"), relay),
            Verdict::Own
        );
        assert_eq!(
            judge(
                &rule,
                Some("https://relay.internal:8080"),
                "RELAY.internal:8080"
            ),
            Verdict::Own
        );
        assert_eq!(
            judge(&rule, Some("https://relay.internal"), "relay.internal"),
            Verdict::Own
        );
        assert_eq!(
            judge(&rule, Some("https://relay.internal"), "relay.internal:443"),
            Verdict::Own
        );
        assert_eq!(
            judge(&rule, Some("http://relay.internal:8081"), relay),
            Verdict::Refused
        );
        assert_eq!(
            judge(&rule, Some("https://relay.internal"), "relay.internal:8080"),
            Verdict::Refused
        );
        assert_eq!(
            judge(&rule, Some("http://[::1]:8080"), "[::1]:8080"),
            Verdict::Own
        );
        // Anything else, `null` and what no browser writes included.
        assert_eq!(
            judge(&rule, Some("https://evil.example"), relay),
            Verdict::Refused
        );
        assert_eq!(judge(&rule, Some("null"), relay), Verdict::Refused);
        assert_eq!(judge(&rule, Some(""), relay), Verdict::Refused);
        assert_eq!(
            judge(&rule, Some("HTTP://relay.internal:8080"), relay),
            Verdict::Refused
        );
        assert_eq!(
            judge(&rule, Some("http://relay.internal:8080/"), relay),
            Verdict::Refused
        );
        assert_eq!(
            judge(&rule, Some("ws://relay.internal:8080"), relay),
            Verdict::Refused
        );
        let no_host = OriginRule::new(&listed, "https://relay.example.com");
        assert_eq!(
            no_host.judge(
                Some(&HeaderValue::from_static("http://relay.internal:8080")),
                None
            ),
            Verdict::Refused
        );
    }
}
