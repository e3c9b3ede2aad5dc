//! What a host's agent loop relies on: list changes, log messages, exposure
//! and tool_search, results shaped for the model, per-turn refresh,
//! reconnecting, status, and roots.

use std::fs;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tether::{
    shape_result, CallOptions, ConfigLoader, Error, Exposure, Host, Hub, HubOptions, LogFile,
    ModelBlock, ResultLimits, Root, ServerConfig, ServerState, TOOL_SEARCH,
};

use crate::support::{fixture, misbehave_entry, run_tether, stdout_of, Tag, TempDir};

fn misbehave_server(name: &str, tag: &Tag, flags: &[&str]) -> ServerConfig {
    let mut args = vec!["--tag", tag.0.as_str()];
    args.extend_from_slice(flags);
    ServerConfig::stdio(name, &fixture("misbehave").display().to_string(), &args)
}

fn text_of(hub: &Hub, tool: &str, arguments: Value) -> String {
    hub.call(tool, arguments, &CallOptions::default()).unwrap().to_text()
}

/// Waits (bounded) until `check` holds.
fn eventually(what: &str, within: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < deadline, "{what} did not happen within {within:?}");
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_burst_of_list_changes_relists_once_and_tools_come_and_go() {
    let tag = Tag::new();
    let hub = tether::Hub::start(
        tether::Config::new().with_server(misbehave_server("fx", &tag, &[])),
        HubOptions::default(),
    );
    text_of(&hub, "mcp__fx__grow", json!({"name": "fresh", "burst": 25}));
    eventually("the new tool appearing", Duration::from_secs(3), || {
        hub.tools().iter().any(|tool| tool.qualified_name == "mcp__fx__fresh")
    });
    assert_eq!(text_of(&hub, "mcp__fx__fresh", json!({})), "called fresh");
    let counts: Value =
        serde_json::from_str(&text_of(&hub, "mcp__fx__request_counts", json!({}))).unwrap();
    // The first listing, then one for the whole burst of 25.
    assert_eq!(counts["tools/list"], 2, "{counts}");

    text_of(&hub, "mcp__fx__shrink", json!({"name": "fresh"}));
    eventually("the tool leaving", Duration::from_secs(3), || {
        !hub.tools().iter().any(|tool| tool.qualified_name == "mcp__fx__fresh")
    });
    let err = hub.call("mcp__fx__fresh", json!({}), &CallOptions::default()).unwrap_err();
    assert!(matches!(err, Error::UnknownTool(_)), "{err:?}");
    hub.shutdown();
    tag.assert_gone();
}

#[test]
fn server_log_messages_go_to_the_log_file_which_rotates() {
    let tag = Tag::new();
    let dir = TempDir::new();
    let log = LogFile::new(dir.path().join("mcp.log")).with_rotation(200);
    let options = HubOptions::default().with_log_sink(Arc::new(log));
    let hub = Hub::start(
        tether::Config::new().with_server(misbehave_server("fx", &tag, &["--notify", "3"])),
        options,
    );
    for i in 0..6 {
        text_of(&hub, "mcp__fx__echo", json!({"text": i.to_string()}));
    }
    let both = || {
        let older = fs::read_to_string(dir.path().join("mcp.log.1")).unwrap_or_default();
        older + &fs::read_to_string(dir.path().join("mcp.log")).unwrap_or_default()
    };
    // One message per call (and the list change and the unknown notification beside it).
    eventually("log lines", Duration::from_secs(3), || {
        both().matches("[fx] log info misbehave: note 1").count() == 6
    });
    let text = both();
    let line = text.lines().find(|line| line.contains("note 1")).unwrap();
    // <RFC 3339 time> [<server>] <level> <logger>: <message>
    assert!(line.len() > 20 && &line[4..5] == "-" && &line[19..21] == "Z ", "{line}");
    assert!(dir.path().join("mcp.log.1").exists(), "the log did not rotate past 200 bytes");
    hub.shutdown();
    tag.assert_gone();
}

#[test]
fn the_cli_writes_mcp_log_and_tether_logs_shows_it() {
    let tag = Tag::new();
    let dir = crate::support::config_dir(json!({"fx": misbehave_entry(&tag, &["--notify", "1"])}));
    let (output, _) =
        run_tether(dir.path(), &["call", "fx", "echo", r#"{"text":"x"}"#], Duration::from_secs(20));
    assert_eq!(output.status.code(), Some(0));
    let (output, _) =
        run_tether(dir.path(), &["logs", "--server", "fx", "-n", "1"], Duration::from_secs(20));
    let out = stdout_of(&output);
    assert!(out.contains("[fx] log info misbehave: note 1") && out.lines().count() == 1, "{out}");
    tag.assert_gone();
}

// A cold trial: 100 000 log messages in one call wrote 28 348 lines to
// mcp.log in 0.4 s, enough to rotate the useful lines away. The file takes
// 200 a second from a server, and says when it leaves the rest out.
#[test]
fn a_log_flood_is_kept_out_of_mcp_log() {
    let tag = Tag::new();
    let dir =
        crate::support::config_dir(json!({"fx": misbehave_entry(&tag, &["--notify", "5000"])}));
    let (output, _) =
        run_tether(dir.path(), &["call", "fx", "echo", r#"{"text":"x"}"#], Duration::from_secs(30));
    assert_eq!(output.status.code(), Some(0));
    let log = std::fs::read_to_string(dir.path().join("mcp.log")).unwrap();
    let notes = log.lines().filter(|line| line.contains("misbehave: note")).count();
    assert!((200..5000).contains(&notes), "{notes} lines");
    assert!(log.contains("the rest of this second's are left out"), "{log}");
    tag.assert_gone();
}

// Issue 13 (item 13): a crashed server's last words are in the log, with a
// source column, and an unknown server is an error.
#[test]
fn tether_logs_has_the_stderr_of_a_crashed_server() {
    let tag = Tag::new();
    let dir = crate::support::config_dir(json!({
        "fx": misbehave_entry(&tag, &["--crash-on-call", "1"]),
        "quiet": misbehave_entry(&tag, &[]),
    }));
    let (output, _) =
        run_tether(dir.path(), &["call", "fx", "echo", r#"{"text":"x"}"#], Duration::from_secs(20));
    assert_eq!(output.status.code(), Some(3));
    let (output, _) = run_tether(dir.path(), &["logs", "--server", "fx"], Duration::from_secs(20));
    let out = stdout_of(&output);
    assert!(out.lines().any(|line| line.ends_with(" [fx] stderr crashing now")), "{out}");
    // A server with nothing in the log: said, not silence.
    let (output, _) = run_tether(dir.path(), &["logs", "quiet"], Duration::from_secs(20));
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(stdout_of(&output), "");
    assert!(crate::support::stderr_of(&output).contains("No lines from \"quiet\""));
    let (output, _) = run_tether(dir.path(), &["logs", "--server", "fz"], Duration::from_secs(20));
    assert_eq!(output.status.code(), Some(2));
    assert!(crate::support::stderr_of(&output).contains("did you mean \"fx\""));
    tag.assert_gone();
}

/// A server that floods stderr and then crashes: past the 200 lines a
/// second the log keeps, its last words are still in it.
#[test]
fn tether_logs_has_the_last_words_of_a_server_that_flooded_then_crashed() {
    let tag = Tag::new();
    let dir = crate::support::config_dir(json!({
        "fl": misbehave_entry(&tag, &["--stderr-flood", "1", "--crash-on-call", "1"]),
    }));
    let (output, _) =
        run_tether(dir.path(), &["call", "fl", "echo", r#"{"text":"x"}"#], Duration::from_secs(20));
    assert_eq!(output.status.code(), Some(3));
    let (output, _) = run_tether(dir.path(), &["logs", "--server", "fl"], Duration::from_secs(20));
    let out = stdout_of(&output);
    assert!(out.lines().any(|line| line.ends_with(" [fl] stderr crashing now")), "{out}");
    tag.assert_gone();
}

/// `tether logs -f` across a rotation: what was written to the old file
/// just before it moved to `mcp.log.1` is printed, then the new file's
/// lines, in order.
#[test]
fn tether_logs_follows_across_a_rotation_without_losing_lines() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};
    let dir = TempDir::new();
    let log = dir.write("mcp.log", "2026-12-01T00:00:00Z [fx] stderr before\n");
    let mut child = Command::new(crate::support::tether_bin())
        .arg("--config-dir")
        .arg(dir.path())
        .args(["logs", "-f", "-n", "0"])
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (lines, seen) = crossbeam_channel::unbounded();
    let stdout = child.stdout.take().unwrap();
    let reader = thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    // Following (its first look is at once; the next 200 ms later).
    thread::sleep(Duration::from_millis(500));
    let append = |path: &std::path::Path, text: &str| {
        let mut file = fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
        file.write_all(text.as_bytes()).unwrap();
    };
    // A line, then at once the move, as a writer past the size limit does.
    append(&log, "2026-12-01T00:00:01Z [fx] stderr old\n");
    fs::rename(&log, dir.path().join("mcp.log.1")).unwrap();
    append(&log, "2026-12-01T00:00:02Z [fx] stderr new\n");
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.len() < 2 {
        match seen.recv_deadline(deadline) {
            Ok(line) => got.push(line),
            Err(_) => break,
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    reader.join().unwrap();
    let tails: Vec<&str> = got.iter().map(|line| &line[line.len() - 3..]).collect();
    assert_eq!(tails, ["old", "new"], "{got:?}");
}

#[test]
fn exposure_decides_what_the_model_sees_and_tool_search_finds_the_rest() {
    let tag = Tag::new();
    let mut server = misbehave_server("fx", &tag, &[]);
    server.exposure = Exposure::Deferred;
    server.tool_exposure = vec![("echo".into(), Exposure::Direct), ("f*".into(), Exposure::Hidden)];
    server.description = Some("A test server that misbehaves on purpose.".into());
    let hub = Hub::start(tether::Config::new().with_server(server), HubOptions::default());
    let names = |hub: &Hub| hub.model_tools().into_iter().map(|tool| tool.name).collect::<Vec<_>>();
    let declared = names(&hub);
    assert!(declared.contains(&"mcp__fx__echo".to_owned()), "{declared:?}");
    assert!(declared.contains(&TOOL_SEARCH.to_owned()), "{declared:?}");
    assert!(
        !declared.contains(&"mcp__fx__image".to_owned()),
        "deferred tools wait for tool_search"
    );
    let echo = hub.model_tools().into_iter().find(|tool| tool.name == "mcp__fx__echo").unwrap();
    assert!(
        echo.description.contains("\"fx\""),
        "the description names the server: {}",
        echo.description
    );

    // Hidden tools are never reachable.
    let err = hub.call("mcp__fx__fail", json!({}), &CallOptions::default()).unwrap_err();
    assert!(matches!(err, Error::UnknownTool(_)), "{err:?}");

    let found =
        hub.call(TOOL_SEARCH, json!({"query": "image png"}), &CallOptions::default()).unwrap();
    let found_names: Vec<String> = found.structured_content().unwrap()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(found_names.first().map(String::as_str), Some("mcp__fx__image"), "{found_names:?}");
    assert!(
        !found_names.iter().any(|name| name == "mcp__fx__fail"),
        "hidden tools are never found"
    );
    // Found tools are declared from now on.
    assert!(names(&hub).contains(&"mcp__fx__image".to_owned()));
    hub.shutdown();
    tag.assert_gone();
}

#[test]
fn results_are_shaped_for_the_model() {
    let tag = Tag::new();
    let hub = Hub::start(
        tether::Config::new().with_server(misbehave_server("fx", &tag, &[])),
        HubOptions::default(),
    );
    let spill = TempDir::new();
    let limits = ResultLimits::default().with_spill_dir(spill.path().to_owned());
    let huge =
        hub.call("mcp__fx__huge", json!({"bytes": 30_000}), &CallOptions::default()).unwrap();
    let tool = hub.tools().into_iter().find(|entry| entry.tool.name == "huge").unwrap().tool;
    let shaped = shape_result("fx", &tool, &huge, &limits);
    let ModelBlock::Text { text } = &shaped.blocks[0] else { panic!("{shaped:?}") };
    assert!(text.len() < 21_000 && text.contains("…10000 chars truncated…"), "{}", text.len());
    let saved = shaped.saved_to.clone().unwrap();
    assert_eq!(fs::read_to_string(saved).unwrap().len(), 30_000);

    let image = hub.call("mcp__fx__image", json!({}), &CallOptions::default()).unwrap();
    let tool = hub.tools().into_iter().find(|entry| entry.tool.name == "image").unwrap().tool;
    let shaped = shape_result("fx", &tool, &image, &limits);
    assert!(shaped.blocks.iter().any(
        |block| matches!(block, ModelBlock::Image { mime_type, .. } if mime_type == "image/png")
    ));

    let failed = hub.call("mcp__fx__fail", json!({}), &CallOptions::default()).unwrap();
    assert!(shape_result("fx", &tool, &failed, &limits).is_error);
    hub.shutdown();
    tag.assert_gone();
}

fn write_config(dir: &TempDir, servers: Value) {
    dir.write("mcp.json", &json!({"mcpServers": servers}).to_string());
}

#[test]
fn refresh_follows_the_configuration_file() {
    let tag = Tag::new();
    let dir = TempDir::new();
    write_config(&dir, json!({"a": misbehave_entry(&tag, &[]), "b": misbehave_entry(&tag, &[])}));
    let loader = ConfigLoader::new().config_dir(dir.path());
    let hub = Hub::start(loader.load(), HubOptions::default().with_reload(loader.clone()));
    assert!(hub.refresh().is_empty(), "nothing changed");

    write_config(
        &dir,
        json!({"a": misbehave_entry(&tag, &["--slow", "1"]), "c": misbehave_entry(&tag, &[])}),
    );
    let report = hub.refresh();
    assert_eq!(report.restarted, ["a"]);
    assert_eq!(report.started, ["c"]);
    assert_eq!(report.stopped, ["b"]);
    let states: Vec<(String, ServerState)> =
        hub.status().into_iter().map(|s| (s.name, s.state)).collect();
    assert_eq!(states, [("a".into(), ServerState::Ready), ("c".into(), ServerState::Ready)]);
    assert_eq!(text_of(&hub, "mcp__c__echo", json!({"text": "new"})), "new");
    assert!(hub.call("mcp__b__echo", json!({}), &CallOptions::default()).is_err());
    // Two servers now run: b's process is gone.
    eventually("b ending", Duration::from_secs(3), || tag.live_processes().len() == 2);
    hub.shutdown();
    tag.assert_gone();
}

#[test]
fn a_stopped_server_restarts_at_refresh_but_one_that_never_started_is_left_alone() {
    let tag = Tag::new();
    let config = tether::Config::new()
        .with_server(misbehave_server("crashy", &tag, &["--crash-on-call", "1"]))
        .with_server(ServerConfig::stdio("broken", "/nonexistent/server", &[]));
    let hub = Hub::start(config, HubOptions::default());
    let tools_before = hub.model_tools();
    assert!(hub.call("mcp__crashy__echo", json!({"text": "x"}), &CallOptions::default()).is_err());
    // The host's list for this turn is a snapshot: it does not change under it.
    assert_eq!(tools_before, tools_before.clone());
    let report = hub.refresh();
    assert_eq!(report.restarted, ["crashy"]);
    assert!(report.started.is_empty() && report.stopped.is_empty());
    let status = hub.status();
    assert_eq!(status[0].state, ServerState::Ready);
    assert_eq!(status[1].state, ServerState::Failed);
    hub.shutdown();
    tag.assert_gone();
}

#[test]
fn the_next_call_after_a_drop_reconnects_once() {
    let tag = Tag::new();
    let hub = Hub::start(
        tether::Config::new().with_server(misbehave_server("fx", &tag, &["--crash-on-call", "2"])),
        HubOptions::default(),
    );
    assert_eq!(text_of(&hub, "mcp__fx__echo", json!({"text": "one"})), "one");
    let err =
        hub.call("mcp__fx__echo", json!({"text": "two"}), &CallOptions::default()).unwrap_err();
    assert!(matches!(err.root(), Error::Disconnected(_)), "{err:?}");
    // A new process answers: its first call is not its crashing one.
    assert_eq!(text_of(&hub, "mcp__fx__echo", json!({"text": "three"})), "three");
    hub.shutdown();
    tag.assert_gone();
}

#[test]
fn list_json_has_every_status_field() {
    let tag = Tag::new();
    let dir = crate::support::config_dir(json!({"fx": misbehave_entry(&tag, &[])}));
    let (output, _) = run_tether(dir.path(), &["list", "--json"], Duration::from_secs(20));
    let statuses: Vec<Value> = serde_json::from_str(&stdout_of(&output)).unwrap();
    let status = statuses[0].as_object().unwrap();
    for field in [
        "name",
        "scope",
        "transport",
        "state",
        "target",
        "protocolVersion",
        "serverName",
        "serverVersion",
        "instructions",
        "tools",
        "resources",
        "prompts",
        "roots",
        "error",
        "hint",
        "warnings",
        "stderrTail",
        "since",
    ] {
        assert!(status.contains_key(field), "missing {field}: {status:?}");
    }
    assert_eq!(
        status["instructions"],
        "A deliberately misbehaving server for testing MCP clients."
    );
    tag.assert_gone();
}

struct ChangingRoots {
    roots: Mutex<Vec<Root>>,
}

impl Host for ChangingRoots {
    fn roots(&self) -> Vec<Root> {
        self.roots.lock().unwrap().clone()
    }
}

#[test]
fn servers_hear_when_the_roots_change() {
    let tag = Tag::new();
    let host = Arc::new(ChangingRoots { roots: Mutex::new(Vec::new()) });
    let options = HubOptions::default().with_host(host.clone());
    let hub =
        Hub::start(tether::Config::new().with_server(misbehave_server("fx", &tag, &[])), options);
    host.roots.lock().unwrap().push(Root::new("file:///tmp"));
    hub.notify_roots_changed();
    eventually("the notification arriving", Duration::from_secs(3), || {
        text_of(&hub, "mcp__fx__client_notifications", json!({}))
            .contains("notifications/roots/list_changed")
    });
    hub.shutdown();
    tag.assert_gone();
}

// Issue 12 (item 1): a server that floods tools/list_changed while it no
// longer answers tools/list has one re-list pending at most; tether's memory
// stays flat.
#[test]
fn a_list_changed_flood_keeps_memory_flat() {
    let tag = Tag::new();
    let dir = crate::support::config_dir(
        json!({"fx": misbehave_entry(&tag, &["--flood-list-changed", "--slow", "6000"])}),
    );
    let mut child = std::process::Command::new(crate::support::tether_bin())
        .arg("--config-dir")
        .arg(dir.path())
        .args(["call", "fx", "echo", r#"{"text": "after the flood"}"#])
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut samples = Vec::new();
    for _ in 0..5 {
        std::thread::sleep(Duration::from_secs(1));
        samples.extend(crate::support::rss_kib(child.id()));
    }
    let status = crate::support::wait_within(&mut child, Duration::from_secs(20));
    assert_eq!(status.code(), Some(0));
    eprintln!("tether's RSS during the flood, KiB, one a second: {samples:?}");
    let peak = samples.iter().copied().max().unwrap_or(0);
    assert!(peak < 64 * 1024, "tether grew to {peak} KiB: {samples:?}");
    let growth = samples.last().unwrap_or(&0).saturating_sub(samples[0]);
    assert!(growth < 8 * 1024, "tether kept growing: {samples:?} KiB");
    tag.assert_gone();
}
