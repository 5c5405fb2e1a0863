//! `sealpost-relay healthcheck`: asks the relay on this machine whether it is ready
//! (`GET /readyz`), so a container's health check needs no curl in the image.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use anyhow::{Context as _, bail};

/// Where a relay listening on `listen` answers on this machine: an unspecified address
/// (`0.0.0.0`, `::`) is reached on the loopback of its family.
pub fn local_address(listen: SocketAddr) -> SocketAddr {
    let ip = match listen.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, listen.port())
}

/// Succeeds when the relay listening on `listen` answers `/readyz` with 200 within `timeout`.
pub async fn check(listen: SocketAddr, timeout: Duration) -> anyhow::Result<()> {
    let url = format!("http://{}/readyz", local_address(listen));
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .context("cannot make an HTTP client")?;
    let response = client
        .get(&url)
        .send()
        .await
        .with_context(|| format!("no answer from the relay at {url}"))?;
    let status = response.status();
    if !status.is_success() {
        bail!("the relay at {url} is not ready: {status}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::local_address;

    #[test]
    fn an_unspecified_listen_address_is_checked_on_loopback() {
        let of = |listen: &str| local_address(listen.parse().unwrap()).to_string();
        assert_eq!(of("0.0.0.0:8080"), "127.0.0.1:8080");
        assert_eq!(of("[::]:9000"), "[::1]:9000");
        assert_eq!(of("10.0.0.5:8080"), "10.0.0.5:8080");
    }
}
