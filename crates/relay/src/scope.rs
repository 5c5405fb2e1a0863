//! Which app a sign-in code, token, session or call belongs to: the relay's own web app, or a
//! host app on an origin the operator lists (`--app-origin`); and what a token of each reaches.
//!
//! A row's app is recorded when the relay makes it, from what made it, never from a request's
//! `Origin` header (which any program writes as it likes): a sign-in code from the CLI's
//! `--app` or from the `app_origin` of the request that minted it, checked against the list; a
//! sign-in from its code; an MCP token and a session from the owner token that made them; a
//! call from its session.
//!
//! - Sessions, pairings and calls are per app, the relay's own included: a token acts on its
//!   own app's alone, and the store compares the token row's app with the session's or call's
//!   in the statement that does the work.
//! - Tokens are seen and revoked by their own app's tokens, and by the relay's own app's
//!   ([`AppScope::reaches_tokens_of`]): the relay's own app is where a person signs out a lost
//!   device of any app.
//! - A sign-in link for the relay's own app or any listed origin is made by the CLI or a
//!   relay's-own-app token; a host app's token makes links for its own app only
//!   ([`AppScope::may_link_to`]).

use std::fmt;

use crate::origins::{AppOrigin, InvalidAppOrigin};

/// The app a row belongs to. Stored as its origin, or `''` for the relay's own app (a plain
/// `=` then says "the same app" in both SQL dialects, where `NULL = NULL` is not true).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum AppScope {
    /// The relay's own web app (and the CLI's links without `--app`). Every row made before
    /// apps were recorded is its.
    #[default]
    RelayApp,
    /// A host app served from a listed origin.
    HostApp(AppOrigin),
}

/// An `app_origin` the operator does not list (or not an origin at all).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{given} is not one of this relay's app origins ({})", listed_in_words(.listed))]
pub struct NotListed {
    /// The value as given.
    pub given: String,
    /// The origins the relay lists.
    pub listed: Vec<AppOrigin>,
}

fn listed_in_words(listed: &[AppOrigin]) -> String {
    if listed.is_empty() {
        return "it lists none: --app-origin, SEALPOST_APP_ORIGINS".into();
    }
    let origins: Vec<_> = listed.iter().map(AppOrigin::as_str).collect();
    format!("--app-origin, SEALPOST_APP_ORIGINS: {}", origins.join(", "))
}

impl AppScope {
    /// The app a request or a command names: none is the relay's own; an origin must be one of
    /// `listed`, compared as a browser writes it.
    pub fn named(given: Option<&str>, listed: &[AppOrigin]) -> Result<Self, NotListed> {
        let Some(given) = given else {
            return Ok(Self::RelayApp);
        };
        let not_listed = || NotListed {
            given: given.to_owned(),
            listed: listed.to_vec(),
        };
        let origin = AppOrigin::parse(given).map_err(|_| not_listed())?;
        if listed.contains(&origin) {
            Ok(Self::HostApp(origin))
        } else {
            Err(not_listed())
        }
    }

    /// The host app's origin; `None` for the relay's own app.
    pub fn origin(&self) -> Option<&AppOrigin> {
        match self {
            Self::RelayApp => None,
            Self::HostApp(origin) => Some(origin),
        }
    }

    /// Whether a token of this app may make a sign-in link that signs in to `target`: the
    /// relay's own app for any app, a host app for itself alone.
    pub fn may_link_to(&self, target: &AppScope) -> bool {
        *self == Self::RelayApp || self == target
    }

    /// Whether a token of this app sees and may revoke a token of `other`: its own app's, and
    /// for the relay's own app every app's.
    pub fn reaches_tokens_of(&self, other: &AppScope) -> bool {
        *self == Self::RelayApp || self == other
    }

    /// The app as its `app_origin` column holds it.
    pub(crate) fn stored(&self) -> &str {
        self.origin().map_or("", AppOrigin::as_str)
    }

    /// The app an `app_origin` column holds.
    pub(crate) fn from_stored(stored: &str) -> Result<Self, InvalidAppOrigin> {
        if stored.is_empty() {
            return Ok(Self::RelayApp);
        }
        AppOrigin::parse(stored).map(Self::HostApp)
    }
}

impl fmt::Display for AppScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::RelayApp => f.write_str("the relay's own app"),
            Self::HostApp(origin) => write!(f, "{origin}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(origin: &str) -> AppScope {
        AppScope::HostApp(AppOrigin::parse(origin).unwrap())
    }

    #[test]
    fn an_app_is_named_only_from_the_list_as_a_browser_writes_it() {
        let listed = [AppOrigin::parse("https://a.example").unwrap()];
        assert_eq!(AppScope::named(None, &listed), Ok(AppScope::RelayApp));
        assert_eq!(
            AppScope::named(Some("HTTPS://A.example:443/"), &listed),
            Ok(app("https://a.example"))
        );
        for refused in [
            "https://b.example",
            "https://a.example/path",
            "*",
            "",
            "null",
        ] {
            let error = AppScope::named(Some(refused), &listed).unwrap_err();
            assert!(
                error.to_string().contains("https://a.example"),
                "the refusal names the list: {error}"
            );
        }
        let none = AppScope::named(Some("https://a.example"), &[]).unwrap_err();
        assert!(none.to_string().contains("lists none"), "{none}");
    }

    #[test]
    fn the_relays_own_app_links_and_reaches_every_app_and_a_host_app_only_itself() {
        let (relay, a, b) = (
            AppScope::RelayApp,
            app("https://a.example"),
            app("https://b.example"),
        );
        for (from, to, allowed) in [
            (&relay, &relay, true),
            (&relay, &a, true),
            (&a, &a, true),
            (&a, &relay, false),
            (&a, &b, false),
        ] {
            assert_eq!(from.may_link_to(to), allowed, "{from} links to {to}");
            assert_eq!(from.reaches_tokens_of(to), allowed, "{from} reaches {to}");
        }
    }

    #[test]
    fn an_app_is_stored_as_its_origin_and_the_relays_own_as_empty() {
        for scope in [AppScope::RelayApp, app("http://localhost:5173")] {
            assert_eq!(AppScope::from_stored(scope.stored()), Ok(scope.clone()));
        }
        assert_eq!(AppScope::RelayApp.stored(), "");
        assert!(AppScope::from_stored("not an origin").is_err());
    }
}
