//! Kept-alive sessions (issue 26, item 9): a real background `tether`
//! keeping a real fixture server between real `tether` commands, in a
//! runtime folder of the test's own (`XDG_RUNTIME_DIR`), and no process
//! left behind however a session ends.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{
    config_dir, fixture, misbehave_entry, run_command, stderr_of, stdout_of, tether_bin, Tag,
    TempDir,
};

const WITHIN: Duration = Duration::from_secs(30);

/// A private runtime folder, and every session in it ended when dropped.
struct Runtime(TempDir);

impl Runtime {
    fn new() -> Runtime {
        let dir = TempDir::new();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        Runtime(dir)
    }

    fn folder(&self) -> std::path::PathBuf {
        self.0.path().join("tether")
    }

    /// `tether ARGS` on `config` with this runtime folder.
    fn run(&self, config: &Path, args: &[&str]) -> (Output, Duration) {
        self.run_with(config, args, &[])
    }

    /// The same, with these variables set.
    fn run_with(&self, config: &Path, args: &[&str], env: &[(&str, &str)]) -> (Output, Duration) {
        let mut command = Command::new(tether_bin());
        command
            .arg("--config-dir")
            .arg(config)
            .args(args)
            .envs(env.iter().copied())
            .env("XDG_RUNTIME_DIR", self.0.path())
            .env_remove("RUST_LOG");
        run_command(command, None, WITHIN)
    }

    fn sessions(&self, config: &Path) -> Vec<Value> {
        let (output, _) = self.run(config, &["sessions", "--json"]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
        serde_json::from_str::<Value>(&stdout_of(&output)).unwrap().as_array().unwrap().clone()
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        let mut command = Command::new(tether_bin());
        command.args(["sessions", "end", "--all"]).env("XDG_RUNTIME_DIR", self.0.path());
        let _ = run_command(command, None, WITHIN);
    }
}

/// The number of `tools/call` requests the server behind saw.
fn calls_seen(output: &Output) -> u64 {
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(output));
    let counts: Value = serde_json::from_str(stdout_of(output).trim()).unwrap();
    counts["tools/call"].as_u64().unwrap()
}

fn gone_within(tag: &Tag, within: Duration) -> bool {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if tag.live_processes().is_empty() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn a_kept_server_keeps_its_state_and_answers_without_starting_again() {
    let tag = Tag::new();
    let mut entry = misbehave_entry(&tag, &["--start-delay", "1500"]);
    entry["keepAlive"] = json!(60);
    let config = config_dir(json!({"slow": entry}));
    let runtime = Runtime::new();

    let (first, took_first) = runtime.run(config.path(), &["call", "slow", "request_counts"]);
    assert_eq!(calls_seen(&first), 1);
    assert!(took_first >= Duration::from_millis(1500), "{took_first:?}");
    // The command is over; its server is not.
    assert_eq!(tag.live_processes().len(), 1, "{:?}", tag.live_processes());
    let (second, took_second) = runtime.run(config.path(), &["call", "slow", "request_counts"]);
    assert_eq!(calls_seen(&second), 2, "the same server answered");
    assert!(took_second < Duration::from_millis(1500), "{took_second:?}");

    let sessions = runtime.sessions(config.path());
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert_eq!(sessions[0]["name"], "slow");
    assert_eq!(sessions[0]["idleSeconds"], 60);
    let socket = std::fs::read_dir(runtime.folder())
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|extension| extension == "sock"))
        .unwrap();
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let folder_mode = std::fs::metadata(runtime.folder()).unwrap().permissions().mode() & 0o777;
    assert_eq!(folder_mode, 0o700);

    let (ended, _) = runtime.run(config.path(), &["sessions", "end", "slow"]);
    assert_eq!(ended.status.code(), Some(0), "{}", stderr_of(&ended));
    assert!(stderr_of(&ended).contains("ended slow"), "{}", stderr_of(&ended));
    assert!(gone_within(&tag, Duration::from_secs(3)), "{:?}", tag.live_processes());
    assert!(!socket.exists());
    assert!(runtime.sessions(config.path()).is_empty());
    let (unknown, _) = runtime.run(config.path(), &["sessions", "end", "slow"]);
    assert_eq!(unknown.status.code(), Some(2), "{}", stderr_of(&unknown));
}

#[test]
fn keep_alive_on_the_command_line_and_a_running_session_used_without_it() {
    let tag = Tag::new();
    let config = config_dir(json!({"plain": misbehave_entry(&tag, &[])}));
    let runtime = Runtime::new();
    let (first, _) =
        runtime.run(config.path(), &["call", "plain", "--keep-alive", "request_counts"]);
    assert_eq!(calls_seen(&first), 1);
    // No flag, no keepAlive: the session running is used all the same.
    let (second, _) = runtime.run(config.path(), &["call", "plain", "request_counts"]);
    assert_eq!(calls_seen(&second), 2);
    let (tools, _) = runtime.run(config.path(), &["tools", "plain"]);
    assert!(stdout_of(&tools).contains("mcp__plain__request_counts"), "{}", stdout_of(&tools));

    // An ad-hoc server typed on the command line is kept the same way.
    let line = format!("{} --tag {}", fixture("misbehave").display(), tag.0);
    let adhoc = ["call", "--keep-alive", "--stdio", &line, "request_counts"];
    let (first, _) = runtime.run(config.path(), &adhoc);
    assert_eq!(calls_seen(&first), 1, "a session of its own");
    let (second, _) = runtime.run(config.path(), &adhoc);
    assert_eq!(calls_seen(&second), 2);
    assert_eq!(runtime.sessions(config.path()).len(), 2);

    let (ended, _) = runtime.run(config.path(), &["sessions", "end", "--all"]);
    assert_eq!(ended.status.code(), Some(0), "{}", stderr_of(&ended));
    assert!(gone_within(&tag, Duration::from_secs(3)), "{:?}", tag.live_processes());
    // Without a session the server starts afresh for each command.
    let (again, _) = runtime.run(config.path(), &["call", "plain", "request_counts"]);
    assert_eq!(calls_seen(&again), 1);
}

#[test]
fn a_killed_keeper_takes_its_server_along_and_an_idle_one_ends_by_itself() {
    let tag = Tag::new();
    let mut entry = misbehave_entry(&tag, &[]);
    entry["keepAlive"] = json!(true);
    let mut brief = misbehave_entry(&tag, &["--era", "legacy"]);
    brief["keepAlive"] = json!(1);
    let config = config_dir(json!({"kept": entry, "brief": brief}));
    let runtime = Runtime::new();

    let (called, _) = runtime.run(config.path(), &["call", "kept", "echo", "text=hi"]);
    assert_eq!(stdout_of(&called).trim(), "hi", "{}", stderr_of(&called));
    let sessions = runtime.sessions(config.path());
    assert_eq!(sessions[0]["idleSeconds"], 900, "true is 15 minutes");
    let pid = sessions[0]["pid"].as_i64().unwrap() as i32;
    // SAFETY: a plain system call on the keeper this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    assert!(gone_within(&tag, Duration::from_secs(3)), "{:?}", tag.live_processes());
    assert!(runtime.sessions(config.path()).is_empty(), "a dead keeper is no session");

    let (called, _) = runtime.run(config.path(), &["call", "brief", "echo", "text=hi"]);
    assert_eq!(stdout_of(&called).trim(), "hi", "{}", stderr_of(&called));
    assert_eq!(runtime.sessions(config.path()).len(), 1);
    // One second unused, and a quarter of a second for the keeper to look.
    assert!(gone_within(&tag, Duration::from_secs(5)), "{:?}", tag.live_processes());
    assert!(runtime.sessions(config.path()).is_empty());
}

#[test]
fn a_kept_server_that_cannot_start_is_said_with_the_same_exit_code() {
    let config = config_dir(json!({
        "missing": {"command": "/nonexistent/tether-test-server", "keepAlive": true},
    }));
    let runtime = Runtime::new();
    let (output, _) = runtime.run(config.path(), &["call", "missing", "x"]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr_of(&output));
    let said = stderr_of(&output);
    assert!(said.contains("/nonexistent/tether-test-server"), "{said}");
    assert!(runtime.sessions(config.path()).is_empty());
    // The words of the same start without a session.
    let direct = config_dir(json!({
        "missing": {"command": "/nonexistent/tether-test-server"},
    }));
    let (without, _) = runtime.run(direct.path(), &["call", "missing", "x"]);
    assert_eq!(without.status.code(), Some(3));
    let in_dir = |text: &str, dir: &Path| text.replace(&dir.display().to_string(), "DIR");
    assert_eq!(in_dir(&said, config.path()), in_dir(&stderr_of(&without), direct.path()));
    // With --json, one object, its hints among its details.
    let (output, _) = runtime.run(config.path(), &["call", "missing", "x", "--json"]);
    let object: Value = serde_json::from_str(stderr_of(&output).trim()).unwrap();
    assert_eq!(object["error"]["code"], "serverFailed", "{object}");
    assert!(object["error"]["details"].as_array().is_some_and(|d| !d.is_empty()), "{object}");
}

#[test]
fn a_runtime_folder_open_to_others_is_refused() {
    let tag = Tag::new();
    let mut entry = misbehave_entry(&tag, &[]);
    entry["keepAlive"] = json!(true);
    let config = config_dir(json!({"kept": entry}));
    let runtime = Runtime::new();
    std::fs::create_dir(runtime.folder()).unwrap();
    std::fs::set_permissions(runtime.folder(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let (output, _) = runtime.run(config.path(), &["call", "kept", "echo", "text=hi"]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr_of(&output));
    assert!(stderr_of(&output).contains("open to others"), "{}", stderr_of(&output));
    assert!(tag.live_processes().is_empty());
}

#[test]
fn only_the_servers_a_command_names_start_sessions_and_list_says_which_are_kept() {
    let tag = Tag::new();
    let mut kept = misbehave_entry(&tag, &["--era", "legacy"]);
    kept["keepAlive"] = json!(60);
    let mut other = misbehave_entry(&tag, &[]);
    other["keepAlive"] = json!(60);
    let config = config_dir(json!({"kept": kept, "other": other}));
    let runtime = Runtime::new();
    // A plain listing starts none.
    let (listed, _) = runtime.run(config.path(), &["list"]);
    assert_eq!(listed.status.code(), Some(0), "{}", stderr_of(&listed));
    assert!(runtime.sessions(config.path()).is_empty());
    // A call starts its own server's alone.
    let (called, _) = runtime.run(config.path(), &["call", "kept", "echo", "text=hi"]);
    assert_eq!(stdout_of(&called).trim(), "hi", "{}", stderr_of(&called));
    let sessions = runtime.sessions(config.path());
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert_eq!(sessions[0]["name"], "kept");
    // A listing uses the session running, and says so; the server's own
    // name and era come through it.
    let (listed, _) = runtime.run(config.path(), &["list"]);
    let text = stdout_of(&listed);
    assert!(text.contains("kept alive: served by a kept-alive session"), "{text}");
    assert_eq!(text.matches("kept alive:").count(), 1, "{text}");
    let (listed, _) = runtime.run(config.path(), &["list", "--json"]);
    let rows: Value = serde_json::from_str(&stdout_of(&listed)).unwrap();
    let row = rows.as_array().unwrap().iter().find(|row| row["name"] == "kept").unwrap().clone();
    assert_eq!(row["keptAlive"], true, "{row}");
    assert_eq!(row["serverName"], "misbehave", "{row}");
    assert_eq!(runtime.sessions(config.path()).len(), 1);
    // A script starts the sessions of the servers it calls.
    if tether::CODEMODE_AVAILABLE {
        let script = "return (await tools.mcp__other__echo({text: 'x'})).content[0].text";
        let (ran, _) = runtime.run(config.path(), &["run", "-e", script]);
        assert_eq!(stdout_of(&ran).trim(), "x", "{}", stderr_of(&ran));
        assert_eq!(runtime.sessions(config.path()).len(), 2);
    }
}

#[test]
fn a_kept_server_asks_the_roots_of_the_command_in_front_and_its_crash_is_a_failure() {
    let tag = Tag::new();
    let mut entry = misbehave_entry(&tag, &["--era", "legacy", "--crash-on-call", "5"]);
    entry["keepAlive"] = json!(60);
    let config = config_dir(json!({"fx": entry}));
    let runtime = Runtime::new();
    let asked_roots = |root: &Path| {
        let root_arg = root.display().to_string();
        let (asked, _) =
            runtime.run(config.path(), &["--root", &root_arg, "call", "fx", "ask_roots", "ms=300"]);
        assert_eq!(stdout_of(&asked).trim(), "asked for roots", "{}", stderr_of(&asked));
        let (replies, _) = runtime.run(config.path(), &["call", "fx", "client_replies"]);
        let replies: Vec<Value> = serde_json::from_str(stdout_of(&replies).trim()).unwrap();
        let last = replies.iter().rev().find(|reply| reply["id"] == "asked-roots").cloned();
        last.unwrap_or(Value::Null)["result"]["roots"][0]["uri"].as_str().unwrap_or("").to_owned()
    };
    let (first, second) = (TempDir::new(), TempDir::new());
    let first_root = std::fs::canonicalize(first.path()).unwrap();
    let second_root = std::fs::canonicalize(second.path()).unwrap();
    assert!(asked_roots(first.path()).ends_with(&first_root.display().to_string()));
    // The next command's roots, not the first's.
    assert!(asked_roots(second.path()).ends_with(&second_root.display().to_string()));

    // Its fifth call crashes it: a failure of the server (3), with its
    // last words, as without a session; the session starts it again.
    let (crashed, _) = runtime.run(config.path(), &["call", "fx", "echo", "text=x"]);
    assert_eq!(crashed.status.code(), Some(3), "{}", stderr_of(&crashed));
    assert!(stderr_of(&crashed).contains("stderr:"), "{}", stderr_of(&crashed));
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let (again, _) = runtime.run(config.path(), &["call", "fx", "echo", "text=back"]);
        if stdout_of(&again).trim() == "back" {
            break;
        }
        assert!(Instant::now() < until, "{}", stderr_of(&again));
        std::thread::sleep(Duration::from_millis(200));
    }
}

// A second cold trial: a script that calls no tool started every server's
// session; `--timeout` did not bound a session's start; a changed variable
// reused the session started with the old value.
#[test]
fn a_session_starts_only_when_needed_within_the_timeout_and_anew_for_new_values() {
    let tag = Tag::new();
    let mut entry = misbehave_entry(&tag, &["--era", "legacy"]);
    entry["env"] = json!({"MYV": "${TETHER_TEST_VALUE}"});
    let hangs = misbehave_entry(&tag, &["--hang-initialize"]);
    let config = config_dir(json!({"fx": entry, "hangs": hangs}));
    let runtime = Runtime::new();
    if tether::CODEMODE_AVAILABLE {
        let (ran, _) = runtime.run_with(
            config.path(),
            &["--keep-alive", "run", "-e", "return 1"],
            &[("TETHER_TEST_VALUE", "a")],
        );
        assert_eq!(stdout_of(&ran).trim(), "1", "{}", stderr_of(&ran));
        assert!(runtime.sessions(config.path()).is_empty());
    }
    let (timed, took) =
        runtime.run(config.path(), &["--keep-alive", "call", "hangs", "x", "--timeout", "1"]);
    assert_eq!(timed.status.code(), Some(3), "{}", stderr_of(&timed));
    assert!(took < Duration::from_secs(5), "{took:?}");
    let value_seen = |value: &str| {
        let args = ["--keep-alive", "call", "fx", "env"];
        let (output, _) = runtime.run_with(config.path(), &args, &[("TETHER_TEST_VALUE", value)]);
        let env: Value = serde_json::from_str(stdout_of(&output).trim()).unwrap();
        env["MYV"].as_str().unwrap_or("").to_owned()
    };
    assert_eq!(value_seen("a"), "a");
    assert_eq!(value_seen("b"), "b", "a new value, a new session");
    let names: Vec<Value> =
        runtime.sessions(config.path()).iter().map(|s| s["name"].clone()).collect();
    assert_eq!(names, [json!("fx"), json!("fx")]);
}
