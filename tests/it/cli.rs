//! The `tether` binary: each command's output and exit code, and that no
//! server outlives it, also when it gets a signal or is killed outright.

use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{
    config_dir, fixture, misbehave_entry, run_tether, run_tether_with_stdin, stderr_of, stdout_of,
    tether_bin, wait_exit, wait_within, OnTerminal, Tag, TempDir,
};

const WITHIN: Duration = Duration::from_secs(20);

fn demo_entry() -> Value {
    json!({"command": fixture("demo-server")})
}

#[test]
fn call_prints_the_text_and_exits_0() {
    let dir = config_dir(json!({"demo": demo_entry()}));
    let (output, _) = run_tether(
        dir.path(),
        &["call", "demo", "count_words", r#"{"text": "one two three"}"#],
        WITHIN,
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(stdout_of(&output), "3 words, 13 characters\n");
}

#[test]
fn call_reads_arguments_from_stdin_and_accepts_qualified_names() {
    let dir = config_dir(json!({"demo": demo_entry()}));
    let (output, _) = run_tether_with_stdin(
        dir.path(),
        &["call", "demo", "mcp__demo__echo", "-"],
        Some(r#"{"text":"piped"}"#),
        WITHIN,
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(stdout_of(&output), "piped\n");
}

#[test]
fn call_json_prints_the_whole_result() {
    let dir = config_dir(json!({"demo": demo_entry()}));
    let (output, _) = run_tether(
        dir.path(),
        &["call", "demo", "count_words", r#"{"text":"a b"}"#, "--json"],
        WITHIN,
    );
    assert_eq!(output.status.code(), Some(0));
    let result: Value = serde_json::from_str(&stdout_of(&output)).unwrap();
    assert_eq!(result["structuredContent"]["words"], 2);
}

#[test]
fn a_tool_error_exits_1_and_prints_its_text() {
    let tag = Tag::new();
    let dir = config_dir(json!({"fx": misbehave_entry(&tag, &[])}));
    let (output, _) = run_tether(dir.path(), &["call", "fx", "fail"], WITHIN);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout_of(&output), "something went wrong\n");
    // Said on stderr too (a cold trial: nothing told the user it failed).
    assert_eq!(stderr_of(&output), "error: server \"fx\": the tool \"fail\" reported an error\n");
    tag.assert_gone();
}

/// Started from a cron job or a service manager, tether may run with its
/// stdin closed: the server's pipes then take the low descriptor numbers,
/// and must still land on the server's 0, 1 and 2.
#[test]
fn a_call_works_when_tether_runs_with_its_stdin_closed() {
    use std::os::unix::process::CommandExt;
    let tag = Tag::new();
    let dir = config_dir(json!({"fx": misbehave_entry(&tag, &[])}));
    let mut command = Command::new(tether_bin());
    command
        .arg("--config-dir")
        .arg(dir.path())
        .args(["call", "fx", "echo", r#"{"text": "still here"}"#])
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: close is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            libc::close(0);
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    let status = wait_within(&mut child, WITHIN);
    let output = child.wait_with_output().unwrap();
    assert!(status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "still here\n");
    tag.assert_gone();
}

#[test]
fn usage_errors_exit_2() {
    let dir = config_dir(json!({"demo": demo_entry()}));
    for (args, expected) in [
        (vec!["call", "nosuch", "echo"], "no server named \"nosuch\""),
        (vec!["call", "demo", "nosuch"], "no tool named \"nosuch\""),
        (vec!["call", "demo", "echo", "{not json"], "not valid JSON"),
        (vec!["call", "demo", "echo", "[1]"], "must be a JSON object"),
        (vec!["call", "demo"], "usage"),
        (vec!["frobnicate"], "unknown command"),
        (vec!["list", "--bogus"], "invalid option"),
    ] {
        let (output, _) = run_tether(dir.path(), &args, WITHIN);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr_of(&output));
        assert!(stderr_of(&output).contains(expected), "{args:?}: {}", stderr_of(&output));
        assert!(stdout_of(&output).is_empty());
    }
}

#[test]
fn an_invalid_entry_is_a_usage_error_for_call_and_a_failure_in_list() {
    let dir = config_dir(json!({"demo": demo_entry(), "typo": {"comand": "x"}}));
    let (output, _) = run_tether(dir.path(), &["call", "typo", "echo"], WITHIN);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr_of(&output).contains("did you mean \"command\""), "{}", stderr_of(&output));
    let (output, _) = run_tether(dir.path(), &["list"], WITHIN);
    assert_eq!(output.status.code(), Some(1));
    let out = stdout_of(&output);
    assert!(out.contains("demo  connected"), "{out}");
    assert!(out.contains("typo  failed") && out.contains("unknown field \"comand\""), "{out}");
}

#[test]
fn server_failures_exit_3_with_the_server_named() {
    let tag = Tag::new();
    let dir = config_dir(json!({
        "crashy": misbehave_entry(&tag, &["--crash-on-call", "1"]),
        "dies": misbehave_entry(&tag, &["--exit-during-initialize"]),
        "huge": misbehave_entry(&tag, &[]),
        "silent": misbehave_entry(&tag, &["--never-answer"]),
        "missing": {"command": "/nonexistent/mcp-server"},
    }));
    for (args, expected) in [
        (
            vec!["call", "crashy", "echo", r#"{"text":"x"}"#],
            "server \"crashy\": the server exited with status 3\n  stderr: crashing now",
        ),
        (vec!["call", "dies", "echo"], "fatal: cannot start"),
        (vec!["call", "huge", "huge", r#"{"bytes": 20971520}"#], "frame too large"),
        (vec!["call", "silent", "echo", r#"{"text":"x"}"#, "--timeout", "0.5"], "timed out"),
        (vec!["call", "missing", "echo"], "could not start `/nonexistent/mcp-server`"),
    ] {
        let (output, elapsed) = run_tether(dir.path(), &args, WITHIN);
        assert_eq!(output.status.code(), Some(3), "{args:?}: {}", stderr_of(&output));
        assert!(stderr_of(&output).contains(expected), "{args:?}: {}", stderr_of(&output));
        assert!(elapsed < Duration::from_secs(5), "{args:?} took {elapsed:?}");
    }
    tag.assert_gone();
}

#[test]
fn list_shows_every_server_and_exits_1_when_one_is_down() {
    let tag = Tag::new();
    let dir = config_dir(json!({
        "demo": demo_entry(),
        "broken": misbehave_entry(&tag, &["--exit-during-initialize"]),
        "off": {"command": "x", "enabled": false},
    }));
    let (output, _) = run_tether(dir.path(), &["list"], WITHIN);
    assert_eq!(output.status.code(), Some(1));
    let out = stdout_of(&output);
    // Aligned columns: name, state, transport, scope, what it runs; then the tools.
    assert!(out.contains("demo    connected  stdio  user  "), "{out}");
    assert!(out.contains("demo-server\n    2 tools: count_words, echo\n"), "{out}");
    assert!(out.contains("broken  failed     stdio  user  "), "{out}");
    assert!(out.contains("| fatal: cannot start"), "{out}");
    assert!(out.contains("off     disabled   stdio  user  x\n"), "{out}");

    let (output, _) = run_tether(dir.path(), &["list", "--json"], WITHIN);
    let statuses: Vec<Value> = serde_json::from_str(&stdout_of(&output)).unwrap();
    assert_eq!(statuses.len(), 3);
    // One vocabulary: the word `list` prints, camelCase keys.
    assert_eq!(statuses[0]["state"], "connected");
    assert_eq!(statuses[0]["serverName"], "demo-server");
    assert_eq!(statuses[1]["state"], "failed");
    tag.assert_gone();
}

#[test]
fn list_exits_0_when_all_connect() {
    let dir = config_dir(json!({"demo": demo_entry()}));
    let (output, _) = run_tether(dir.path(), &["list"], WITHIN);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
}

#[test]
fn tools_shows_qualified_names() {
    let dir = config_dir(json!({"demo": demo_entry()}));
    let (output, _) = run_tether(dir.path(), &["tools"], WITHIN);
    assert_eq!(output.status.code(), Some(0));
    let out = stdout_of(&output);
    assert!(out.starts_with("mcp__demo__count_words  direct  Count the words"), "{out}");
    let (output, _) = run_tether(dir.path(), &["tools", "--server", "demo", "--json"], WITHIN);
    let tools: Vec<Value> = serde_json::from_str(&stdout_of(&output)).unwrap();
    assert_eq!(tools[1]["name"], "mcp__demo__echo");
    assert_eq!(tools[1]["tool"], "echo");
}

#[test]
fn no_config_file_means_no_servers() {
    let dir = crate::support::TempDir::new();
    let (output, _) = run_tether(dir.path(), &["list"], WITHIN);
    assert_eq!(output.status.code(), Some(0));
    assert!(stderr_of(&output).contains("No servers configured"));
}

/// Starts `tether call` on a slow tool and waits until its server (and the
/// server's grandchild) are running.
fn start_slow_call(tag: &Tag, flags: &[&str]) -> (std::process::Child, crate::support::TempDir) {
    let dir = config_dir(json!({"fx": misbehave_entry(tag, flags)}));
    let child = spawn_tether(
        dir.path(),
        &["call", "fx", "sleep", r#"{"ms": 30000}"#],
        Stdio::null(),
        Stdio::null(),
    );
    let expected = 1
        + usize::from(flags.contains(&"--grandchild"))
        + usize::from(flags.contains(&"--setsid-grandchild"));
    tag.wait_for_processes(expected, Duration::from_secs(10));
    // Let the call reach the server.
    thread::sleep(Duration::from_millis(300));
    (child, dir)
}

/// `tether --config-dir DIR ARGS` started with no stdin and these outputs.
fn spawn_tether(
    dir: &std::path::Path,
    args: &[&str],
    stdout: Stdio,
    stderr: Stdio,
) -> std::process::Child {
    Command::new(tether_bin())
        .arg("--config-dir")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .unwrap()
}

#[test]
fn sigterm_mid_call_leaves_nothing_behind() {
    let tag = Tag::new();
    let (mut child, _dir) = start_slow_call(&tag, &["--grandchild"]);
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(wait_exit(&mut child, Duration::from_secs(5)), Some(128 + libc::SIGTERM));
    tag.assert_gone();
}

#[test]
fn sigint_and_sighup_mid_call_leave_nothing_behind() {
    for signal in [libc::SIGINT, libc::SIGHUP] {
        let tag = Tag::new();
        let (mut child, _dir) = start_slow_call(&tag, &["--grandchild", "--ignore-sigterm"]);
        unsafe { libc::kill(child.id() as i32, signal) };
        // The grandchild ignores SIGTERM: it takes the grace period, then SIGKILL.
        assert_eq!(wait_exit(&mut child, Duration::from_secs(8)), Some(128 + signal));
        tag.assert_gone();
    }
}

#[test]
fn sigkill_of_tether_takes_the_server_with_it() {
    let tag = Tag::new();
    // The server ignores the end of its input, so only the parent death
    // signal can end it.
    let (mut child, _dir) = start_slow_call(&tag, &["--ignore-eof"]);
    child.kill().unwrap();
    child.wait().unwrap();
    // PR_SET_PDEATHSIG: the kernel kills the server when tether dies.
    tag.assert_gone_within(Duration::from_secs(2));
}

// Issue 12 (items 9 and 10): killed outright mid-call, tether still takes
// the server's whole tree with it: its process group, and a grandchild that
// left it with setsid. Measured: gone within 1 s.
#[test]
fn sigkill_of_tether_ends_the_servers_whole_tree_within_a_second() {
    let tag = Tag::new();
    let (mut child, _dir) = start_slow_call(
        &tag,
        &["--ignore-eof", "--ignore-sigterm", "--grandchild", "--setsid-grandchild"],
    );
    assert_eq!(tag.live_processes().len(), 3, "{:?}", tag.live_processes());
    let killed = Instant::now();
    child.kill().unwrap();
    child.wait().unwrap();
    tag.assert_gone_within(Duration::from_secs(1));
    let took = killed.elapsed();
    eprintln!("the tree was gone {took:?} after tether was killed");
}

// Issue 12 (item 10): interrupted while a `!command` helper runs (as one
// waiting for a password would), tether exits at once and the helper's
// whole tree ends with it.
#[test]
fn an_interrupted_config_load_leaves_no_helper_behind() {
    let tag = Tag::new();
    let helper =
        format!("!{} --tag {} --grandchild --ignore-eof", fixture("misbehave").display(), tag.0);
    let dir = config_dir(json!({
        "web": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": helper}},
    }));
    let mut child = spawn_tether(dir.path(), &["list"], Stdio::null(), Stdio::null());
    // The helper and its grandchild are running; tether waits for the helper.
    tag.wait_for_processes(2, Duration::from_secs(10));
    let interrupted = Instant::now();
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(wait_exit(&mut child, Duration::from_secs(3)), Some(128 + libc::SIGINT));
    tag.assert_gone_within(Duration::from_secs(1));
    eprintln!("tether and the helper's tree were gone {:?} after Ctrl-C", interrupted.elapsed());
}

// A `!command` helper that finishes normally keeps an agent it started on
// purpose (as `pass` starts gpg-agent); only tether's death ends its tree.
#[test]
fn a_finished_helper_keeps_the_agent_it_started() {
    let tag = Tag::new();
    let helper = format!("!{} --tag {} --setsid-grandchild", fixture("misbehave").display(), tag.0);
    let dir = config_dir(json!({
        "web": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": helper}},
    }));
    let (output, _) = run_tether(dir.path(), &["list"], WITHIN);
    assert_eq!(output.status.code(), Some(1), "{}", stderr_of(&output));
    let agents = tag.live_processes();
    assert_eq!(agents.len(), 1, "the agent lives on: {agents:?}");
    assert!(agents[0].1.contains("--sleeper"), "{agents:?}");
    for (pid, _) in agents {
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
    tag.assert_gone();
}

#[test]
fn a_closed_stdout_still_ends_every_server() {
    let tag = Tag::new();
    let dir =
        config_dir(json!({"fx": misbehave_entry(&tag, &["--grandchild", "--many-tools", "2000"])}));
    let mut child = spawn_tether(dir.path(), &["tools", "--json"], Stdio::piped(), Stdio::null());
    // Read a little, then close the pipe, as `| head -c 100` would.
    let mut stdout = child.stdout.take().unwrap();
    let mut start = [0u8; 100];
    std::io::Read::read_exact(&mut stdout, &mut start).unwrap();
    drop(stdout);
    assert_eq!(wait_exit(&mut child, Duration::from_secs(10)), Some(0));
    tag.assert_gone();
}

#[test]
fn tether_mcp_0_turns_everything_off() {
    let tag = Tag::new();
    let dir = config_dir(json!({"fx": misbehave_entry(&tag, &[])}));
    let output = Command::new(tether_bin())
        .arg("--config-dir")
        .arg(dir.path())
        .arg("list")
        .env("TETHER_MCP", "0")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(output.stdout.is_empty());
    assert!(tag.live_processes().is_empty());
}

// Issue 8: hints are the CLI's, made from the library's typed errors.
#[test]
fn list_says_what_to_do_about_each_failure() {
    let tag = Tag::new();
    let mut hangs = misbehave_entry(&tag, &["--hang-initialize"]);
    hangs["startTimeout"] = json!(1);
    let dir = config_dir(json!({
        "missing": {"command": "/nonexistent/server"},
        "hangs": hangs,
    }));
    let (output, _) = run_tether(dir.path(), &["list"], WITHIN);
    assert_eq!(output.status.code(), Some(1), "{}", stderr_of(&output));
    let out = stdout_of(&output);
    assert!(out.contains("could not start `/nonexistent/server`"), "{out}");
    assert!(out.contains("check that `/nonexistent/server` is installed and on PATH"), "{out}");
    assert!(out.contains("(start timeout 1s)"), "{out}");
    // What it was doing comes before the advice to wait longer.
    assert!(out.contains("hint: the server was still starting (it"), "{out}");
    assert!(out.contains("if it needs longer, raise \"startTimeout\" in"), "{out}");
    let (output, _) = run_tether(dir.path(), &["list", "--json"], WITHIN);
    let statuses: Vec<Value> = serde_json::from_str(&stdout_of(&output)).unwrap();
    let hangs = statuses.iter().find(|status| status["name"] == "hangs").unwrap();
    assert_eq!(hangs["state"], "failed");
    assert!(hangs["hint"].as_str().unwrap().contains("startTimeout"), "{hangs}");
    assert!(hangs["since"].as_str().unwrap().ends_with('Z'), "{hangs}");
    tag.assert_gone();
}

// Issue 13 (item 1): a one-shot command has its answer; a server that does
// not exit when its input ends gets SIGTERM after a short grace, unless its
// entry's shutdownTimeout says otherwise.
#[test]
fn a_one_shot_call_does_not_wait_seconds_for_a_server_that_ignores_eof() {
    let tag = Tag::new();
    let dir = config_dir(json!({"fx": misbehave_entry(&tag, &["--ignore-eof"])}));
    let (output, took) =
        run_tether(dir.path(), &["call", "fx", "echo", r#"{"text": "quick"}"#], WITHIN);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(stdout_of(&output), "quick\n");
    assert!(took < Duration::from_millis(1200), "took {took:?}");
    tag.assert_gone();

    let mut patient = misbehave_entry(&tag, &["--ignore-eof"]);
    patient["shutdownTimeout"] = json!(1.5);
    let dir = config_dir(json!({"fx": patient}));
    let (output, took) =
        run_tether(dir.path(), &["call", "fx", "echo", r#"{"text": "x"}"#], WITHIN);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert!(
        took >= Duration::from_millis(1500),
        "the entry's shutdownTimeout was not honoured: {took:?}"
    );
    tag.assert_gone();
}

// Issue 12 (item 3): a notification flood is reported once a second with a
// count, not once per dropped notification.
#[test]
fn a_notification_flood_is_reported_a_few_times_not_thousands() {
    let tag = Tag::new();
    let dir = config_dir(json!({"fx": misbehave_entry(&tag, &["--notify", "30000"])}));
    let (output, _) = run_tether(dir.path(), &["call", "fx", "echo", r#"{"text": "x"}"#], WITHIN);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let stderr = stderr_of(&output);
    let warnings = stderr.matches("too many notifications").count();
    assert!(warnings <= 5, "{warnings} warning lines:\n{}", &stderr[..stderr.len().min(2000)]);
    tag.assert_gone();
}

// Issue 13 (items 6, 8, 9, 12): the qualified name alone, a typo's
// suggestion, empty stdin as no arguments, and "disabled" as Claude Code
// writes it.
#[test]
fn call_takes_the_qualified_name_suggests_names_and_reads_empty_stdin_as_no_arguments() {
    let dir =
        config_dir(json!({"demo": demo_entry(), "old": {"command": "true", "disabled": true}}));
    let (output, _) = run_tether(
        dir.path(),
        &["call", "mcp__demo__count_words", r#"{"text": "one two"}"#],
        WITHIN,
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(stdout_of(&output), "2 words, 7 characters\n");
    assert!(!stderr_of(&output).contains("disabled"), "disabled: true is not warned about");

    let (output, _) = run_tether(dir.path(), &["call", "dmeo", "count_words"], WITHIN);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr_of(&output).contains("did you mean \"demo\""), "{}", stderr_of(&output));

    let (output, _) =
        run_tether_with_stdin(dir.path(), &["call", "demo", "count_words", "-"], Some(""), WITHIN);
    assert_ne!(output.status.code(), Some(2), "empty stdin is {{}}: {}", stderr_of(&output));

    let (output, _) = run_tether(dir.path(), &["list"], WITHIN);
    assert!(stdout_of(&output).contains("old") && stdout_of(&output).contains("disabled"));
}

// Issue 12 (item 11): --timeout is the whole call's ceiling, even while the
// server keeps sending progress.
#[test]
fn timeout_bounds_a_call_that_keeps_sending_progress() {
    let tag = Tag::new();
    let dir = config_dir(json!({"fx": misbehave_entry(&tag, &[])}));
    let (output, took) = run_tether(
        dir.path(),
        &["call", "fx", "progress", r#"{"steps": 20, "interval_ms": 300}"#, "--timeout", "1"],
        WITHIN,
    );
    assert_eq!(output.status.code(), Some(3), "{}", stderr_of(&output));
    assert!(stderr_of(&output).contains("timed out"), "{}", stderr_of(&output));
    assert!(took < Duration::from_millis(2500), "took {took:?}");
    tag.assert_gone();
}

// Issue 13 (item 10): no hint points at a stderr that is not shown.
#[test]
fn an_unreachable_remote_server_is_not_said_to_have_stderr() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let dir = config_dir(json!({"web": {"url": format!("http://127.0.0.1:{port}/mcp")}}));
    let (output, _) = run_tether(dir.path(), &["list"], WITHIN);
    assert_eq!(output.status.code(), Some(1));
    let out = stdout_of(&output);
    assert!(out.contains("cannot reach"), "{out}");
    assert!(!out.contains("stderr is below"), "{out}");
}

/// `tether call` on a server that outlasts its closing: it ignores the end
/// of its input and SIGTERM, and its entry gives it `shutdownTimeout` 30 s.
fn call_on_a_lingering_server(tag: &Tag, extra: &[&str]) -> (std::process::Child, TempDir) {
    let dir = config_dir(json!({"slow": {
        "command": fixture("misbehave"),
        "args": ["--tag", tag.0, "--ignore-eof", "--ignore-sigterm"],
        "shutdownTimeout": 30,
    }}));
    let mut args = vec!["call", "slow", "echo", r#"{"text": "done"}"#];
    args.extend_from_slice(extra);
    let child = spawn_tether(dir.path(), &args, Stdio::piped(), Stdio::null());
    (child, dir)
}

// A cold trial: Ctrl-C while the command's server took its long
// `shutdownTimeout` to close changed nothing for 30 s. A signal then means
// "now": tether exits at once, and the server's supervisor ends its tree.
#[test]
fn a_signal_while_the_servers_close_exits_at_once() {
    let tag = Tag::new();
    let (mut child, _dir) = call_on_a_lingering_server(&tag, &[]);
    let mut answer = String::new();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    std::io::BufRead::read_line(&mut stdout, &mut answer).unwrap();
    assert_eq!(answer.trim(), "done");
    // The answer is out; tether now waits for the server to close.
    thread::sleep(Duration::from_millis(500));
    let interrupted = Instant::now();
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(wait_exit(&mut child, Duration::from_secs(3)), Some(128 + libc::SIGINT));
    assert!(interrupted.elapsed() < Duration::from_secs(1), "{:?}", interrupted.elapsed());
    tag.assert_gone_within(Duration::from_secs(3));
}

// --timeout bounds the whole command, the closing too: a server's long
// `shutdownTimeout` does not hold tether past it (and a little more).
#[test]
fn call_timeout_bounds_the_closing_too() {
    let tag = Tag::new();
    let started = Instant::now();
    let (mut child, _dir) = call_on_a_lingering_server(&tag, &["--timeout", "1"]);
    assert_eq!(wait_exit(&mut child, Duration::from_secs(10)), Some(0));
    let took = started.elapsed();
    assert!(took < Duration::from_secs(4), "{took:?}");
    tag.assert_gone_within(Duration::from_secs(3));
}

// A cold trial: a result that could not be written (a full disk) still
// exited 0; `--version` panicked. Now: said, and exit code 1. A closed pipe
// (`| head`) stays quiet and 0.
#[test]
fn a_result_that_cannot_be_written_is_an_error() {
    let dir = config_dir(json!({"demo": demo_entry()}));
    for args in [
        vec!["call", "demo", "count_words", r#"{"text": "one two"}"#],
        vec!["list", "demo"],
        vec!["--version"],
    ] {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let mut child = spawn_tether(dir.path(), &args, full.into(), Stdio::piped());
        let code = wait_exit(&mut child, WITHIN);
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains("cannot write the output"), "{args:?}: {stderr}");
    }
}

// Two cold trials: Ctrl-C while `list` waited for a hanging server printed
// its rows, each server "failed … shut down by the host". An interrupted
// command prints no results.
#[test]
fn an_interrupted_listing_prints_no_rows() {
    let tag = Tag::new();
    let dir = config_dir(json!({
        "demo": demo_entry(),
        "hang": misbehave_entry(&tag, &["--hang-initialize"]),
    }));
    let mut child = spawn_tether(dir.path(), &["list"], Stdio::piped(), Stdio::null());
    tag.wait_for_processes(1, Duration::from_secs(10));
    thread::sleep(Duration::from_millis(300));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(wait_exit(&mut child, Duration::from_secs(5)), Some(128 + libc::SIGINT));
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    assert_eq!(out, "", "interrupted, yet printed rows");
    tag.assert_gone();
}

// A cold trial: a URL with a wrong path said only "HTTP 404: Not Found".
#[test]
fn a_url_with_nothing_behind_it_says_to_check_the_url() {
    let tag = Tag::new();
    let (mut server, url) = crate::support::start_url_fixture("http-server", &tag, &[]);
    let wrong = url.replace("/mcp", "/nothere");
    let dir = config_dir(json!({"web": {"url": wrong}}));
    let (output, _) = run_tether(dir.path(), &["call", "web", "echo", "{}"], WITHIN);
    assert_eq!(output.status.code(), Some(3));
    let err = stderr_of(&output);
    assert!(err.contains("HTTP 404"), "{err}");
    assert!(
        err.contains(&format!("hint: no MCP server answers at {wrong}; check the URL")),
        "{err}"
    );
    // An ad-hoc URL (as `tether proxy`'s) is in no file: none is named.
    let (output, _) = run_tether(dir.path(), &["call", &wrong, "echo", "{}"], WITHIN);
    let err = stderr_of(&output);
    assert!(err.contains("check the URL (tether tried"), "{err}");
    assert!(!err.contains("the configuration"), "{err}");
    let _ = server.kill();
    let _ = server.wait();
}

// A cold trial: `read` on a server without resources said only "method not
// found: resources/read".
#[test]
fn reading_from_a_server_without_resources_says_it_has_none() {
    let tag = Tag::new();
    let dir = config_dir(json!({"fx": misbehave_entry(&tag, &[])}));
    let (output, _) = run_tether(dir.path(), &["read", "fx", "file:///x"], WITHIN);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr_of(&output);
    assert!(err.contains("hint: \"fx\" offers no resources"), "{err}");
    tag.assert_gone();
}

// One Ctrl-C during a call to a server that ignores its input's end and
// SIGTERM waits out its `shutdownTimeout` and the SIGTERM grace, and nothing
// outlives tether. (A regression trial saw a 30 s one outlive it by 1.3 s:
// the second of two concurrent shutdowns gave up waiting for the first
// after 30 s; it now waits the longest grace and more.)
#[test]
fn one_signal_waits_out_a_long_closing_and_leaves_nothing() {
    let tag = Tag::new();
    let dir = config_dir(json!({"slow": {
        "command": fixture("misbehave"),
        "args": ["--tag", tag.0, "--ignore-eof", "--ignore-sigterm", "--slow", "20000"],
        "shutdownTimeout": 2,
    }}));
    let mut child = spawn_tether(
        dir.path(),
        &["call", "slow", "echo", r#"{"text": "x"}"#],
        Stdio::null(),
        Stdio::null(),
    );
    tag.wait_for_processes(1, Duration::from_secs(10));
    thread::sleep(Duration::from_millis(300));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(wait_exit(&mut child, Duration::from_secs(10)), Some(128 + libc::SIGINT));
    // At once, not after the supervisors' grace.
    tag.assert_gone_within(Duration::from_millis(100));
}

// An answer with bytes that are not UTF-8 arrives, and is said to have been
// mended (a regression trial: silently changed).
#[test]
fn an_answer_mended_from_bad_utf8_is_said_so() {
    let tag = Tag::new();
    let dir = config_dir(json!({"latin": misbehave_entry(&tag, &["--latin1"])}));
    let (output, _) =
        run_tether(dir.path(), &["call", "latin", "echo", r#"{"text":"café"}"#], WITHIN);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(stdout_of(&output), "caf\u{fffd}\n");
    assert!(stderr_of(&output).contains("not valid UTF-8"), "{}", stderr_of(&output));
    tag.assert_gone();
}

// Issue 25 (items 5 and 12): a handshake-era server that declares logging
// is told the level tether's log takes (`logging/setLevel`), once; a
// resource that does not exist (-32002) is a usage error, as other
// not-found errors are.
#[test]
fn a_logging_server_is_told_the_level_and_a_missing_resource_exits_2() {
    let tag = Tag::new();
    let dir = config_dir(json!({
        "fx": misbehave_entry(&tag, &["--era", "legacy", "--logging", "--resources"]),
        "quiet": misbehave_entry(&tag, &["--era", "legacy"]),
    }));
    let (output, _) = run_tether(dir.path(), &["call", "fx", "request_counts"], WITHIN);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let counts: Value = serde_json::from_str(stdout_of(&output).trim()).unwrap();
    assert_eq!(counts["logging/setLevel"], 1, "{counts}");
    let (output, _) = run_tether(dir.path(), &["call", "quiet", "request_counts"], WITHIN);
    let counts: Value = serde_json::from_str(stdout_of(&output).trim()).unwrap();
    assert!(counts.get("logging/setLevel").is_none(), "{counts}");

    let (output, _) = run_tether(dir.path(), &["read", "fx", "test://one"], WITHIN);
    assert_eq!(stdout_of(&output).trim(), "the one", "{}", stderr_of(&output));
    let (output, _) = run_tether(dir.path(), &["read", "fx", "test://missing"], WITHIN);
    assert_eq!(output.status.code(), Some(2), "{}", stderr_of(&output));
    assert!(stderr_of(&output).contains("Resource not found"), "{}", stderr_of(&output));
    tag.assert_gone();
}

// A cold trial (issue 26): a tool hidden by the entry (--exclude-tools)
// was still called by `tether call`; and `key=value` words given to the
// qualified name spelt with `_` (as signatures print it) were not typed.
#[test]
fn a_hidden_tool_is_not_called_and_qualified_names_type_their_arguments() {
    let tag = Tag::new();
    let mut entry = misbehave_entry(&tag, &[]);
    entry["toolExposure"] = json!({"echo": "hidden"});
    let dir = config_dir(json!({"fx-one": entry}));
    let (output, _) = run_tether(dir.path(), &["call", "fx-one", "echo", "text=hi"], WITHIN);
    assert_eq!(output.status.code(), Some(2), "{}", stdout_of(&output));
    assert!(
        stderr_of(&output).contains("tether expose fx-one direct --tool echo"),
        "{}",
        stderr_of(&output)
    );
    assert_eq!(stdout_of(&output), "");
    // `sleep`'s `ms` is an integer: typed as one through either spelling.
    for name in ["mcp__fx-one__sleep", "mcp__fx_one__sleep"] {
        let (output, _) = run_tether(dir.path(), &["call", name, "ms=1"], WITHIN);
        assert_eq!(stdout_of(&output).trim(), "slept 1 ms", "{name}: {}", stderr_of(&output));
    }
    tag.assert_gone();
}

// Issue 25 (item 2): completion/complete, from the CLI: a prompt's
// argument (with the context of an argument chosen), a template's variable
// (more than a page), JSON, and a server without completions.
#[test]
fn complete_asks_the_server_for_an_arguments_values() {
    let tag = Tag::new();
    let dir = config_dir(json!({
        "fx": misbehave_entry(&tag, &["--era", "legacy", "--completions"]),
        "plain": misbehave_entry(&tag, &["--era", "legacy"]),
    }));
    let run = |args: &[&str]| run_tether(dir.path(), args, WITHIN).0;
    let output = run(&["complete", "fx", "--prompt", "greet", "name", "A"]);
    assert_eq!(stdout_of(&output), "Ada\nAlan\n", "{}", stderr_of(&output));
    let output = run(&["complete", "fx", "--prompt", "greet", "name", "A", "--context", "lang=fr"]);
    assert_eq!(stdout_of(&output), "Amelie\nAntoine\n", "{}", stderr_of(&output));
    let output = run(&["complete", "fx", "--resource", "test://item/{id}", "id", "--json"]);
    let completion: Value = serde_json::from_str(&stdout_of(&output)).unwrap();
    assert_eq!(completion["values"].as_array().unwrap().len(), 100, "{completion}");
    assert_eq!(
        (completion["total"].clone(), completion["hasMore"].clone()),
        (json!(150), json!(true))
    );
    let output = run(&["complete", "fx", "--resource", "test://item/{id}", "id", "14"]);
    assert_eq!(stdout_of(&output), "14\n140\n141\n142\n143\n144\n145\n146\n147\n148\n149\n");
    // Without the capability: "method not found", a usage error.
    let output = run(&["complete", "plain", "--prompt", "greet", "name", "A"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr_of(&output));
    let output = run(&["complete", "fx", "name"]);
    assert_eq!(output.status.code(), Some(2));
    tag.assert_gone();
}

// Issue 25 (item 1): resource subscriptions in both eras: `tether watch`
// subscribes (resources/subscribe; a 2026-07-28 server through the listen
// stream's resourceSubscriptions) and prints each update, with --read the
// resource as it is then.
#[test]
fn watch_prints_a_resources_updates_in_both_eras() {
    let tag = Tag::new();
    let flags = |era: &str| {
        vec!["--era", era, "--resources", "--touch-every", "100"]
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let entry = |era: &str| {
        let flags = flags(era);
        misbehave_entry(&tag, &flags.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let dir = config_dir(json!({"old": entry("legacy"), "new": entry("modern"),
                                "plain": misbehave_entry(&tag, &["--era", "legacy"])}));
    let (output, _) =
        run_tether(dir.path(), &["watch", "old", "test://one", "--count", "2", "--read"], WITHIN);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let out = stdout_of(&output);
    assert_eq!(out.matches("updated  test://one").count(), 2, "{out}");
    assert_eq!(out.matches("the one").count(), 2, "{out}");
    let (output, _) =
        run_tether(dir.path(), &["watch", "new", "test://one", "--count", "2", "--json"], WITHIN);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let lines: Vec<Value> =
        stdout_of(&output).lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    assert!(lines.iter().all(|line| line["uri"] == "test://one"), "{lines:?}");
    // A server without subscriptions refuses: said, and a usage error.
    let (output, _) = run_tether(dir.path(), &["watch", "plain", "test://one"], WITHIN);
    assert_eq!(output.status.code(), Some(2), "{}", stderr_of(&output));
    // Issue 25 (item 12): a 2026-07-28 server whose acknowledgment of the
    // listen stream leaves the resource out did not take it: said, exit 2.
    let (output, _) = run_tether(dir.path(), &["watch", "new", "test://missing"], WITHIN);
    assert_eq!(output.status.code(), Some(2), "{}", stderr_of(&output));
    assert!(
        stderr_of(&output).contains("the server did not take the subscription to test://missing"),
        "{}",
        stderr_of(&output)
    );
    tag.assert_gone();
}

// Issue 25 (item 10): a resource's annotations, icons and `_meta` (and a
// read's `_meta`) reach `--json` as the server sent them.
#[test]
fn resources_keep_their_annotations_icons_and_meta() {
    let tag = Tag::new();
    let dir = config_dir(json!({"fx": misbehave_entry(&tag, &["--resources"])}));
    let (output, _) = run_tether(dir.path(), &["resources", "fx", "--json"], WITHIN);
    let listed: Value = serde_json::from_str(&stdout_of(&output)).unwrap();
    let one = &listed["resources"][0];
    assert_eq!(one["title"], "The One", "{one}");
    assert_eq!(one["annotations"]["audience"], json!(["user"]));
    assert_eq!(one["icons"][0]["src"], "https://example.com/one.png");
    assert_eq!(one["_meta"]["example.com/tag"], "first");
    let (output, _) = run_tether(dir.path(), &["read", "fx", "test://one", "--json"], WITHIN);
    let read: Value = serde_json::from_str(&stdout_of(&output)).unwrap();
    assert_eq!(read["contents"][0]["_meta"]["example.com/tag"], "first", "{read}");
    tag.assert_gone();
}

// A second cold trial: a call with no arguments at all skipped the check of
// the schema's required ones.
#[test]
fn a_call_without_the_required_arguments_is_refused_before_it_is_made() {
    let tag = Tag::new();
    let dir = config_dir(json!({"fx": misbehave_entry(&tag, &[])}));
    let (output, _) = run_tether(dir.path(), &["call", "fx", "sleep"], WITHIN);
    assert_eq!(output.status.code(), Some(2), "{}", stderr_of(&output));
    assert!(stderr_of(&output).contains("needs \"ms\""), "{}", stderr_of(&output));
    // Given as JSON, it is the user's word: sent as written.
    let (output, _) = run_tether(dir.path(), &["call", "fx", "sleep", "{}"], WITHIN);
    assert_eq!(output.status.code(), Some(1), "{}", stderr_of(&output));
    tag.assert_gone();
}

// Issue 25 (item 9): `tether call` shows a result whose structuredContent
// breaks the tool's outputSchema, says so on stderr, and exits 0.
#[test]
fn call_says_when_a_result_breaks_the_output_schema() {
    let tag = Tag::new();
    let dir = config_dir(json!({"fx": misbehave_entry(&tag, &["--structured"])}));
    let run = |args: &[&str]| run_tether(dir.path(), args, WITHIN).0;
    let output =
        run(&["call", "fx", "structured", r#"value:={"point": {"x": 2, "label": "Nope"}}"#]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let shown: Value = serde_json::from_str(&stdout_of(&output)).unwrap();
    assert_eq!(shown, json!({"point": {"x": 2, "label": "Nope"}}));
    assert_eq!(
        stderr_of(&output).trim(),
        r#"warning: server "fx": structuredContent does not match the outputSchema of structured: $.point.label: does not match the pattern "^[a-z]+$""#
    );
    let output =
        run(&["call", "fx", "structured", r#"value:={"point": {"x": 2, "label": "yes"}}"#]);
    assert_eq!(stderr_of(&output), "");
    tag.assert_gone();
}

// Issue 25 (item 6): a call the server refuses until a page is opened
// (-32042). Without a terminal: said, with the page, exit 2. At a terminal:
// the page is shown and offered, tether waits for the server to say it is
// done, then calls again.
#[test]
fn call_offers_the_page_a_server_wants_opened_and_calls_again() {
    let tag = Tag::new();
    let dir = config_dir(json!({"fx": misbehave_entry(&tag, &[])}));
    let (output, _) = run_tether(dir.path(), &["call", "fx", "page_gate"], WITHIN);
    assert_eq!(output.status.code(), Some(2), "{}", stderr_of(&output));
    let said = stderr_of(&output);
    assert!(said.contains("the server asks you to open a page first"), "{said}");
    assert!(said.contains("open: https://pages.example/open?id=page-1"), "{said}");
    assert!(said.contains("then run the command again"), "{said}");

    let mut command = Command::new(tether_bin());
    command.arg("--config-dir").arg(dir.path()).args([
        "call",
        "fx",
        "page_gate",
        "complete_ms=500",
    ]);
    let mut terminal = OnTerminal::start(command);
    terminal.expect("Open it in your browser? [y/N] ", WITHIN);
    assert!(terminal.screen().contains("https://pages.example/open?id=page-1"));
    terminal.type_in("n\n");
    terminal.expect("The server says you are done; trying again.", WITHIN);
    let (code, stdout) = terminal.finish(WITHIN);
    assert_eq!((code, stdout.trim()), (Some(0), "the page was opened; 1 asked"));
    tag.assert_gone();
}

// Issue 25 (item 13): a server's form, answered by a script (`--answers`,
// `--accept-defaults`, without a terminal) and at a terminal: titled
// choices by number or title, a multiple choice sent as an array, and
// answers the schema refuses asked again.
#[test]
fn forms_are_answered_by_scripts_and_at_the_terminal_and_checked() {
    let tag = Tag::new();
    let dir = config_dir(json!({"fx": misbehave_entry(&tag, &[])}));
    let reply = |output: &Output| -> Value {
        let text = stdout_of(output);
        serde_json::from_str(text.trim())
            .unwrap_or_else(|_| panic!("{text}: {}", stderr_of(output)))
    };
    let answers = r#"{"name": "Ada", "color": "Green", "age": "36"}"#;
    let (output, _) = run_tether(
        dir.path(),
        &["call", "fx", "ask_form", "--answers", answers, "--accept-defaults"],
        WITHIN,
    );
    assert_eq!(
        reply(&output)["result"],
        json!({"action": "accept", "content":
            {"name": "Ada", "age": 36, "color": "#0f0", "sizes": ["m"], "news": false}})
    );
    // A required field without an answer: declined, and said.
    let (output, _) =
        run_tether(dir.path(), &["--accept-defaults", "call", "fx", "ask_form"], WITHIN);
    assert_eq!(reply(&output)["result"], json!({"action": "decline"}));
    assert!(stderr_of(&output).contains(r#"no answer for the required field "color""#));
    let (output, _) =
        run_tether(dir.path(), &["call", "fx", "ask_form", "--answers", "[1]"], WITHIN);
    assert_eq!(output.status.code(), Some(2), "{}", stderr_of(&output));

    let mut command = Command::new(tether_bin());
    command.arg("--config-dir").arg(dir.path()).args(["call", "fx", "ask_form"]);
    let mut terminal = OnTerminal::start(command);
    // The fixture's fields come in the order of their names.
    terminal.expect("age (a whole number): ", WITHIN);
    terminal.type_in("200\n");
    terminal.expect("Not accepted: expected at most 150.", WITHIN);
    terminal.type_in("\n");
    terminal.expect("Color (one of: 1 Red, 2 Green) *: ", WITHIN);
    terminal.type_in("2\n");
    terminal.expect("email (email): ", WITHIN);
    terminal.type_in("nope\n");
    terminal.expect("Not accepted: not a valid email.", WITHIN);
    terminal.type_in("ada@example.com\n");
    terminal.expect("Name *: ", WITHIN);
    terminal.type_in("A\n");
    terminal.expect("Not accepted: expected at least 2 characters, found 1.", WITHIN);
    terminal.type_in("Ada\n");
    terminal.expect("news (yes or no) [false]: ", WITHIN);
    terminal.type_in("\n");
    terminal.expect(
        "sizes (any of: 1 Small, 2 Medium, 3 Large; separated by commas) [Medium]: ",
        WITHIN,
    );
    terminal.type_in("1, large\n");
    terminal.expect("Send this?", WITHIN);
    terminal.type_in("\n");
    let (code, stdout) = terminal.finish(WITHIN);
    assert_eq!(code, Some(0));
    let reply: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(
        reply["result"],
        json!({"action": "accept", "content": {"name": "Ada", "email": "ada@example.com",
               "color": "#0f0", "sizes": ["s", "l"], "news": false}})
    );
    tag.assert_gone();
}
