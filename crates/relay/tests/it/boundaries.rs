//! Architecture boundaries checked from the build graph.

/// The relay never links the crypto crate: it cannot hold or use a key even by accident.
#[test]
fn the_relay_does_not_depend_on_the_seal_crate() {
    let output = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .output()
        .expect("run cargo metadata");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let packages = metadata["packages"].as_array().unwrap();
    let relay = packages
        .iter()
        .find(|p| p["name"] == "sealpost-relay")
        .expect("relay package");
    let id = relay["id"].as_str().unwrap();
    let nodes = metadata["resolve"]["nodes"].as_array().unwrap();
    // Walk the relay's normal (non-dev) dependency closure.
    let mut stack = vec![id.to_owned()];
    let mut seen = std::collections::HashSet::new();
    while let Some(current) = stack.pop() {
        if !seen.insert(current.clone()) {
            continue;
        }
        let node = nodes.iter().find(|n| n["id"] == current.as_str()).unwrap();
        for dep in node["deps"].as_array().unwrap() {
            let normal = dep["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k["kind"].is_null());
            if normal {
                stack.push(dep["pkg"].as_str().unwrap().to_owned());
            }
        }
    }
    let names: Vec<_> = seen
        .iter()
        .map(|id| {
            packages.iter().find(|p| p["id"] == id.as_str()).unwrap()["name"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert!(
        !names.iter().any(|n| n == "sealpost-seal"),
        "sealpost-relay depends on sealpost-seal"
    );
    for cipher in ["chacha20poly1305", "x25519-dalek"] {
        assert!(
            !names.iter().any(|n| n == cipher),
            "sealpost-relay links {cipher}"
        );
    }
}
