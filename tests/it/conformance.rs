//! The official MCP conformance suite's client scenarios, against
//! `examples/conformance.rs` (a thin client on the public API).
//!
//! The suite (pinned in `interop_setup`, with the Node.js 22 it needs) plays
//! the server side of each scenario on loopback and grades what it saw; a
//! scenario passes when the suite exits 0 (no failure and no warning) and
//! the client demonstrably reached its server (the suite would otherwise
//! pass a client that does nothing). Run alone with
//! `cargo test --test it conformance -- --nocapture` to see every scenario
//! with its time; each one's logs and `checks.json` stay in
//! `target/tmp/conformance-<scenario>`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::interop_setup::conformance_suite;
use crate::support::target_dir;

/// A scenario that has not finished by then is killed and fails.
const SCENARIO_LIMIT: Duration = Duration::from_secs(60);

/// `target/debug/examples/conformance`, built once.
fn client() -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let status = Command::new(env!("CARGO"))
            .args(["build", "--quiet", "--workspace", "--example", "conformance"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building examples/conformance.rs failed");
    });
    target_dir().join("debug/examples/conformance")
}

/// The suite's client scenarios, as it lists them.
fn scenarios(node: &Path, suite: &Path) -> Vec<String> {
    let out = Command::new(node).arg(suite).args(["list", "--client"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.strip_prefix("  - "))
        .map(|rest| rest.split_whitespace().next().unwrap_or("").to_owned())
        .filter(|name| !name.is_empty())
        .collect()
}

/// Runs one scenario; `Err` says why it failed.
fn run_scenario(name: &str) -> Result<Duration, String> {
    let (node, suite, guard) = conformance_suite();
    let out_dir = target_dir().join("tmp").join(format!("conformance-{}", name.replace('/', "_")));
    let _ = fs::remove_dir_all(&out_dir);
    fs::create_dir_all(&out_dir).unwrap();
    let log = fs::File::create(out_dir.join("suite.log")).unwrap();
    let started = Instant::now();
    let mut command = Command::new(&node);
    command
        .arg("--require")
        .arg(&guard)
        .arg(&suite)
        .args(["client", "--command"])
        .arg(client())
        .args(["--scenario", name, "--timeout", "30000", "-o"])
        .arg(&out_dir)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log);
    // Its own process group: on a timeout the suite, the shell and the client
    // all go.
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command.spawn().unwrap();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > SCENARIO_LIMIT {
            // SAFETY: signals the group this test started.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            return Err(format!("not finished within {SCENARIO_LIMIT:?}"));
        }
        thread::sleep(Duration::from_millis(20));
    };
    let took = started.elapsed();
    let checks = find_checks(&out_dir)
        .and_then(|path| fs::read_to_string(path).ok())
        .and_then(|text| serde_json::from_str::<Vec<Value>>(&text).ok())
        .unwrap_or_default();
    let bad: Vec<String> = checks
        .iter()
        .filter(|check| check["status"] == "FAILURE" || check["status"] == "WARNING")
        .map(|check| format!("{} {}: {}", check["status"], check["id"], check["errorMessage"]))
        .collect();
    let reached = checks.iter().any(|check| {
        check["id"] == "incoming-request" || check["id"] == "mcp-client-initialization"
    });
    match (status.success(), reached) {
        (true, true) => Ok(took),
        (true, false) => Err("passed without ever reaching the mock server".into()),
        (false, _) => Err(format!(
            "suite exit {:?}; {}; see {}",
            status.code(),
            if bad.is_empty() { "no failed check".to_owned() } else { bad.join("; ") },
            out_dir.display()
        )),
    }
}

fn find_checks(dir: &Path) -> Option<PathBuf> {
    for entry in fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = find_checks(&path) {
                return Some(found);
            }
        } else if path.file_name().is_some_and(|name| name == "checks.json") {
            return Some(path);
        }
    }
    None
}

#[test]
fn every_client_scenario_of_the_conformance_suite_passes() {
    let (node, suite, _) = conformance_suite();
    let names = scenarios(&node, &suite);
    assert!(names.len() >= 26, "the suite listed {} client scenarios: {names:?}", names.len());
    let mut failures = Vec::new();
    for name in &names {
        match run_scenario(name) {
            Ok(took) => eprintln!("PASS {name} ({:.1} s)", took.as_secs_f64()),
            Err(why) => {
                eprintln!("FAIL {name}: {why}");
                failures.push(format!("{name}: {why}"));
            }
        }
    }
    eprintln!("conformance: {} of {} scenarios passed", names.len() - failures.len(), names.len());
    assert!(failures.is_empty(), "failed scenarios:\n{}", failures.join("\n"));
}
