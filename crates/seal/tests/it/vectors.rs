//! Known-answer vectors: `tests/vectors.json` holds each case's inputs and expected outputs.
//! The same file runs natively and in the wasm build. `SEALPOST_WRITE_VECTORS=1 cargo test -p
//! sealpost-seal` rewrites the expected outputs (native only); review the diff before keeping it.

use sealpost_seal::{
    BrowserSession, CallId, Header, PairingCode, PairingCodeError, PairingSecret, PluginSession,
    RelayOrigin, SessionId, SessionKeys, VerifiedHello, open_call, open_catalog_update, open_reply,
    seal_reply, verify_hello,
};
use std::collections::BTreeMap;

use sealpost_time::UnixMillis;
use serde::{Deserialize, Serialize};

use crate::support::{ScriptedRng, hex16, hex32};

const VECTORS: &str = include_str!("../vectors.json");

#[derive(Serialize, Deserialize)]
struct VectorFile {
    description: Vec<String>,
    cases: Vec<Case>,
}

#[derive(Serialize, Deserialize)]
struct Case {
    name: String,
    #[serde(flatten)]
    input: Input,
    #[serde(default)]
    expect: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize, Clone)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum Input {
    PairId {
        secret: String,
    },
    Fingerprint {
        secret: String,
        origin: String,
    },
    PairingCode {
        secret: String,
        origin: String,
        token: String,
    },
    PairingCodeRejected {
        code: String,
    },
    Session(Box<SessionInput>),
    /// Bytes produced by session `from` (default: `opener`), changed by `mutate`, then opened
    /// with `opener`'s secret, keys and call header.
    Rejected {
        opener: String,
        #[serde(default)]
        from: Option<String>,
        source: Source,
        #[serde(default)]
        open_as: Option<Source>,
        #[serde(default)]
        mutate: Mutation,
        #[serde(default)]
        secret: Option<String>,
        #[serde(default)]
        now_ms: Option<UnixMillis>,
        #[serde(default)]
        expect_call_id: Option<String>,
    },
    /// The browser derives keys for a hostile plugin key.
    KeysRejected {
        session: String,
        plugin_public: String,
    },
}

#[derive(Serialize, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct SessionInput {
    secret: String,
    session_id: String,
    created_at_ms: UnixMillis,
    expires_at_ms: UnixMillis,
    now_ms: UnixMillis,
    catalog: String,
    /// Randomness the browser draws: ephemeral secret, then the catalog nonce.
    browser_ephemeral: String,
    catalog_nonce: String,
    /// Randomness the plugin draws: ephemeral secret, then each call's nonce.
    plugin_ephemeral: String,
    call_id: String,
    call_created_at_ms: UnixMillis,
    call_expires_at_ms: UnixMillis,
    call_nonce: String,
    call_plaintext: String,
    reply_created_at_ms: UnixMillis,
    reply_nonce: String,
    reply_plaintext: String,
    /// A catalog update the browser seals after the reply, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    update: Option<UpdateInput>,
}

#[derive(Serialize, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct UpdateInput {
    seq: u64,
    created_at_ms: UnixMillis,
    catalog: String,
    nonce: String,
}

#[derive(Serialize, Deserialize, Clone, Copy, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Source {
    Hello,
    Call,
    Reply,
    CatalogUpdate,
}

#[derive(Serialize, Deserialize, Clone, Default)]
#[serde(deny_unknown_fields)]
struct Mutation {
    /// Flip the lowest bit of this byte.
    #[serde(default)]
    flip: Option<usize>,
    /// Set the byte at `[0]` to `[1]`.
    #[serde(default)]
    set: Option<(usize, u8)>,
    /// Keep only this many bytes.
    #[serde(default)]
    truncate: Option<usize>,
}

impl Mutation {
    fn apply(&self, mut bytes: Vec<u8>) -> Vec<u8> {
        if let Some(at) = self.flip {
            bytes[at] ^= 1;
        }
        if let Some((at, value)) = self.set {
            bytes[at] = value;
        }
        if let Some(len) = self.truncate {
            bytes.truncate(len);
        }
        bytes
    }
}

/// Everything a session case produces, kept so rejection cases can reuse it.
struct SessionRun {
    secret: PairingSecret,
    browser: BrowserSession,
    now_ms: UnixMillis,
    hello: Vec<u8>,
    verified: VerifiedHello,
    update: Vec<u8>,
    browser_keys: SessionKeys,
    plugin: PluginSession,
    call_header: Header,
    call: Vec<u8>,
    reply: Vec<u8>,
}

type Outputs = BTreeMap<String, String>;

fn out(pairs: &[(&str, String)]) -> Outputs {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

fn run_session(s: &SessionInput) -> Result<(SessionRun, Outputs), String> {
    let secret = PairingSecret::from_bytes(hex32(&s.secret));
    let catalog_nonce = hex::decode(&s.catalog_nonce).unwrap();
    let mut browser_rng = ScriptedRng::new(&[&hex32(&s.browser_ephemeral), &catalog_nonce]);
    let (browser, hello) = BrowserSession::start(
        &secret,
        SessionId::from_bytes(hex16(&s.session_id)),
        s.created_at_ms,
        s.expires_at_ms,
        s.catalog.as_bytes(),
        &mut browser_rng,
    )
    .map_err(|e| e.code().to_string())?;

    let verified = verify_hello(&secret, &hello, s.now_ms).map_err(|e| e.code().to_string())?;
    if verified.catalog() != s.catalog.as_bytes() {
        return Err("catalog did not round-trip".into());
    }
    let call_nonce = hex::decode(&s.call_nonce).unwrap();
    let mut plugin_rng = ScriptedRng::new(&[&hex32(&s.plugin_ephemeral), &call_nonce]);
    let plugin = PluginSession::start(&secret, &verified, &mut plugin_rng)
        .map_err(|e| e.code().to_string())?;
    let call_header = plugin.call_header(
        CallId::from_bytes(hex16(&s.call_id)),
        s.call_created_at_ms,
        s.call_expires_at_ms,
    );
    let call = plugin
        .seal_call(&call_header, s.call_plaintext.as_bytes(), &mut plugin_rng)
        .map_err(|e| e.code().to_string())?;

    let browser_keys = browser
        .keys_for(plugin.plugin_public())
        .map_err(|e| e.code().to_string())?;
    let (opened_header, opened) =
        open_call(&browser_keys, &call).map_err(|e| e.code().to_string())?;
    if opened != s.call_plaintext.as_bytes() || opened_header != call_header {
        return Err("call did not round-trip".into());
    }
    let reply_nonce = hex::decode(&s.reply_nonce).unwrap();
    let mut reply_rng = ScriptedRng::new(&[&reply_nonce]);
    let reply = seal_reply(
        &browser_keys,
        &opened_header,
        s.reply_plaintext.as_bytes(),
        s.reply_created_at_ms,
        &mut reply_rng,
    )
    .map_err(|e| e.code().to_string())?;
    let opened_reply = plugin
        .open_reply(&call_header, &reply)
        .map_err(|e| e.code().to_string())?;
    if opened_reply != s.reply_plaintext.as_bytes() {
        return Err("reply did not round-trip".into());
    }
    if !(browser_rng.is_spent() && plugin_rng.is_spent() && reply_rng.is_spent()) {
        return Err("fewer random bytes were drawn than the vector pins".into());
    }
    let update = match &s.update {
        None => Vec::new(),
        Some(u) => {
            let nonce = hex::decode(&u.nonce).unwrap();
            let mut rng = ScriptedRng::new(&[&nonce]);
            let update = browser
                .seal_catalog_update(u.seq, u.created_at_ms, u.catalog.as_bytes(), &mut rng)
                .map_err(|e| e.code().to_string())?;
            let opened = open_catalog_update(&secret, &verified, &update)
                .map_err(|e| e.code().to_string())?;
            if opened.catalog() != u.catalog.as_bytes() || opened.seq() != u.seq {
                return Err("catalog update did not round-trip".into());
            }
            if !rng.is_spent() {
                return Err("fewer random bytes were drawn than the vector pins".into());
            }
            update
        }
    };

    let (k_call, k_reply) = plugin.keys().expose();
    let outputs = out(&[
        ("pair_id", hex::encode(secret.pair_id())),
        ("hello", hex::encode(&hello)),
        ("plugin_public", hex::encode(plugin.plugin_public())),
        ("k_call", hex::encode(k_call)),
        ("k_reply", hex::encode(k_reply)),
        ("call", hex::encode(&call)),
        ("reply", hex::encode(&reply)),
    ]);
    let mut outputs = outputs;
    if s.update.is_some() {
        outputs.insert("catalog_update".into(), hex::encode(&update));
    }
    let run = SessionRun {
        secret,
        browser,
        now_ms: s.now_ms,
        hello,
        verified,
        update,
        browser_keys,
        plugin,
        call_header,
        call,
        reply,
    };
    Ok((run, outputs))
}

fn compute(input: &Input, sessions: &BTreeMap<String, SessionRun>) -> Outputs {
    let error = |code: &str| out(&[("error", code.to_string())]);
    match input {
        Input::PairId { secret } => out(&[(
            "pair_id",
            hex::encode(PairingSecret::from_bytes(hex32(secret)).pair_id()),
        )]),
        Input::Fingerprint { secret, origin } => out(&[(
            "fingerprint",
            PairingSecret::from_bytes(hex32(secret))
                .fingerprint(&RelayOrigin::parse(origin).expect("a valid origin")),
        )]),
        Input::PairingCode {
            secret,
            origin,
            token,
        } => {
            let code = RelayOrigin::parse(origin).map_err(PairingCodeError::from);
            match code.and_then(|origin| {
                PairingCode::new(
                    origin,
                    token.clone(),
                    PairingSecret::from_bytes(hex32(secret)),
                )
            }) {
                Ok(code) => {
                    let text = code.encode().to_string();
                    let parsed = PairingCode::parse(&text).expect("a code we encode parses");
                    assert_eq!(parsed.encode().as_str(), text.as_str());
                    out(&[("code", text)])
                }
                Err(e) => error(e.code()),
            }
        }
        Input::PairingCodeRejected { code } => match PairingCode::parse(code) {
            Ok(_) => out(&[("parsed", "ok".into())]),
            Err(e) => error(e.code()),
        },
        Input::Session(s) => match run_session(s) {
            Ok((_, outputs)) => outputs,
            Err(e) => error(&e),
        },
        Input::Rejected {
            opener,
            from,
            source,
            open_as,
            mutate,
            secret,
            now_ms,
            expect_call_id,
        } => {
            let from = &sessions[from.as_ref().unwrap_or(opener)];
            let opener = &sessions[opener];
            let original = match source {
                Source::Hello => from.hello.clone(),
                Source::Call => from.call.clone(),
                Source::Reply => from.reply.clone(),
                Source::CatalogUpdate => from.update.clone(),
            };
            let bytes = mutate.apply(original);
            let result = match open_as.unwrap_or(*source) {
                Source::Hello => {
                    let secret = secret
                        .as_deref()
                        .map(|s| PairingSecret::from_bytes(hex32(s)));
                    let secret = secret.as_ref().unwrap_or(&opener.secret);
                    verify_hello(secret, &bytes, now_ms.unwrap_or(opener.now_ms)).map(|_| ())
                }
                Source::Call => open_call(&opener.browser_keys, &bytes).map(|_| ()),
                Source::CatalogUpdate => {
                    let secret = secret
                        .as_deref()
                        .map(|s| PairingSecret::from_bytes(hex32(s)));
                    let secret = secret.as_ref().unwrap_or(&opener.secret);
                    open_catalog_update(secret, &opener.verified, &bytes).map(|_| ())
                }
                Source::Reply => {
                    let mut call = opener.call_header.clone();
                    if let Some(id) = expect_call_id {
                        call = Header::call(
                            *call.session_id(),
                            CallId::from_bytes(hex16(id)),
                            *call.plugin_public(),
                            call.created_at_ms(),
                            call.expires_at_ms(),
                        );
                    }
                    open_reply(opener.plugin.keys(), &call, &bytes).map(|_| ())
                }
            };
            let mut outputs = match result {
                Ok(()) => out(&[("opened", "ok".into())]),
                Err(e) => error(e.code()),
            };
            outputs.insert("input".into(), hex::encode(&bytes));
            outputs
        }
        Input::KeysRejected {
            session,
            plugin_public,
        } => match sessions[session].browser.keys_for(&hex32(plugin_public)) {
            Ok(_) => out(&[("derived", "ok".into())]),
            Err(e) => error(e.code()),
        },
    }
}

fn load() -> VectorFile {
    serde_json::from_str(VECTORS).expect("tests/vectors.json parses")
}

/// Runs every case; returns each case's name, its expected and its actual outputs.
fn run_all(file: &VectorFile) -> Vec<(String, Outputs, Outputs)> {
    let mut sessions = BTreeMap::new();
    for case in &file.cases {
        if let Input::Session(s) = &case.input
            && let Ok((run, _)) = run_session(s)
        {
            sessions.insert(case.name.clone(), run);
        }
    }
    file.cases
        .iter()
        .map(|case| {
            (
                case.name.clone(),
                case.expect.clone(),
                compute(&case.input, &sessions),
            )
        })
        .collect()
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn every_known_answer_vector_matches() {
    let file = load();
    assert!(
        file.cases.len() >= 20,
        "the vectors file should pin at least 20 cases"
    );
    let mismatches: Vec<String> = run_all(&file)
        .into_iter()
        .filter(|(_, expected, actual)| expected != actual)
        .map(|(name, expected, actual)| {
            format!("{name}:\n  expected {expected:?}\n  actual   {actual:?}")
        })
        .collect();
    assert!(
        mismatches.is_empty(),
        "{} vector(s) differ:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_vectors_pin_refusals_as_well_as_answers() {
    let file = load();
    let refusals = file
        .cases
        .iter()
        .filter(|c| c.expect.contains_key("error"))
        .count();
    let sessions = file
        .cases
        .iter()
        .filter(|c| matches!(c.input, Input::Session(_)))
        .count();
    assert!(refusals >= 20, "only {refusals} refusal vectors");
    assert!(sessions >= 3, "only {sessions} session vectors");
}

/// Rewrites the expected outputs from the current implementation.
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn write_vectors_when_asked() {
    if std::env::var_os("SEALPOST_WRITE_VECTORS").is_none() {
        return;
    }
    let mut file = load();
    let results = run_all(&file);
    for (case, (_, _, actual)) in file.cases.iter_mut().zip(results) {
        case.expect = actual;
    }
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors.json");
    let text = serde_json::to_string_pretty(&file).unwrap() + "\n";
    std::fs::write(path, text).unwrap();
}
