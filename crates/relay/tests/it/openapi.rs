//! The OpenAPI document is generated from the handlers' annotations (`utoipa`). The committed
//! copy must be that document, byte for byte, and the relay must serve it; every operation
//! documents its error answers with the shared error body, the Origin gate's refusal included.

use reqwest::{Method, StatusCode};

use sealpost_testkit::Relay;

const COMMITTED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/http/openapi.json");

#[test]
fn the_committed_openapi_document_is_the_generated_one() {
    let generated = sealpost_relay::http::document_json();
    if std::env::var("SEALPOST_BLESS").as_deref() == Ok("1") {
        std::fs::write(COMMITTED, generated).expect("write the committed document");
        return;
    }
    let committed = std::fs::read_to_string(COMMITTED).expect("read the committed document");
    assert!(
        committed == generated,
        "{COMMITTED} differs from the document the handlers generate. Regenerate it with \
         `SEALPOST_BLESS=1 cargo test -p sealpost-relay openapi` and review the diff."
    );
}

#[test]
fn every_operation_has_a_tag_and_every_v1_operation_documents_its_errors() {
    let spec: serde_json::Value =
        serde_json::from_str(sealpost_relay::http::document_json()).unwrap();
    let mut operations = 0;
    for (path, item) in spec["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            operations += 1;
            assert!(
                operation["tags"][0].is_string(),
                "{method} {path} has a tag"
            );
            if !path.starts_with("/v1/") || path == "/v1/openapi.json" {
                continue;
            }
            let responses = operation["responses"].as_object().unwrap();
            let errors: Vec<_> = responses.keys().filter(|s| s.as_str() >= "400").collect();
            assert!(!errors.is_empty(), "{method} {path} documents no error");
            for status in errors {
                let schema = &responses[status]["content"]["application/json"]["schema"]["$ref"];
                assert_eq!(
                    schema, "#/components/schemas/ErrorBody",
                    "{method} {path} {status} answers the error body"
                );
            }
            // The two endpoints a person reaches before holding any token.
            if path != "/v1/auth/signin" && path != "/v1/auth/providers" {
                assert!(
                    operation["security"][0]["bearer"].is_array(),
                    "{method} {path} names its bearer token"
                );
            }
        }
    }
    assert!(operations >= 19, "{operations} operations");
}

/// The Origin gate stands before every route, so every operation names its refusal.
#[test]
fn every_operation_documents_the_origin_refusal() {
    let spec: serde_json::Value =
        serde_json::from_str(sealpost_relay::http::document_json()).unwrap();
    for (path, item) in spec["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let forbidden = &operation["responses"]["403"];
            let description = forbidden["description"].as_str().unwrap_or_default();
            assert!(
                description.contains("`origin_not_allowed`"),
                "{method} {path}: {forbidden}"
            );
            assert_eq!(
                forbidden["content"]["application/json"]["schema"]["$ref"],
                "#/components/schemas/ErrorBody",
                "{method} {path}"
            );
        }
    }
}

#[tokio::test]
async fn the_relay_serves_the_generated_document() {
    let relay = Relay::sqlite().await;
    let response = relay
        .client
        .get(format!("{}/v1/openapi.json", relay.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "application/json"
    );
    assert_eq!(
        response.text().await.unwrap(),
        sealpost_relay::http::document_json()
    );
    // The old unversioned path is gone, and answers like any unknown path.
    let (status, _) = relay.send(Method::GET, "/openapi.json", None, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
