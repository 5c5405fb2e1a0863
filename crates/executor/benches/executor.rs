//! `cargo xtask bench executor`: index build time, query latency and `handle()` throughput on a
//! seeded, generated workspace of 10,000 documents (about 20 MB of text).
//!
//! With `SEALPOST_BENCH_CORPUS=PATH` it writes the workspace and the queries as JSON to PATH
//! and stops, for the browser benchmarks.
//!
//! A plain binary rather than criterion: the figures wanted are one build time, a latency
//! distribution over a fixed query mix, and a sustained rate, each measured once per run.

use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, RngExt, SeedableRng};
use sealpost_executor::{
    Access, Delivery, DocId, Document, Executor, Grants, GrantsHandle, HostTool, IndexOrigin,
    MemoryAuditLog, Outcome, ToolFuture, ToolSpec, Workspace,
};
use sealpost_protocol::content::{ToolCall, ToolKind, ToolResult};
use sealpost_seal::{CallId, PairingSecret, PluginSession, SessionId, verify_hello};
use sealpost_time::UnixMillis;
use serde_json::{Value, json};

const DOCUMENTS: usize = 10_000;
const WORDS_PER_BODY: usize = 250;
const VOCABULARY: usize = 40_000;
const QUERIES: usize = 200;
const HANDLE_CALLS: usize = 100_000;
const SOURCES: [&str; 4] = ["notes", "docs", "journal", "archive"];
const START_MS: UnixMillis = UnixMillis::from_ms(1_800_000_000_000);

/// Made-up words from syllables, so every run and machine sees the same text.
fn vocabulary(rng: &mut StdRng) -> Vec<String> {
    const SYLLABLES: [&str; 24] = [
        "ka", "lo", "mi", "ren", "sto", "vel", "dra", "nor", "tis", "pan", "quo", "ber", "shi",
        "ght", "al", "ex", "ion", "ment", "ing", "ed", "ro", "ta", "un", "ve",
    ];
    let mut words: Vec<String> = Vec::with_capacity(VOCABULARY);
    let mut seen = std::collections::HashSet::new();
    while words.len() < VOCABULARY {
        let syllables = rng.random_range(1..=4);
        let word: String = (0..syllables)
            .map(|_| SYLLABLES[rng.random_range(0..SYLLABLES.len())])
            .collect();
        if seen.insert(word.clone()) {
            words.push(word);
        }
    }
    words
}

/// Zipf-distributed word ranks (s = 1.07), as in natural text: a few very common words and a
/// long tail of rare ones.
struct Zipf(Vec<f64>);

impl Zipf {
    fn new(n: usize) -> Self {
        let mut total = 0.0;
        let cumulative = (1..=n)
            .map(|rank| {
                total += 1.0 / (rank as f64).powf(1.07);
                total
            })
            .collect::<Vec<_>>();
        Self(cumulative.into_iter().map(|c| c / total).collect())
    }

    fn sample(&self, rng: &mut StdRng) -> usize {
        let x: f64 = rng.random();
        self.0.partition_point(|&c| c < x).min(self.0.len() - 1)
    }
}

fn generate(rng: &mut StdRng) -> (Vec<String>, Vec<Document>) {
    let words = vocabulary(rng);
    let zipf = Zipf::new(words.len());
    let docs = (0..DOCUMENTS)
        .map(|n| {
            let title: Vec<&str> = (0..rng.random_range(2..7))
                .map(|_| words[zipf.sample(rng)].as_str())
                .collect();
            let mut body = String::with_capacity(WORDS_PER_BODY * 7);
            for i in 0..WORDS_PER_BODY {
                body.push_str(&words[zipf.sample(rng)]);
                body.push(if i % 14 == 13 { '.' } else { ' ' });
                if i % 14 == 13 {
                    body.push(' ');
                }
            }
            Document {
                id: DocId::new(format!("doc-{n:05}")).unwrap(),
                source: SOURCES[n % SOURCES.len()].to_owned(),
                title: title.join(" "),
                body,
                updated_at_ms: START_MS,
            }
        })
        .collect();
    (words, docs)
}

/// 200 queries: common words, rare words, two- and three-word queries, quoted phrases lifted
/// from documents, and prefixes.
fn queries(rng: &mut StdRng, words: &[String], docs: &[Document]) -> Vec<String> {
    (0..QUERIES)
        .map(|n| match n % 5 {
            0 => words[rng.random_range(0..50)].clone(),
            1 => words[rng.random_range(5_000..VOCABULARY)].clone(),
            2 => (0..rng.random_range(2..=3))
                .map(|_| words[rng.random_range(0..2_000)].as_str())
                .collect::<Vec<_>>()
                .join(" "),
            3 => {
                let body: Vec<&str> = docs[rng.random_range(0..docs.len())]
                    .body
                    .split_whitespace()
                    .collect();
                let at = rng.random_range(0..body.len() - 3);
                format!("\"{}\"", body[at..at + 3].join(" ").replace('.', ""))
            }
            _ => {
                let word = &words[rng.random_range(0..5_000)];
                format!("{}*", &word[..word.len().min(3)])
            }
        })
        .collect()
}

fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut context = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

struct Noop;

impl HostTool for Noop {
    fn call(&self, _: Value) -> ToolFuture {
        Box::pin(std::future::ready(Ok(ToolResult::default())))
    }
}

fn main() {
    let mut rng = StdRng::seed_from_u64(2026);
    let (words, docs) = generate(&mut rng);
    let text_bytes: usize = docs.iter().map(|d| d.title.len() + d.body.len()).sum();
    let queries = queries(&mut rng, &words, &docs);
    // The browser benchmarks (`cargo xtask bench browser|web`) take this same corpus and
    // these same queries from a file, so their figures compare with these.
    if let Some(path) = std::env::var_os("SEALPOST_BENCH_CORPUS") {
        let corpus = json!({"sources": SOURCES, "documents": docs, "queries": queries});
        std::fs::write(&path, serde_json::to_vec(&corpus).unwrap()).unwrap();
        println!("corpus and queries written to {}", path.to_string_lossy());
        return;
    }
    println!(
        "workspace: {} documents, {:.1} MB of text, {} queries",
        docs.len(),
        text_bytes as f64 / 1e6,
        queries.len()
    );

    let started = Instant::now();
    let mut workspace = Workspace::default();
    for source in SOURCES {
        workspace.add_source(source).unwrap();
    }
    for doc in docs.clone() {
        workspace.put(doc).unwrap();
    }
    let build = started.elapsed();
    println!("index build: {:.0} ms (target <= 3000 ms)", ms(build));

    // What a tab does at start instead: the documents and the index snapshot kept beside them.
    let started = Instant::now();
    let snapshot = workspace.index_snapshot();
    let written = started.elapsed();
    let mut restored = Workspace::default();
    for source in SOURCES {
        restored.add_source(source).unwrap();
    }
    let started = Instant::now();
    let origin = restored.restore(docs, Some(&snapshot)).index;
    let read = started.elapsed();
    assert_eq!(origin, IndexOrigin::Snapshot);
    println!(
        "index snapshot: {:.1} MB ({:.2}x the text), written in {:.0} ms, documents restored with it in {:.0} ms ({:.2}x the build)",
        snapshot.len() as f64 / 1e6,
        snapshot.len() as f64 / text_bytes as f64,
        ms(written),
        ms(read),
        read.as_secs_f64() / build.as_secs_f64(),
    );
    drop(restored);

    let mut index_times = Vec::with_capacity(QUERIES);
    let mut matched = 0usize;
    for query in &queries {
        let started = Instant::now();
        let (_, hits) = workspace.search(query, |_| true, 10);
        index_times.push(started.elapsed());
        matched += usize::from(!hits.is_empty());
    }
    let mut slowest: Vec<(Duration, &String)> = index_times.iter().copied().zip(&queries).collect();
    slowest.sort_by_key(|(time, _)| std::cmp::Reverse(*time));
    index_times.sort();
    println!(
        "index query: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms ({matched}/{QUERIES} queries matched; target p50 <= 5 ms)",
        ms(percentile(&index_times, 0.5)),
        ms(percentile(&index_times, 0.99)),
        ms(*index_times.last().unwrap()),
    );

    let slowest: Vec<String> = slowest
        .iter()
        .take(3)
        .map(|(time, query)| format!("{query} ({:.1} ms)", ms(*time)))
        .collect();
    println!("slowest queries: {}", slowest.join(", "));

    // A session granted some sources only: every statistic is then counted over the granted
    // postings, the path a real session with an ungranted source takes.
    let mut partial_times = Vec::with_capacity(QUERIES);
    for query in &queries {
        let started = Instant::now();
        let _ = workspace.search(query, |source| source != "archive", 10);
        partial_times.push(started.elapsed());
    }
    partial_times.sort();
    println!(
        "index query, 3 of 4 sources granted: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        ms(percentile(&partial_times, 0.5)),
        ms(percentile(&partial_times, 0.99)),
        ms(*partial_times.last().unwrap()),
    );

    let grants = GrantsHandle::new(Grants {
        access: Access::On,
        sources: SOURCES.map(str::to_owned).into(),
        tools: ["search_workspace", "noop"].map(str::to_owned).into(),
        ..Grants::default()
    });
    let audit = MemoryAuditLog::new();
    let executor = Executor::new(workspace, grants, Rc::new(audit));

    let mut tool_times = Vec::with_capacity(QUERIES);
    for query in &queries {
        let call = ToolCall {
            name: "search_workspace".into(),
            arguments: json!({"query": query}),
        };
        let started = Instant::now();
        let decision = block_on(executor.execute(&call, &START_MS, &mut rng));
        tool_times.push(started.elapsed());
        std::hint::black_box(decision);
    }
    tool_times.sort();
    println!(
        "search_workspace tool (schema, search, 10 snippets, JSON): p50 {:.3} ms, p99 {:.3} ms",
        ms(percentile(&tool_times, 0.5)),
        ms(percentile(&tool_times, 0.99)),
    );

    executor
        .register_tool(
            ToolSpec::new(
                "noop",
                "Does nothing.",
                json!({"type": "object", "additionalProperties": false}),
                ToolKind::Read,
            ),
            Rc::new(Noop),
        )
        .unwrap();
    // A host tool's grant binds to the tool as registered: grant it again once it is.
    executor.set_grants(executor.grants().snapshot());
    let pairing = PairingSecret::from_bytes([7; 32]);
    let session_end = START_MS.saturating_add_ms(3_600_000);
    let hello = executor
        .start_session(
            &pairing,
            SessionId::from_bytes([1; 16]),
            START_MS,
            session_end,
            &mut rng,
        )
        .unwrap();
    let plugin = PluginSession::start(
        &pairing,
        &verify_hello(&pairing, &hello, START_MS).unwrap(),
        &mut rng,
    )
    .unwrap();
    let plaintext = serde_json::to_vec(&ToolCall {
        name: "noop".into(),
        arguments: json!({}),
    })
    .unwrap();
    let envelopes: Vec<Vec<u8>> = (0..HANDLE_CALLS)
        .map(|n| {
            let mut call_id = [0u8; 16];
            call_id[..8].copy_from_slice(&(n as u64).to_be_bytes());
            let header = plugin.call_header(CallId::from_bytes(call_id), START_MS, session_end);
            plugin.seal_call(&header, &plaintext, &mut rng).unwrap()
        })
        .collect();
    let started = Instant::now();
    let mut replies = 0usize;
    for envelope in &envelopes {
        let outcome = block_on(executor.handle(envelope, &START_MS, &mut rng));
        executor.settle(&outcome, Delivery::Accepted);
        if let Outcome::Reply { .. } = outcome {
            replies += 1;
        }
    }
    let elapsed = started.elapsed();
    assert_eq!(replies, HANDLE_CALLS, "every call is answered");
    println!(
        "handle() no-op read tool, open + checks + seal + audit: {:.0} calls/s over {HANDLE_CALLS} calls on one core (target >= 50000)",
        HANDLE_CALLS as f64 / elapsed.as_secs_f64()
    );
    let _ = rng.next_u32();
}
