//! Serving connections: HTTP/1.1 through hyper with a timer, so that every connection is bounded
//! in time and in number, and shutdown has a deadline.
//!
//! - A connection must send each request's headers within `header_read_timeout_ms`, counted from
//!   when it opens or from its previous response (so the same timer is the keep-alive idle
//!   timeout); a slow or silent client is dropped.
//! - A write that makes no progress for `write_timeout_ms` drops the connection, so a client that
//!   never reads its 2 MiB reply does not keep it in memory.
//! - At most `max_connections` are open, and `max_connections_per_address` from one peer address;
//!   past either, a new connection gets a canned 503 and is closed at once instead of waiting.
//!   At `max_connections`, though, the connection idle longest (opened and silent, or
//!   kept alive between requests) is closed first and the new one takes its place, so silent
//!   connections cannot keep out a client with something to ask; only when every connection
//!   has a request in flight is the new one refused.
//! - After `max_requests_per_connection` responses a connection is told to close.
//! - On shutdown the listener closes, idle connections close, in-flight requests get
//!   `shutdown_deadline_ms` to finish, and then whatever is left is dropped.
//! - A connection upgraded to a session channel (`http::channel`) keeps its place under the
//!   caps for as long as the channel is open: the request carries a [`ConnectionHold`].
//!
//! Only HTTP/1.1 is spoken: TLS and HTTP/2 end at the proxy in front of the relay
//! (docs/RELAY.md), which keeps HTTP/2's own flow-control attack surface out of the process.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, StatusCode, header};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_io_timeout::TimeoutStream;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use crate::caps::{Busy, IdleConnections, KeyedCap, KeyedSlot, TrackedConnection};
use crate::config::Limits;
use crate::metrics::{Metrics, Refused};

/// After a failed `accept` (out of file descriptors, say), wait this long before the next one
/// rather than spinning.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);

/// How long a connection admitted in place of an idle one waits for that one's place: it is
/// given back as soon as the closed connection's task drops it, so this is only a bound for a
/// place an upgraded channel took over in the meantime.
const PLACE_FREED_WITHIN: Duration = Duration::from_secs(1);

/// A new connection's place under `max_connections`.
enum Place {
    /// Free at once.
    Now(OwnedSemaphorePermit),
    /// Being given back by an idle connection just closed.
    Freed(Arc<Semaphore>),
}

/// What a connection over a cap gets before it is closed: written without reading the request,
/// so it costs the relay nothing but the accept.
const OVER_CAPACITY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
content-type: application/json\r\n\
retry-after: 1\r\n\
cache-control: no-store\r\n\
connection: close\r\n\
content-length: 98\r\n\
\r\n\
{\"error\":{\"code\":\"too_many_connections\",\"message\":\"The relay is at its connection limit; retry.\"}}";

/// Connection bounds, from [`Limits`].
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    pub header_read_timeout: Duration,
    pub write_timeout: Duration,
    pub max_connections: usize,
    /// 0: no per-address cap (behind a proxy every connection comes from the proxy).
    pub max_connections_per_address: u32,
    pub max_requests_per_connection: u32,
    pub shutdown_deadline: Duration,
}

impl ConnectionLimits {
    /// The bounds `limits` sets; the per-address cap is off when `trust_proxy` says every peer
    /// is the proxy.
    pub fn new(limits: &Limits, trust_proxy: bool) -> Self {
        Self {
            header_read_timeout: Duration::from_millis(limits.header_read_timeout_ms),
            write_timeout: Duration::from_millis(limits.write_timeout_ms),
            max_connections: limits.max_connections as usize,
            max_connections_per_address: if trust_proxy {
                0
            } else {
                limits.max_connections_per_address
            },
            max_requests_per_connection: limits.max_requests_per_connection.max(1),
            shutdown_deadline: Duration::from_millis(limits.shutdown_deadline_ms),
        }
    }
}

/// Serves `router` on `listener` until `shutdown` is cancelled, then runs `on_shutdown` (which
/// ends long-polls) and drains connections within the deadline. `metrics`, when given, counts
/// this listener's connections.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    metrics: Option<Arc<Metrics>>,
    shutdown: CancellationToken,
    on_shutdown: impl FnOnce(),
) {
    let total = Arc::new(Semaphore::new(limits.max_connections));
    let per_address = KeyedCap::new(limits.max_connections_per_address);
    let idle = Arc::new(IdleConnections::default());
    let mut connections = JoinSet::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    loop {
        tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            // Reap finished connections so the set does not grow with the relay's uptime.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => {
                let (tcp, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        tracing::warn!(%error, "accept failed");
                        tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                        continue;
                    }
                };
                let Some(address_slot) = per_address.try_acquire(peer.ip()) else {
                    refuse(tcp, metrics.as_deref(), Refused::PerAddress);
                    continue;
                };
                // At the cap, the connection idle longest (one that has sent nothing yet, or
                // sits between requests) is closed and its place goes to this one.
                let slot = match total.clone().try_acquire_owned() {
                    Ok(slot) => Place::Now(slot),
                    Err(_) if idle.close_oldest() => {
                        if let Some(metrics) = &metrics {
                            metrics.connection_closed_idle();
                        }
                        Place::Freed(total.clone())
                    }
                    Err(_) => {
                        refuse(tcp, metrics.as_deref(), Refused::Total);
                        continue;
                    }
                };
                let (builder, router, metrics, shutdown, idle) = (
                    builder.clone(),
                    router.clone(),
                    metrics.clone(),
                    shutdown.clone(),
                    idle.clone(),
                );
                connections.spawn(async move {
                    let slot = match slot {
                        Place::Now(slot) => slot,
                        Place::Freed(total) => {
                            let freed = tokio::time::timeout(PLACE_FREED_WITHIN, total.acquire_owned());
                            match freed.await {
                                Ok(Ok(slot)) => slot,
                                _ => {
                                    refuse(tcp, metrics.as_deref(), Refused::Total);
                                    return;
                                }
                            }
                        }
                    };
                    let close = CancellationToken::new();
                    let tracked = idle.track(close.clone());
                    let hold = ConnectionHold(Arc::new(Open { _slot: slot, _address_slot: address_slot, _gauge: metrics.as_ref().map(|m| m.connection_opened()) }));
                    let connection = builder.serve_connection(
                        io(tcp, limits.write_timeout),
                        service(router, peer, limits.max_requests_per_connection, hold.clone(), tracked),
                    ).with_upgrades();
                    let _hold = hold;
                    tokio::pin!(connection);
                    let ended = tokio::select! {
                        ended = connection.as_mut() => ended,
                        // Closed for a newcomer while nothing was in flight: nothing is lost.
                        () = close.cancelled() => return,
                        () = shutdown.cancelled() => {
                            // Idle connections close now, busy ones after their response.
                            connection.as_mut().graceful_shutdown();
                            connection.await
                        }
                    };
                    if let Err(error) = ended {
                        // Timeouts and resets are the client's doing: not worth more than debug.
                        tracing::debug!(%peer, %error, "connection ended with an error");
                    }
                });
            }
        }
    }
    drop(listener);
    on_shutdown();
    let deadline = limits.shutdown_deadline;
    let drained = async {
        while connections.join_next().await.is_some() {}
        // A channel upgraded from a connection holds the connection's place until it closes.
        let _ = total.acquire_many(limits.max_connections as u32).await;
    };
    if tokio::time::timeout(deadline, drained).await.is_err() {
        tracing::warn!(
            open = connections.len(),
            deadline_ms = deadline.as_millis() as u64,
            "shutdown deadline passed; dropping the connections still open"
        );
        connections.abort_all();
    }
    while connections.join_next().await.is_some() {}
}

/// The socket as hyper reads it: no delay for small answers, and writes that must progress.
fn io(
    tcp: TcpStream,
    write_timeout: Duration,
) -> TokioIo<std::pin::Pin<Box<TimeoutStream<TcpStream>>>> {
    // Small JSON answers go out at once rather than waiting on Nagle's algorithm.
    let _ = tcp.set_nodelay(true);
    let mut stream = TimeoutStream::new(tcp);
    stream.set_write_timeout(Some(write_timeout));
    TokioIo::new(Box::pin(stream))
}

/// The router as one connection's service: it knows the peer address, says `Connection:
/// close` on the connection's last allowed response, and marks the connection busy from a
/// request's headers to its response's last byte (for good once upgraded to a channel), so
/// only a connection with nothing in flight is ever closed to make room.
fn service(
    router: Router,
    peer: SocketAddr,
    max_requests: u32,
    hold: ConnectionHold,
    tracked: TrackedConnection,
) -> impl hyper::service::Service<
    hyper::Request<Incoming>,
    Response = axum::response::Response,
    Error = Infallible,
    Future = impl Future<Output = Result<axum::response::Response, Infallible>> + Send,
> + Clone {
    let served = Arc::new(AtomicU32::new(0));
    hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        request.extensions_mut().insert(hold.clone());
        let last = served.fetch_add(1, Ordering::Relaxed) + 1 >= max_requests;
        let busy = tracked.busy();
        let answer = router.clone().oneshot(request);
        async move {
            let mut response = answer.await?;
            if last {
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            if response.status() == StatusCode::SWITCHING_PROTOCOLS {
                busy.for_good();
                return Ok(response);
            }
            Ok(response.map(|body| Body::new(BusyUntilSent { body, _busy: busy })))
        }
    })
}

/// A response body that keeps its connection marked busy until it is sent or dropped.
struct BusyUntilSent {
    body: Body,
    _busy: Busy,
}

impl http_body::Body for BusyUntilSent {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// Answers a connection over a cap and closes it, without reading from it.
fn refuse(tcp: TcpStream, metrics: Option<&Metrics>, why: Refused) {
    if let Some(metrics) = metrics {
        metrics.connection_refused(why);
    }
    // A fresh socket's send buffer takes this whole; if not, the client sees the close alone.
    let _ = tcp.try_write(OVER_CAPACITY);
}

/// A connection's places under the caps, shared by the connection and a channel it was
/// upgraded to: the places are given back when both have ended.
#[derive(Clone)]
pub(crate) struct ConnectionHold(#[allow(dead_code)] Arc<Open>);

/// What an open connection holds until it ends.
struct Open {
    _slot: OwnedSemaphorePermit,
    _address_slot: KeyedSlot<IpAddr>,
    _gauge: Option<crate::metrics::OpenConnection>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_capacity_answer_has_the_length_it_says() {
        let text = std::str::from_utf8(OVER_CAPACITY).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let declared: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(declared, body.len());
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(json["error"]["code"], "too_many_connections");
    }
}
