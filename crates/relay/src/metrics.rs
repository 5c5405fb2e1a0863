//! Prometheus metrics, hand-rolled: a few counters and one histogram in atomics, rendered as
//! text. Labels never carry ids, so cardinality stays fixed.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use sealpost_protocol::api::CallState;

static CALLS_POSTED: AtomicU64 = AtomicU64::new(0);
static CALLS_CLAIMED: AtomicU64 = AtomicU64::new(0);
static REPLIES: AtomicU64 = AtomicU64::new(0);
static STORE_ERRORS: AtomicU64 = AtomicU64::new(0);
/// Claim latency: from a call's post to its claim, in milliseconds.
const BUCKETS_MS: [u64; 10] = [1, 2, 5, 10, 25, 50, 100, 250, 1000, 5000];
static CLAIM_LATENCY: [AtomicU64; 11] = [const { AtomicU64::new(0) }; 11];
static CLAIM_LATENCY_SUM_MS: AtomicU64 = AtomicU64::new(0);

pub fn call_posted() {
    CALLS_POSTED.fetch_add(1, Ordering::Relaxed);
}

pub fn reply_stored() {
    REPLIES.fetch_add(1, Ordering::Relaxed);
}

pub fn store_error() {
    STORE_ERRORS.fetch_add(1, Ordering::Relaxed);
}

/// Records one claimed call that waited `latency_ms` since it was posted.
pub fn call_claimed(latency_ms: i64) {
    let latency = latency_ms.max(0) as u64;
    CALLS_CLAIMED.fetch_add(1, Ordering::Relaxed);
    CLAIM_LATENCY_SUM_MS.fetch_add(latency, Ordering::Relaxed);
    let bucket = BUCKETS_MS
        .iter()
        .position(|&b| latency <= b)
        .unwrap_or(BUCKETS_MS.len());
    CLAIM_LATENCY[bucket].fetch_add(1, Ordering::Relaxed);
}

/// Renders the text exposition format.
pub fn render(calls_by_state: &[(CallState, i64)], waiters: i64) -> String {
    let mut out = String::new();
    let counter = |out: &mut String, name: &str, help: &str, value: u64| {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
        );
    };
    counter(
        &mut out,
        "sealpost_calls_posted_total",
        "Calls accepted.",
        CALLS_POSTED.load(Ordering::Relaxed),
    );
    counter(
        &mut out,
        "sealpost_calls_claimed_total",
        "Calls handed to an executor.",
        CALLS_CLAIMED.load(Ordering::Relaxed),
    );
    counter(
        &mut out,
        "sealpost_replies_total",
        "Replies stored.",
        REPLIES.load(Ordering::Relaxed),
    );
    counter(
        &mut out,
        "sealpost_store_errors_total",
        "Database errors.",
        STORE_ERRORS.load(Ordering::Relaxed),
    );
    let _ = writeln!(
        out,
        "# HELP sealpost_calls Stored calls by state.\n# TYPE sealpost_calls gauge"
    );
    for state in CallState::ALL {
        let n = calls_by_state
            .iter()
            .find(|(s, _)| *s == state)
            .map_or(0, |(_, n)| *n);
        let _ = writeln!(out, "sealpost_calls{{state=\"{}\"}} {n}", state.as_str());
    }
    let _ = writeln!(
        out,
        "# HELP sealpost_longpoll_waiters Long-polls waiting now.\n# TYPE sealpost_longpoll_waiters gauge\nsealpost_longpoll_waiters {waiters}"
    );
    let _ = writeln!(
        out,
        "# HELP sealpost_claim_latency_seconds Time from a call's post to its claim.\n# TYPE sealpost_claim_latency_seconds histogram"
    );
    let mut cumulative = 0;
    for (i, bucket) in BUCKETS_MS.iter().enumerate() {
        cumulative += CLAIM_LATENCY[i].load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "sealpost_claim_latency_seconds_bucket{{le=\"{}\"}} {cumulative}",
            *bucket as f64 / 1000.0
        );
    }
    cumulative += CLAIM_LATENCY[BUCKETS_MS.len()].load(Ordering::Relaxed);
    let _ = writeln!(
        out,
        "sealpost_claim_latency_seconds_bucket{{le=\"+Inf\"}} {cumulative}"
    );
    let _ = writeln!(
        out,
        "sealpost_claim_latency_seconds_sum {}\nsealpost_claim_latency_seconds_count {cumulative}",
        CLAIM_LATENCY_SUM_MS.load(Ordering::Relaxed) as f64 / 1000.0
    );
    out
}
