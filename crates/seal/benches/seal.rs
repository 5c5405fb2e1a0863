//! Seal+open round trips at 1 KiB and 64 KiB, and the session key derivation.
//! Run with `cargo xtask bench seal`.

use chacha20poly1305::aead::Aead;
use chacha20poly1305::{KeyInit, XChaCha20Poly1305};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sealpost_seal::{
    BrowserSession, CallId, PairingSecret, PluginSession, SessionId, open_call, verify_hello,
};
use sealpost_time::UnixMillis;
use std::hint::black_box;

/// A time this many milliseconds after the epoch: the benchmarks need only order, not dates.
const fn at(ms: u64) -> UnixMillis {
    UnixMillis::from_ms(ms)
}

fn session() -> (PairingSecret, BrowserSession, PluginSession) {
    let mut rng = rand::rng();
    let secret = PairingSecret::generate(&mut rng);
    let (browser, hello) = BrowserSession::start(
        &secret,
        SessionId::from_bytes([1; 16]),
        at(1_000),
        at(3_600_000),
        b"{\"tools\":[]}",
        &mut rng,
    )
    .unwrap();
    let verified = verify_hello(&secret, &hello, at(2_000)).unwrap();
    let plugin = PluginSession::start(&secret, &verified, &mut rng).unwrap();
    (secret, browser, plugin)
}

fn seal_open(c: &mut Criterion) {
    let (_, browser, plugin) = session();
    let keys = browser.keys_for(plugin.plugin_public()).unwrap();
    let mut rng = rand::rng();
    let mut group = c.benchmark_group("seal+open call");
    for size in [1024usize, 64 * 1024] {
        // Baseline in the same run: the bare AEAD on the same bytes, no header, no checks.
        let cipher = XChaCha20Poly1305::new(&[7u8; 32].into());
        let bare = vec![0x5a; size];
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(
            BenchmarkId::new("baseline: bare XChaCha20-Poly1305", size),
            &bare,
            |b, bare| {
                b.iter(|| {
                    let nonce = [1u8; 24].into();
                    let sealed = cipher.encrypt(&nonce, black_box(bare.as_slice())).unwrap();
                    black_box(cipher.decrypt(&nonce, sealed.as_slice()).unwrap());
                })
            },
        );
        let plaintext = vec![0x5a; size];
        let header = plugin.call_header(CallId::from_bytes([2; 16]), at(2_000), at(60_000));
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(
            BenchmarkId::from_parameter(size),
            &plaintext,
            |b, plaintext| {
                b.iter(|| {
                    let envelope = plugin
                        .seal_call(&header, black_box(plaintext), &mut rng)
                        .unwrap();
                    black_box(open_call(&keys, &envelope).unwrap());
                })
            },
        );
    }
    group.finish();
}

fn key_derivation(c: &mut Criterion) {
    let (secret, browser, plugin) = session();
    let mut rng = rand::rng();
    let (_, hello) = BrowserSession::start(
        &secret,
        SessionId::from_bytes([3; 16]),
        at(1_000),
        at(3_600_000),
        b"{}",
        &mut rng,
    )
    .unwrap();
    let verified = verify_hello(&secret, &hello, at(2_000)).unwrap();
    c.bench_function("browser keys_for (one X25519 + two HKDF)", |b| {
        b.iter(|| black_box(browser.keys_for(black_box(plugin.plugin_public())).unwrap()))
    });
    c.bench_function(
        "plugin verify_hello + start (HMAC, catalog open, keygen, X25519)",
        |b| {
            b.iter(|| {
                let verified = verify_hello(&secret, black_box(&hello), at(2_000)).unwrap();
                black_box(PluginSession::start(&secret, &verified, &mut rng).unwrap())
            })
        },
    );
    let _ = verified;
}

criterion_group!(benches, seal_open, key_derivation);
criterion_main!(benches);
