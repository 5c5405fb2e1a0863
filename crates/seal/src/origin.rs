//! Which relay addresses a pairing code may carry: `https://host[:port]`, or `http://` to
//! exactly `localhost`, `127.0.0.1` or `[::1]`. Strict on purpose: an origin as a browser writes
//! it (`location.origin`), lowercase, no path, no user info, no trailing slash.
//!
//! [`RelayOrigin`] exists only validated: the one way to make one is [`validate_relay_origin`]
//! (also spelled [`RelayOrigin::parse`] and `str::parse`), so a function that takes one never
//! has to check again.

use std::fmt;
use std::str::FromStr;

use crate::error::RelayOriginError;

const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// A relay origin that passed [`validate_relay_origin`]: `https://host[:port]`, or `http://` to
/// exactly `localhost`, `127.0.0.1` or `[::1]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RelayOrigin(String);

impl RelayOrigin {
    /// Validates `origin`; the same as [`validate_relay_origin`].
    pub fn parse(origin: &str) -> Result<Self, RelayOriginError> {
        validate_relay_origin(origin)
    }

    /// The origin as written, e.g. `https://relay.example.com:8443`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The host and port without the scheme (`relay.example.com:8443`): what errors and logs
    /// name instead of a full URL.
    pub fn host(&self) -> &str {
        self.0
            .split_once("://")
            .map_or(self.0.as_str(), |(_, authority)| authority)
    }
}

impl fmt::Display for RelayOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for RelayOrigin {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl FromStr for RelayOrigin {
    type Err = RelayOriginError;

    fn from_str(origin: &str) -> Result<Self, RelayOriginError> {
        validate_relay_origin(origin)
    }
}

/// Checks that `origin` is a relay origin Sealpost will talk to, and returns it as the proof.
pub fn validate_relay_origin(origin: &str) -> Result<RelayOrigin, RelayOriginError> {
    let (secure, authority) = if let Some(rest) = origin.strip_prefix("https://") {
        (true, rest)
    } else if let Some(rest) = origin.strip_prefix("http://") {
        (false, rest)
    } else {
        return Err(RelayOriginError::Insecure);
    };
    let (host, port) = split_host_port(authority)?;
    if let Some(port) = port {
        let valid = !port.is_empty()
            && port.len() <= 5
            && port.bytes().all(|b| b.is_ascii_digit())
            && port.parse::<u32>().is_ok_and(|p| (1..=65535).contains(&p));
        if !valid {
            return Err(RelayOriginError::Malformed);
        }
    }
    if !is_valid_host(host) {
        return Err(RelayOriginError::Malformed);
    }
    if !secure && !LOOPBACK_HOSTS.contains(&host) {
        return Err(RelayOriginError::Insecure);
    }
    Ok(RelayOrigin(origin.to_owned()))
}

fn split_host_port(authority: &str) -> Result<(&str, Option<&str>), RelayOriginError> {
    if authority.starts_with('[') {
        let end = authority.find(']').ok_or(RelayOriginError::Malformed)?;
        let (host, rest) = authority.split_at(end + 1);
        return match rest {
            "" => Ok((host, None)),
            _ => rest
                .strip_prefix(':')
                .map(|p| (host, Some(p)))
                .ok_or(RelayOriginError::Malformed),
        };
    }
    Ok(match authority.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    })
}

fn is_valid_host(host: &str) -> bool {
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return !inner.is_empty()
            && inner
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.');
    }
    !host.is_empty()
        && host.len() <= 253
        && !host.starts_with(['.', '-'])
        && !host.ends_with(['-'])
        && !host.contains("..")
        && host
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_origins() {
        for origin in [
            "https://relay.example.com",
            "https://relay.example.com:8443",
            "https://10.0.0.1",
            "https://[2001:db8::1]:443",
            "http://localhost",
            "http://localhost:8080",
            "http://127.0.0.1:8080",
            "http://[::1]:8080",
        ] {
            let valid = validate_relay_origin(origin).expect(origin);
            assert_eq!(valid.as_str(), origin);
        }
    }

    #[test]
    fn refused_origins() {
        use RelayOriginError::*;
        for (origin, why) in [
            ("http://relay.example.com", Insecure),
            ("http://localhost.example.com", Insecure),
            ("http://127.0.0.2", Insecure),
            ("http://[::2]", Insecure),
            ("ftp://relay.example.com", Insecure),
            ("relay.example.com", Insecure),
            ("https://relay.example.com/", Malformed),
            ("https://relay.example.com/path", Malformed),
            ("https://user@relay.example.com", Malformed),
            ("https://relay.example.com:0", Malformed),
            ("https://relay.example.com:65536", Malformed),
            ("https://relay.example.com:", Malformed),
            ("https://Relay.Example.com", Malformed),
            ("https://", Malformed),
            ("https://relay.example.com?x", Malformed),
            ("http://localhost:8080@evil.example", Malformed),
            ("https://[::1", Malformed),
        ] {
            assert_eq!(validate_relay_origin(origin), Err(why), "{origin}");
        }
    }

    #[test]
    fn the_host_drops_only_the_scheme() {
        let origin: RelayOrigin = "https://relay.example.com:8443".parse().unwrap();
        assert_eq!(origin.host(), "relay.example.com:8443");
        let origin = RelayOrigin::parse("http://[::1]:8080").unwrap();
        assert_eq!(origin.host(), "[::1]:8080");
    }
}
