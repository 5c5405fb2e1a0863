//! Connections are bounded: slow or idle clients are dropped, clients that never read are
//! dropped, the number open is capped (in all and per address), and a cap answers at once
//! (`shares` shows that connections with nothing in flight make room for new ones first).
//! Each test fails on a relay served by plain `axum::serve` (no timer, no cap): its client
//! would wait forever, which the outer `timeout` turns into a failure.

use std::net::SocketAddr;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use sealpost_testkit::{Relay, pairing};
use sealpost_testkit::{TempDir, TestDb};

/// Far longer than any timeout these tests configure: reaching it means the defence is gone.
const GIVE_UP: Duration = Duration::from_secs(20);

fn addr(relay: &Relay) -> SocketAddr {
    relay.running.as_ref().unwrap().addr
}

/// Reads until the server closes the connection (EOF or reset); returns what arrived.
async fn read_until_closed(tcp: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match tcp.read(&mut buf).await {
            Ok(0) | Err(_) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}

async fn connect_from(source: [u8; 4], to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from((source, 0))).unwrap();
    socket.connect(to).await.unwrap()
}

#[tokio::test]
async fn a_client_that_sends_its_headers_slowly_is_dropped() {
    let relay = Relay::start(TestDb::sqlite(), |c| c.limits.header_read_timeout_ms = 300).await;
    let mut tcp = TcpStream::connect(addr(&relay)).await.unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let got = tokio::time::timeout(GIVE_UP, read_until_closed(&mut tcp))
        .await
        .expect("the relay kept a connection whose headers never ended");
    // hyper answers a header timeout with 408 or just closes; either way nothing was served.
    assert!(!String::from_utf8_lossy(&got).contains("200 OK"));
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed() {
    let relay = Relay::start(TestDb::sqlite(), |c| c.limits.header_read_timeout_ms = 300).await;
    let mut tcp = TcpStream::connect(addr(&relay)).await.unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let got = tokio::time::timeout(GIVE_UP, read_until_closed(&mut tcp))
        .await
        .expect("an idle keep-alive connection stayed open");
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
}

#[tokio::test]
async fn past_the_connection_cap_a_client_is_answered_503_at_once_and_the_relay_recovers() {
    let relay = Relay::start(TestDb::sqlite(), |c| {
        c.limits.max_connections = 4;
        c.limits.max_wait_ms = 500;
        c.limits.header_read_timeout_ms = 500;
    })
    .await;
    let p = pairing(&relay, "alice").await;
    let call = relay.post_call(&p.mcp, p.session, b"call").await;
    // Four waiting reads fill the cap: every connection has a request in flight, so none can
    // be closed to make room.
    let mut busy = Vec::new();
    for _ in 0..4 {
        let mut tcp = TcpStream::connect(addr(&relay)).await.unwrap();
        let read = format!(
            "GET /v1/calls/{call}?wait_ms=500 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n",
            p.mcp
        );
        tcp.write_all(read.as_bytes()).await.unwrap();
        busy.push(tcp);
    }
    // Wait until the relay holds all four reads (a state, read from its gauge).
    relay
        .wait_for_metric("sealpost_longpolls_open{kind=\"read\"}", 4.0)
        .await;
    let mut fifth = TcpStream::connect(addr(&relay)).await.unwrap();
    let got = tokio::time::timeout(GIVE_UP, read_until_closed(&mut fifth))
        .await
        .expect("a connection past the cap was left waiting");
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(text.contains("too_many_connections"), "{text}");
    assert!(
        text.to_ascii_lowercase().contains("retry-after: 1"),
        "{text}"
    );
    // The reads end at their wait, their connections by the idle timeout, and the relay
    // answers again.
    for tcp in &mut busy {
        tokio::time::timeout(GIVE_UP, read_until_closed(tcp))
            .await
            .expect("a connection was kept");
    }
    relay
        .wait_for_metric("sealpost_connections_open", 0.0)
        .await;
    let (status, _) = relay.send(Method::GET, "/healthz", None, None).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn one_address_cannot_take_every_connection() {
    let relay = Relay::start(TestDb::sqlite(), |c| {
        c.limits.max_connections_per_address = 2;
        c.limits.header_read_timeout_ms = 60_000;
    })
    .await;
    let _a = connect_from([127, 0, 0, 2], addr(&relay)).await;
    let _b = connect_from([127, 0, 0, 2], addr(&relay)).await;
    let mut third = connect_from([127, 0, 0, 2], addr(&relay)).await;
    let got = tokio::time::timeout(GIVE_UP, read_until_closed(&mut third))
        .await
        .expect("a third connection from one address was left waiting");
    assert!(String::from_utf8_lossy(&got).contains("too_many_connections"));
    // Another address is still served.
    let mut other = connect_from([127, 0, 0, 3], addr(&relay)).await;
    other
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let got = tokio::time::timeout(GIVE_UP, read_until_closed(&mut other))
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200 OK"));
}

#[tokio::test]
async fn a_client_that_never_reads_its_response_is_dropped() {
    // A large static file stands in for a 2 MiB reply: the write path is the same.
    let web = TempDir::new();
    let size = 32 * 1024 * 1024;
    std::fs::write(web.0.join("big.bin"), vec![7u8; size]).unwrap();
    let web_dir = web.0.clone();
    let relay = Relay::start(TestDb::sqlite(), move |c| {
        c.web_dir = Some(web_dir);
        c.limits.write_timeout_ms = 300;
    })
    .await;
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut tcp = socket.connect(addr(&relay)).await.unwrap();
    tcp.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    // Not reading: the relay's writes stall, and its write timeout drops the connection.
    relay
        .wait_for_metric("sealpost_connections_open", 1.0)
        .await;
    tokio::time::timeout(
        GIVE_UP,
        relay.wait_for_metric("sealpost_connections_open", 0.0),
    )
    .await
    .expect("a connection whose client never read stayed open");
    let got = read_until_closed(&mut tcp).await;
    assert!(got.len() < size, "the whole file arrived");
}

#[tokio::test]
async fn a_connection_is_asked_to_close_after_its_last_allowed_request() {
    let relay = Relay::start(TestDb::sqlite(), |c| {
        c.limits.max_requests_per_connection = 2
    })
    .await;
    let mut tcp = TcpStream::connect(addr(&relay)).await.unwrap();
    tcp.write_all(
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .await
    .unwrap();
    let got = tokio::time::timeout(GIVE_UP, read_until_closed(&mut tcp))
        .await
        .expect("the connection stayed open after its last request");
    let text = String::from_utf8_lossy(&got);
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 2, "{text}");
    assert!(
        text.to_ascii_lowercase().contains("connection: close"),
        "{text}"
    );
}
