//! The worked examples in docs/PROTOCOL.md's "Plaintexts" section are real: each parses as its
//! type (unknown fields are refused) and writes back byte for byte, so the field order,
//! compact output and sorted schema keys the document states are what the code does.

use sealpost_protocol::content::{Catalog, Reply, ToolCall};
use serde::Serialize;
use serde::de::DeserializeOwned;

fn examples() -> Vec<String> {
    let doc = include_str!("../../../docs/PROTOCOL.md");
    let section = doc
        .split("## Plaintexts")
        .nth(1)
        .expect("PROTOCOL.md has a Plaintexts section");
    let section = section.split("\n## ").next().unwrap();
    section
        .split("```json\n")
        .skip(1)
        .map(|block| block.split("\n```").next().unwrap().to_owned())
        .collect()
}

fn round_trips<T: Serialize + DeserializeOwned>(text: &str) {
    let value: T = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(serde_json::to_string(&value).unwrap(), text);
}

#[test]
fn every_plaintext_example_parses_and_writes_back_byte_for_byte() {
    let examples = examples();
    assert_eq!(examples.len(), 4, "call, result, refusal, catalog");
    round_trips::<ToolCall>(&examples[0]);
    round_trips::<Reply>(&examples[1]);
    round_trips::<Reply>(&examples[2]);
    round_trips::<Catalog>(&examples[3]);
}
