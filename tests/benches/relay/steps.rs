//! One call at a time through the store, each step timed on its own: where a lone call's
//! time goes (`SEALPOST_BENCH_STEPS=<database url>`, for profiling; not part of the run).

use std::time::Instant;

use sealpost_relay::store::{self, NewCall};
use sealpost_testkit::id;

use crate::{bearer, now, store_client};

const CALLS: usize = 500;

pub async fn run(url: &str) {
    let store = store::open(url).await.unwrap();
    let owner = id();
    store
        .create_owner(owner, &format!("steps-{owner}"), now())
        .await
        .unwrap();
    let tab = bearer(&*store, owner, None).await;
    let (session_id, mcp, ends) = store_client(&*store, owner).await;
    let mut steps: [Vec<u64>; 4] = Default::default();
    let mut timed = |step: usize, since: Instant| {
        steps[step].push(since.elapsed().as_micros() as u64);
        Instant::now()
    };
    for _ in 0..CALLS {
        let call_id = id();
        let (header, envelope) = ends.seal_call(call_id);
        let t = now();
        let call = NewCall {
            owner_id: owner,
            session_id,
            call_id,
            envelope,
            created_at: t,
            expires_at: t.saturating_add_ms(60_000),
        };
        let start = Instant::now();
        store.post_call(mcp, &call, Some(1_000)).await.unwrap();
        let start = timed(0, start);
        let claimed = store
            .claim_calls(tab, session_id, now(), 1, 30_000)
            .await
            .unwrap();
        timed(1, start);
        let reply = ends.answer(&claimed[0].envelope);
        let start = Instant::now();
        store.reply_call(tab, call_id, reply, now()).await.unwrap();
        let start = timed(2, start);
        let view = store.read_call(mcp, call_id, now()).await.unwrap().unwrap();
        timed(3, start);
        ends.open(&header, view.reply.as_deref().unwrap());
    }
    for (name, mut micros) in ["post", "claim", "reply", "read"].into_iter().zip(steps) {
        micros.sort_unstable();
        println!(
            "{name:<6} p50 {:>6.2} ms  p90 {:>6.2} ms",
            micros[micros.len() / 2] as f64 / 1000.0,
            micros[micros.len() * 9 / 10] as f64 / 1000.0
        );
    }
}
