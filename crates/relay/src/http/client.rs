//! The client's address: the peer of the TCP connection, or, with `--trust-proxy`, the address
//! the proxy in front of the relay reports. Rate limits keyed by address and the request log use
//! it. Without the flag every forwarding header is ignored, since anyone can send one.
//!
//! A trusted proxy appends the address it saw to whatever the client sent, so the relay takes
//! the last entry (one trusted hop): `Forwarded`'s last `for=`, else `X-Forwarded-For`'s last
//! address. A header that names no usable address leaves the peer's.

use std::net::{IpAddr, SocketAddr};

use axum::http::HeaderMap;

/// The address a request came from, as the relay judges it (set by the request middleware).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub IpAddr);

/// The client's address for a request from `peer`.
pub fn client_addr(headers: &HeaderMap, peer: SocketAddr, trust_proxy: bool) -> IpAddr {
    if !trust_proxy {
        return peer.ip();
    }
    last_forwarded_for(headers)
        .or_else(|| last_x_forwarded_for(headers))
        .unwrap_or(peer.ip())
}

/// The last `for=` of the last `Forwarded` header (RFC 7239): `for=192.0.2.1`,
/// `for="[2001:db8::1]:4711"`, `for="192.0.2.1:80"`. Obfuscated names (`_hidden`, `unknown`)
/// are no address.
fn last_forwarded_for(headers: &HeaderMap) -> Option<IpAddr> {
    let last = headers
        .get_all("forwarded")
        .iter()
        .next_back()?
        .to_str()
        .ok()?;
    let element = last.rsplit(',').next()?;
    let value = element.split(';').find_map(|pair| {
        let (key, value) = pair.trim().split_once('=')?;
        key.trim()
            .eq_ignore_ascii_case("for")
            .then_some(value.trim())
    })?;
    parse_node(value.trim_matches('"'))
}

/// The last address of the last `X-Forwarded-For` header.
fn last_x_forwarded_for(headers: &HeaderMap) -> Option<IpAddr> {
    let last = headers
        .get_all("x-forwarded-for")
        .iter()
        .next_back()?
        .to_str()
        .ok()?;
    parse_node(last.rsplit(',').next()?.trim())
}

/// `192.0.2.1`, `192.0.2.1:80`, `[2001:db8::1]`, `[2001:db8::1]:80` or a bare IPv6 address.
fn parse_node(text: &str) -> Option<IpAddr> {
    if let Ok(ip) = text.parse() {
        return Some(ip);
    }
    if let Ok(socket) = text.parse::<SocketAddr>() {
        return Some(socket.ip());
    }
    text.strip_prefix('[')?.split(']').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    fn check(pairs: &[(&'static str, &'static str)], trusted: bool, expected: &str) {
        let peer: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        assert_eq!(
            client_addr(&headers(pairs), peer, trusted),
            expected.parse::<IpAddr>().unwrap(),
            "{pairs:?} trusted={trusted}"
        );
    }

    #[test]
    fn the_client_address_follows_the_trusted_proxy_only() {
        check(&[("x-forwarded-for", "203.0.113.7")], false, "127.0.0.1");
        check(&[("forwarded", "for=203.0.113.7")], false, "127.0.0.1");
        check(&[("x-forwarded-for", "203.0.113.7")], true, "203.0.113.7");
        check(
            &[("x-forwarded-for", "198.51.100.1, 203.0.113.7")],
            true,
            "203.0.113.7",
        );
        check(
            &[
                ("x-forwarded-for", "198.51.100.1"),
                ("x-forwarded-for", "203.0.113.7"),
            ],
            true,
            "203.0.113.7",
        );
        check(
            &[("forwarded", "for=198.51.100.1, for=203.0.113.7;proto=https")],
            true,
            "203.0.113.7",
        );
        check(
            &[("forwarded", "for=\"[2001:db8::1]:4711\"")],
            true,
            "2001:db8::1",
        );
        check(
            &[("forwarded", "for=\"203.0.113.7:80\"")],
            true,
            "203.0.113.7",
        );
        check(
            &[
                ("forwarded", "for=_hidden"),
                ("x-forwarded-for", "203.0.113.9"),
            ],
            true,
            "203.0.113.9",
        );
        check(&[("x-forwarded-for", "not an address")], true, "127.0.0.1");
        check(&[], true, "127.0.0.1");
    }
}
