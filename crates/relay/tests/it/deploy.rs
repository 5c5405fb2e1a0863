//! The deployment files, checked without a container: every environment variable the
//! `Dockerfile` and `docker-compose.yml` set is one the binary reads, and the container's
//! command, run as a process with the Dockerfile's environment, serves the web app, and the
//! health check both files run (`sealpost-relay healthcheck`) passes against it and fails
//! without it. The image itself is built and run under podman by `cargo xtask dist check`.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

use sealpost_testkit::TempDir;

/// Read by the logger (`tracing`'s filter), not by an argument.
const LOGGER_VARIABLE: &str = "SEALPOST_LOG";

fn repository_file(name: &str) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../").to_owned() + name;
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

/// `KEY=VALUE` pairs of the Dockerfile's `ENV` instructions (with `\` continuations).
fn dockerfile_env(dockerfile: &str) -> Vec<(String, String)> {
    let joined = dockerfile.replace("\\\n", " ");
    joined
        .lines()
        .filter_map(|line| line.trim().strip_prefix("ENV "))
        .flat_map(|rest| rest.split_whitespace())
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// The exec-form array of a Dockerfile instruction, e.g. `CMD ["serve"]`.
fn dockerfile_array(dockerfile: &str, instruction: &str) -> Vec<String> {
    let line = dockerfile
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{instruction} ")))
        .unwrap_or_else(|| panic!("the Dockerfile has no {instruction}"));
    serde_json::from_str(line).expect("exec form")
}

/// The `SEALPOST_*` keys docker-compose.yml sets.
fn compose_env_keys(compose: &str) -> Vec<String> {
    compose
        .lines()
        .filter_map(|line| line.trim().split_once(':'))
        .map(|(key, _)| key.to_owned())
        .filter(|key| key.starts_with("SEALPOST_"))
        .collect()
}

fn relay_help() -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_sealpost-relay"))
        .args(["serve", "--help"])
        .env_clear()
        .output()
        .unwrap();
    assert!(output.status.success());
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn every_variable_the_deployment_files_set_is_one_the_relay_reads() {
    let help = relay_help();
    let dockerfile = dockerfile_env(&repository_file("Dockerfile"));
    let compose = compose_env_keys(&repository_file("docker-compose.yml"));
    assert!(
        dockerfile.len() >= 3 && compose.len() >= 3,
        "{dockerfile:?} {compose:?}"
    );
    for key in dockerfile.iter().map(|(k, _)| k).chain(&compose) {
        let read = key == LOGGER_VARIABLE || help.contains(&format!("[env: {key}="));
        assert!(
            read,
            "the deployment sets {key}, which sealpost-relay does not read"
        );
    }
    assert_eq!(
        dockerfile_array(&repository_file("Dockerfile"), "ENTRYPOINT"),
        ["/usr/local/bin/sealpost-relay"]
    );
}

#[tokio::test]
async fn the_container_command_with_its_environment_serves_the_app_and_its_health_check() {
    let dockerfile = repository_file("Dockerfile");
    let dir = TempDir::new();
    let (data, web) = (dir.0.join("data"), dir.0.join("web"));
    std::fs::create_dir_all(&data).unwrap();
    std::fs::create_dir_all(&web).unwrap();
    std::fs::write(
        web.join("index.html"),
        "<!doctype html><title>Sealpost</title>",
    )
    .unwrap();

    let mut command = Command::new(env!("CARGO_BIN_EXE_sealpost-relay"));
    command
        .args(dockerfile_array(&dockerfile, "CMD"))
        .env_clear();
    for (key, value) in dockerfile_env(&dockerfile) {
        // The container's paths and port, moved into this test's folder and a free port.
        let value = value
            .replace("/data", &data.display().to_string())
            .replace("/srv/sealpost/web", &web.display().to_string())
            .replace("0.0.0.0:8080", "127.0.0.1:0");
        command.env(key, value);
    }
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let mut printed = String::new();
    let base = loop {
        line.clear();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "the relay exited early"
        );
        if let Some(addr) = line.trim().strip_prefix("sealpost-relay listening on ") {
            break addr.to_owned();
        }
        printed.push_str(&line);
    };
    // The first owner's link names the port the relay took, not the `:0` it was given.
    let link = printed
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("http"))
        .unwrap_or_else(|| panic!("no sign-in link in {printed:?}"));
    assert!(link.starts_with(&format!("{base}/")), "{link} under {base}");
    std::thread::spawn(move || stdout.read_to_end(&mut Vec::new()));

    let http = reqwest::Client::new();
    let ready = http.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    // The health check both files run, with the container's environment: it finds the relay
    // through SEALPOST_LISTEN, here the address the relay took.
    let check = r#"["/usr/local/bin/sealpost-relay", "healthcheck"]"#;
    assert!(dockerfile.contains(check), "the Dockerfile's HEALTHCHECK");
    let compose = repository_file("docker-compose.yml");
    assert!(
        compose.contains(&format!("[\"CMD\", {}", &check[1..])),
        "compose's healthcheck"
    );
    let healthcheck = |listen: &str| {
        Command::new(env!("CARGO_BIN_EXE_sealpost-relay"))
            .arg("healthcheck")
            .env_clear()
            .env("SEALPOST_LISTEN", listen)
            .output()
            .unwrap()
    };
    let listen = base.trim_start_matches("http://");
    let healthy = healthcheck(listen);
    assert!(healthy.status.success(), "{healthy:?}");
    let nobody = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = nobody.local_addr().unwrap().to_string();
    drop(nobody);
    let unhealthy = healthcheck(&closed);
    assert!(!unhealthy.status.success(), "no relay answers at {closed}");
    let page = http.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(csp.contains("default-src 'self'"), "{csp}");
    assert!(page.text().await.unwrap().contains("Sealpost"));
    assert!(
        data.join("sealpost-relay.db").exists(),
        "the database lives in the data volume"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}
