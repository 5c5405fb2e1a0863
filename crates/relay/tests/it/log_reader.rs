//! The relay's output never holds up or ends it: a relay whose stderr reader has gone away, or
//! has stopped reading, still ends on SIGTERM within its shutdown deadline, and one whose
//! stdout reader has gone away before it printed its address keeps serving.

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use sealpost_testkit::{TEST_KEY, TempDir, TestDb};

/// Hang guards, not speed measurements.
const STARTED_WITHIN: Duration = Duration::from_secs(60);
const EXITED_WITHIN: Duration = Duration::from_secs(30);

/// A relay process; killed when dropped.
struct Spawned(Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `sealpost-relay serve` on a free port of loopback, on `db`, with its key in `dir`.
fn relay(db: &TestDb, dir: &TempDir) -> Command {
    let key_file = dir.0.join("signing.key");
    std::fs::write(&key_file, TEST_KEY).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_sealpost-relay"));
    command
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "off",
        ])
        .args(["--shutdown-deadline-ms", "1000"])
        .env("SEALPOST_DATABASE_URL", &db.url)
        .env("SEALPOST_SIGNING_KEY_FILE", &key_file);
    command
}

/// Starts the relay with its log at `level` on `stderr`, waits for its address, runs
/// `once_listening`, makes a few requests, then sends SIGTERM and returns how it exited.
fn terminate_with_stderr(
    stderr: Stdio,
    level: &str,
    once_listening: impl FnOnce(),
) -> std::process::ExitStatus {
    let (db, dir) = (TestDb::sqlite(), TempDir::new());
    let mut child = Spawned(
        relay(&db, &dir)
            .env("SEALPOST_LOG", level)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn sealpost-relay"),
    );
    let stdout = BufReader::new(child.0.stdout.take().unwrap());
    let (lines, read) = mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let base = loop {
        let line = read
            .recv_timeout(STARTED_WITHIN)
            .expect("the relay says where it listens");
        if let Some(base) = line.strip_prefix("sealpost-relay listening on ") {
            break base.to_owned();
        }
    };
    once_listening();
    // Requests log; with nobody reading, those lines go nowhere.
    let addr = base.trim_start_matches("http://");
    for _ in 0..20 {
        let mut connection = std::net::TcpStream::connect(addr).unwrap();
        connection
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: relay\r\nConnection: close\r\n\r\n")
            .unwrap();
        let _ = std::io::Read::read_to_end(&mut connection, &mut Vec::new());
    }
    terminate(child)
}

/// Sends SIGTERM and returns how the relay exited.
fn terminate(mut child: Spawned) -> std::process::ExitStatus {
    let sent = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill -TERM");
    let start = Instant::now();
    loop {
        if let Some(exit) = child.0.try_wait().unwrap() {
            return exit;
        }
        assert!(
            start.elapsed() < EXITED_WITHIN,
            "the relay still runs {EXITED_WITHIN:?} after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_relay_whose_log_reader_has_gone_stops_on_sigterm() {
    let (reader, writer) = std::io::pipe().unwrap();
    // The reader goes away once the relay runs, as a log collector that dies does; what the
    // relay wrote while starting waits unread in the pipe.
    let exit = terminate_with_stderr(writer.into(), "info", move || drop(reader));
    assert!(exit.success(), "{exit}");
}

#[test]
fn a_relay_whose_log_reader_stopped_reading_stops_on_sigterm() {
    let (reader, writer) = std::io::pipe().unwrap();
    // The pipe is kept full: the reader is held open and never read.
    let mut filler = writer.try_clone().unwrap();
    std::thread::spawn(move || {
        let chunk = [b'.'; 4096];
        while filler.write_all(&chunk).is_ok() {}
    });
    // Debug logs fill whatever the pipe has left at once.
    let exit = terminate_with_stderr(writer.into(), "debug", || {});
    assert!(exit.success(), "{exit}");
    // Closing the read end ends the filler (its write fails).
    drop(reader);
}

#[test]
fn a_relay_whose_stdout_reader_has_gone_keeps_serving_and_stops_on_sigterm() {
    let (db, dir) = (TestDb::sqlite(), TempDir::new());
    let (reader, writer) = std::io::pipe().unwrap();
    // Gone before the relay prints its first owner's link and its address.
    drop(reader);
    let mut child = Spawned(
        relay(&db, &dir)
            .env("SEALPOST_LOG", "info")
            .stdout(writer)
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn sealpost-relay"),
    );
    let stderr = BufReader::new(child.0.stderr.take().unwrap());
    let (lines, read) = mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let mut addr = None;
    // What the relay says about its stdout comes after it listens (colours or not).
    let said = loop {
        let line = read
            .recv_timeout(STARTED_WITHIN)
            .expect("the relay says what became of its output");
        if line.contains("relay listening") {
            let port = line.split("127.0.0.1:").nth(1).expect("the address");
            let port: String = port.chars().take_while(char::is_ascii_digit).collect();
            addr = Some(format!("127.0.0.1:{port}"));
        }
        if line.contains("stdout") {
            break line;
        }
    };
    let addr = addr.expect("the relay logged its address");
    let mut connection = std::net::TcpStream::connect(&addr).unwrap();
    connection
        .write_all(b"GET /readyz HTTP/1.1\r\nHost: relay\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut connection, &mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{said}\n{answer}");
    let exit = terminate(child);
    assert!(exit.success(), "{said}: {exit}");
}
