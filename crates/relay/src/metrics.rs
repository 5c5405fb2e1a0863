//! Prometheus metrics through the `metrics` facade and `metrics-exporter-prometheus`.
//!
//! Each relay owns its recorder instead of installing the process-wide one, so two relays in one
//! process (the test suite starts many) keep their own figures; handles are registered once,
//! here, and the hot path only bumps atomics. Labels never carry ids: a route is its matched
//! template, so cardinality stays fixed.

use std::time::Duration;

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Label, Recorder as _, SharedString};
use metrics_exporter_prometheus::{
    Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder,
};
use sealpost_protocol::api::CallState;

use crate::admitted::Work;
use crate::ratelimit::RateLimits;

const CALLS_POSTED: &str = "sealpost_calls_posted_total";
const CALLS_CLAIMED: &str = "sealpost_calls_claimed_total";
const CLAIMS_HANDED: &str = "sealpost_claims_handed_total";
const CLAIMS_STANDING: &str = "sealpost_claims_standing";
const READS_HANDED: &str = "sealpost_reads_handed_total";
const READS_STANDING: &str = "sealpost_reads_standing";
const REPLIES: &str = "sealpost_replies_total";
const STORE_ERRORS: &str = "sealpost_store_errors_total";
const CALLS_BY_STATE: &str = "sealpost_calls";
const LONGPOLL_WAITERS: &str = "sealpost_longpoll_waiters";
const LONGPOLLS_OPEN: &str = "sealpost_longpolls_open";
const CLAIM_LATENCY: &str = "sealpost_claim_latency_seconds";
const CLAIM_WAIT: &str = "sealpost_claim_wait_seconds";
const REQUEST_DURATION: &str = "sealpost_http_request_duration_seconds";
const RATE_LIMIT_KEYS: &str = "sealpost_rate_limit_keys";
const CONNECTIONS_OPEN: &str = "sealpost_connections_open";
const CONNECTIONS_REFUSED: &str = "sealpost_connections_refused_total";
const CHANNELS_OPEN: &str = "sealpost_channels_open";
const CONNECTIONS_CLOSED_IDLE: &str = "sealpost_connections_closed_idle_total";
const REQUESTS_REFUSED: &str = "sealpost_requests_refused_total";
const LARGE_BODIES_IN_FLIGHT: &str = "sealpost_large_bodies_in_flight";
const REQUESTS_EXEMPT: &str = "sealpost_requests_exempt_total";
const ADMITTED_CALLS: &str = "sealpost_admitted_calls";

/// Post-to-claim latency buckets (seconds): a served call is claimed within milliseconds.
const CLAIM_LATENCY_BUCKETS: [f64; 10] =
    [0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0];
/// Request and claim-wait buckets (seconds), up to the longest long-poll (30 s).
const WAIT_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 2.5, 10.0, 20.0, 30.0,
];

/// Which long-poll a request is.
#[derive(Debug, Clone, Copy)]
pub enum LongPoll {
    Claim,
    Read,
    /// A plugin's watch of its pairing's session.
    Watch,
}

/// Which cap refused a connection.
#[derive(Debug, Clone, Copy)]
pub enum Refused {
    /// `max_connections`.
    Total,
    /// `max_connections_per_address`.
    PerAddress,
}

/// Which share of the relay refused a request (over HTTP or a channel).
#[derive(Debug, Clone, Copy)]
pub enum RefusedRequest {
    /// `max_long_polls_per_token`.
    LongPollsPerToken,
    /// `max_long_polls_per_owner`.
    LongPollsPerOwner,
    /// `max_large_bodies_in_flight`.
    LargeBodies,
    /// `max_large_bodies_per_owner`.
    LargeBodiesPerOwner,
}

impl RefusedRequest {
    const ALL: [Self; 4] = [
        Self::LongPollsPerToken,
        Self::LongPollsPerOwner,
        Self::LargeBodies,
        Self::LargeBodiesPerOwner,
    ];

    fn label(self) -> &'static str {
        match self {
            Self::LongPollsPerToken => "long_polls_per_token",
            Self::LongPollsPerOwner => "long_polls_per_owner",
            Self::LargeBodies => "large_bodies",
            Self::LargeBodiesPerOwner => "large_bodies_per_owner",
        }
    }
}

/// The relay's metrics: its recorder and the handles the handlers bump.
#[derive(Debug)]
pub struct Metrics {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    calls_posted: Counter,
    calls_claimed: Counter,
    claims_handed: Counter,
    claims_standing: Gauge,
    reads_handed: Counter,
    reads_standing: Gauge,
    replies: Counter,
    store_errors: Counter,
    claim_latency: Histogram,
    claim_wait: Histogram,
    calls_by_state: Vec<(CallState, Gauge)>,
    longpoll_waiters: Gauge,
    longpolls_open: [Gauge; 3],
    rate_limit_token_keys: Gauge,
    connections_open: Gauge,
    connections_refused: [Counter; 2],
    connections_closed_idle: Counter,
    requests_refused: [Counter; 4],
    requests_exempt: [Counter; 3],
    admitted_calls: Gauge,
    large_bodies_in_flight: Gauge,
    channels_open: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(CLAIM_LATENCY.into()), &CLAIM_LATENCY_BUCKETS)
            .and_then(|b| b.set_buckets(&WAIT_BUCKETS))
            .expect("bucket lists are not empty")
            .build_recorder();
        let describe = |name: &'static str, help: &'static str| {
            let (name, help) = (KeyName::from_const_str(name), SharedString::const_str(help));
            // The kind is only the recorder's bookkeeping: descriptions are shared by name.
            recorder.describe_counter(name, None, help);
        };
        describe(CALLS_POSTED, "Calls accepted.");
        describe(CALLS_CLAIMED, "Calls handed to an executor.");
        describe(
            CLAIMS_HANDED,
            "Claims a post made for a claim standing on this replica, in its own write.",
        );
        describe(
            CLAIMS_STANDING,
            "Claims waiting for the next post to their session here (read at each scrape).",
        );
        describe(
            READS_HANDED,
            "Reads (and posts' waits) a reply made for a reader standing on this replica, after storing the answer.",
        );
        describe(
            READS_STANDING,
            "Reads and posts' waits waiting for the reply to their call here (read at each scrape).",
        );
        describe(REPLIES, "Replies stored.");
        describe(STORE_ERRORS, "Database errors answered as 503.");
        describe(
            CALLS_BY_STATE,
            "Stored calls by state (read at each scrape).",
        );
        describe(
            LONGPOLL_WAITERS,
            "Wake-up subscriptions held by claims and reads now.",
        );
        describe(
            LONGPOLLS_OPEN,
            "Claims and reads with a wait_ms in progress now.",
        );
        describe(CLAIM_LATENCY, "Time from a call's post to its claim.");
        describe(
            CLAIM_WAIT,
            "Time a claim request took to answer, long-poll included.",
        );
        describe(
            RATE_LIMIT_KEYS,
            "Keys the in-memory rate limiters track now, by kind.",
        );
        describe(
            REQUEST_DURATION,
            "Time to answer a request, by method, matched route and status.",
        );
        describe(CONNECTIONS_OPEN, "Client connections open now.");
        describe(CHANNELS_OPEN, "Session channels (WebSockets) open now.");
        describe(
            CONNECTIONS_REFUSED,
            "Connections closed at once because a connection cap was reached, by cap.",
        );
        describe(
            CONNECTIONS_CLOSED_IDLE,
            "Connections with nothing in flight closed to make room at the connection cap.",
        );
        describe(
            REQUESTS_REFUSED,
            "Requests refused because a share of the relay was full, by cap.",
        );
        describe(
            REQUESTS_EXEMPT,
            "Requests a rate refused that were let through to complete admitted work, by kind.",
        );
        describe(
            ADMITTED_CALLS,
            "Calls remembered as admitted work, claimed or answered here (read at each scrape).",
        );
        describe(
            LARGE_BODIES_IN_FLIGHT,
            "Large request bodies being read now (read at each scrape).",
        );
        let key = |name: &'static str, label: Option<(&'static str, &'static str)>| match label {
            None => Key::from_static_name(name),
            Some((k, v)) => Key::from_parts(name, vec![Label::new(k, v)]),
        };
        let counter_with = |name, label| recorder.register_counter(&key(name, label), &METADATA);
        let counter = |name| counter_with(name, None);
        let gauge = |name, label| recorder.register_gauge(&key(name, label), &METADATA);
        let histogram = |name| recorder.register_histogram(&key(name, None), &METADATA);
        Self {
            calls_posted: counter(CALLS_POSTED),
            calls_claimed: counter(CALLS_CLAIMED),
            claims_handed: counter(CLAIMS_HANDED),
            claims_standing: gauge(CLAIMS_STANDING, None),
            reads_handed: counter(READS_HANDED),
            reads_standing: gauge(READS_STANDING, None),
            replies: counter(REPLIES),
            store_errors: counter(STORE_ERRORS),
            claim_latency: histogram(CLAIM_LATENCY),
            claim_wait: histogram(CLAIM_WAIT),
            calls_by_state: CallState::ALL
                .iter()
                .map(|&state| {
                    (
                        state,
                        gauge(CALLS_BY_STATE, Some(("state", state.as_str()))),
                    )
                })
                .collect(),
            longpoll_waiters: gauge(LONGPOLL_WAITERS, None),
            longpolls_open: [
                gauge(LONGPOLLS_OPEN, Some(("kind", "claim"))),
                gauge(LONGPOLLS_OPEN, Some(("kind", "read"))),
                gauge(LONGPOLLS_OPEN, Some(("kind", "watch"))),
            ],
            rate_limit_token_keys: gauge(RATE_LIMIT_KEYS, Some(("kind", "token"))),
            connections_open: gauge(CONNECTIONS_OPEN, None),
            connections_refused: [
                counter_with(CONNECTIONS_REFUSED, Some(("cap", "total"))),
                counter_with(CONNECTIONS_REFUSED, Some(("cap", "per_address"))),
            ],
            connections_closed_idle: counter(CONNECTIONS_CLOSED_IDLE),
            requests_refused: RefusedRequest::ALL
                .map(|why| counter_with(REQUESTS_REFUSED, Some(("cap", why.label())))),
            requests_exempt: Work::ALL
                .map(|work| counter_with(REQUESTS_EXEMPT, Some(("kind", work.label())))),
            admitted_calls: gauge(ADMITTED_CALLS, None),
            large_bodies_in_flight: gauge(LARGE_BODIES_IN_FLIGHT, None),
            channels_open: gauge(CHANNELS_OPEN, None),
            handle: recorder.handle(),
            recorder,
        }
    }

    pub fn call_posted(&self) {
        self.calls_posted.increment(1);
    }

    /// A post that claimed for a standing claim (`crate::handoff`).
    pub fn claim_handed(&self) {
        self.claims_handed.increment(1);
    }

    /// A reply that read for a standing reader (`crate::handoff`).
    pub fn read_handed(&self) {
        self.reads_handed.increment(1);
    }

    pub fn reply_stored(&self) {
        self.replies.increment(1);
    }

    pub fn store_error(&self) {
        self.store_errors.increment(1);
    }

    /// One claimed call that waited `latency_ms` since it was posted.
    pub fn call_claimed(&self, latency_ms: u64) {
        self.calls_claimed.increment(1);
        self.claim_latency.record(latency_ms as f64 / 1000.0);
    }

    /// A claim request answered after `waited`.
    pub fn claim_answered(&self, waited: Duration) {
        self.claim_wait.record(waited.as_secs_f64());
    }

    /// A request answered: `route` is the matched template (or `static`).
    pub fn request(&self, method: &str, route: &str, status: u16, took: Duration) {
        let key = Key::from_parts(
            REQUEST_DURATION,
            vec![
                Label::new("method", method.to_owned()),
                Label::new("route", route.to_owned()),
                Label::new("status", status.to_string()),
            ],
        );
        self.recorder
            .register_histogram(&key, &METADATA)
            .record(took.as_secs_f64());
    }

    /// Counts a long-poll as open until the returned guard drops.
    pub fn long_poll(&self, kind: LongPoll) -> OpenLongPoll {
        let gauge = self.longpolls_open[kind as usize].clone();
        gauge.increment(1.0);
        OpenLongPoll(gauge)
    }

    /// Counts a connection as open until the returned guard drops.
    pub fn connection_opened(&self) -> OpenConnection {
        self.connections_open.increment(1.0);
        OpenConnection(self.connections_open.clone())
    }

    /// Counts a session channel as open until the returned guard drops.
    pub fn channel_opened(&self) -> OpenConnection {
        self.channels_open.increment(1.0);
        OpenConnection(self.channels_open.clone())
    }

    /// A connection closed at once by a cap.
    pub fn connection_refused(&self, why: Refused) {
        self.connections_refused[why as usize].increment(1);
    }

    /// An idle connection closed to make room for a new one.
    pub fn connection_closed_idle(&self) {
        self.connections_closed_idle.increment(1);
    }

    /// A request refused by a share of the relay.
    pub fn request_refused(&self, why: RefusedRequest) {
        self.requests_refused[why as usize].increment(1);
    }

    /// A request a rate refused, let through to complete admitted work.
    pub(crate) fn request_exempt(&self, work: Work) {
        self.requests_exempt[work as usize].increment(1);
    }

    /// The text exposition, with the gauges that are read rather than kept brought up to date.
    pub fn render(
        &self,
        calls_by_state: &[(CallState, i64)],
        waiters: i64,
        rate: &RateLimits,
        large_bodies_in_flight: usize,
        admitted_calls: usize,
        standing: Standing,
    ) -> String {
        for (state, gauge) in &self.calls_by_state {
            let n = calls_by_state
                .iter()
                .find(|(s, _)| s == state)
                .map_or(0, |(_, n)| *n);
            gauge.set(n as f64);
        }
        self.longpoll_waiters.set(waiters as f64);
        self.rate_limit_token_keys.set(rate.token_keys() as f64);
        self.large_bodies_in_flight
            .set(large_bodies_in_flight as f64);
        self.admitted_calls.set(admitted_calls as f64);
        self.claims_standing.set(standing.claims as f64);
        self.reads_standing.set(standing.reads as f64);
        self.handle.render()
    }

    /// Folds recorded histogram samples into their buckets, so memory stays bounded between
    /// scrapes (the relay calls this on a timer).
    pub fn upkeep(&self) {
        self.handle.run_upkeep();
    }
}

static METADATA: metrics::Metadata<'static> =
    metrics::Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()));

/// Waiters standing for a write on this replica (`crate::handoff`), at a scrape.
#[derive(Debug, Clone, Copy)]
pub struct Standing {
    pub claims: usize,
    pub reads: usize,
}

/// An open long-poll; dropping it closes it in `sealpost_longpolls_open`.
#[derive(Debug)]
pub struct OpenLongPoll(Gauge);

impl Drop for OpenLongPoll {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

/// An open connection or channel; dropping it takes it off its gauge.
#[derive(Debug)]
pub struct OpenConnection(Gauge);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}
