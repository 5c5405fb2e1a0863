//! Which relay addresses a pairing code may carry: `https://host[:port]`, or `http://` to
//! exactly `localhost`, `127.0.0.1` or `[::1]`. Strict on purpose: an origin as a browser writes
//! it (`location.origin`), lowercase, no path, no user info, no trailing slash.

use crate::error::RelayOriginError;

const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// Checks that `origin` is a relay origin Sealpost will talk to.
pub fn validate_relay_origin(origin: &str) -> Result<(), RelayOriginError> {
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
    Ok(())
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
            assert_eq!(validate_relay_origin(origin), Ok(()), "{origin}");
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
}
