//! Codemode end to end: scripts through `tether run`, the agent_loop example
//! and the hub, against the misbehaving fixture, server-everything and a
//! word-count server on the Python SDK. Without the `codemode` feature, the
//! same entries are deferred and `tether run` says why it cannot run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tether::{
    CallOptions, CancelHandle, Config, ConfigLoader, Exposure, Hub, HubOptions, PlannedCall,
    ScriptErrorKind, ScriptOptions, ServerConfig, ServerState, Verdict,
};

use crate::interop_setup;
use crate::support::{
    config_dir, fixture, misbehave_entry, run_command, run_tether, run_tether_with_stdin,
    stderr_of, stdout_of, target_dir, Tag, TempDir,
};

/// The example the product tether follows gives for codemode, verbatim.
const WORDCOUNT_SCRIPT: &str =
    r#"return await tools.mcp__wordcount__word_count({ text: "the quick brown fox" });"#;

fn misbehave(name: &str, tag: &Tag, flags: &[&str]) -> ServerConfig {
    let mut args = vec!["--tag", tag.0.as_str()];
    args.extend_from_slice(flags);
    ServerConfig::stdio(name, &fixture("misbehave").display().to_string(), &args)
}

fn codemode_server(name: &str, tag: &Tag, flags: &[&str]) -> ServerConfig {
    let mut server = misbehave(name, tag, flags);
    server.exposure = Exposure::Codemode;
    server
}

fn code(code: &str) -> Value {
    json!({ "code": code })
}

fn run(dir: &Path, args: &[&str]) -> (u8, String, String) {
    let (output, _) = run_tether(dir, args, Duration::from_secs(60));
    (output.status.code().unwrap_or(-1) as u8, stdout_of(&output), stderr_of(&output))
}

#[test]
fn tether_run_prints_the_value_and_each_call_and_starts_only_named_servers() {
    if !tether::CODEMODE_AVAILABLE {
        return without_the_engine_tether_run_says_so();
    }
    let tag = Tag::new();
    let dir = config_dir(json!({
        "m": misbehave_entry(&tag, &[]),
        "other": misbehave_entry(&tag, &["--exit-during-initialize"]),
    }));
    let script = "const a = await tools.mcp__m__echo({ text: 'one' });\n\
                  const rest = await Promise.all(['two', 'three'].map(text => tools.mcp__m__echo({ text })));\n\
                  console.log('joined', 3);\n\
                  return [a, ...rest].map(r => r.content[0].text).join(' ');";
    let (code, stdout, stderr) = run(dir.path(), &["run", "-e", script]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "one two three\n");
    assert_eq!(stderr.matches("call mcp__m__echo ok in ").count(), 3, "{stderr}");
    assert!(stderr.contains("joined 3"), "{stderr}");
    // "other" is not named, so it never started (it would have failed).
    assert!(!stderr.contains("other"), "{stderr}");
    tag.assert_gone_within(Duration::from_secs(3));
}

#[test]
fn tether_run_exit_codes() {
    if !tether::CODEMODE_AVAILABLE {
        return;
    }
    let tag = Tag::new();
    let dir = config_dir(json!({
        "m": misbehave_entry(&tag, &[]),
        "crashy": misbehave_entry(&tag, &["--crash-on-call", "1"]),
    }));
    let cases: &[(&str, u8, &str)] = &[
        ("return 'fine'", 0, ""),
        ("throw new Error('my own')", 1, "error at line 1, column 11: my own"),
        (
            "return await tools.mcp__m__fail({})",
            1,
            "returned a tool's result with \"isError\": true",
        ),
        ("let x = ;", 2, "syntax error at line 1"),
        ("await tools.mcp__m__ecoh({ text: 'a' })", 2, "did you mean mcp__m__echo?"),
        ("await tools.mcp__crashy__echo({ text: 'a' })", 3, "tool failed at line 1"),
    ];
    for (script, expected, says) in cases {
        let (code, _, stderr) = run(dir.path(), &["run", "-e", script]);
        assert_eq!(code, *expected, "{script}: {stderr}");
        assert!(stderr.contains(says), "{script}: {stderr}");
    }
    // The crashed server's last words, as `call` gives them.
    let (_, _, stderr) =
        run(dir.path(), &["run", "-e", "await tools.mcp__crashy__echo({ text: 'a' })"]);
    assert!(stderr.contains("stderr: crashing now"), "{stderr}");
    // A server misspelled is said before the script runs.
    let (code, _, stderr) =
        run(dir.path(), &["run", "-e", "await tools.mcp__mm__echo({ text: 'a' })"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("warning: no server \"mm\" is configured (did you mean \"m\"?)"),
        "{stderr}"
    );
    let began = Instant::now();
    let (code, _, stderr) = run(
        dir.path(),
        &["run", "--timeout", "1", "-e", "await tools.mcp__m__sleep({ ms: 10000 })"],
    );
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("timeout"), "{stderr}");
    assert!(began.elapsed() < Duration::from_secs(4), "{:?}", began.elapsed());
    tag.assert_gone_within(Duration::from_secs(3));
}

#[test]
fn tether_run_reads_a_file_or_stdin_and_json_has_the_whole_run() {
    if !tether::CODEMODE_AVAILABLE {
        return;
    }
    let tag = Tag::new();
    let dir = config_dir(json!({ "m": misbehave_entry(&tag, &[]) }));
    let file = dir.write(
        "script.js",
        "return (await tools.mcp__m__echo({ text: 'from a file' })).content[0].text",
    );
    let (code, stdout, stderr) = run(dir.path(), &["run", file.to_str().unwrap()]);
    assert_eq!((code, stdout.as_str()), (0, "from a file\n"), "{stderr}");

    let (output, _) = run_tether_with_stdin(
        dir.path(),
        &["run", "-", "--json"],
        Some("console.log('x'); return { n: (await tools.mcp__m__echo({ text: 'in' })).content.length }"),
        Duration::from_secs(60),
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let whole: Value = serde_json::from_str(&stdout_of(&output)).unwrap();
    assert_eq!(whole["value"], json!({"n": 1}));
    assert_eq!(whole["console"], "x\n");
    assert_eq!(whole["error"], Value::Null);
    assert_eq!(whole["calls"][0]["name"], "mcp__m__echo");
    assert_eq!(whole["calls"][0]["server"], "m");
    assert_eq!(whole["calls"][0]["arguments"], json!({"text": "in"}));
    assert_eq!(whole["calls"][0]["outcome"], "ok");
    assert!(whole["calls"][0]["elapsedMs"].is_number());

    let (code, _, stderr) = run(dir.path(), &["run", "/nonexistent/script.js"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("cannot read /nonexistent/script.js"), "{stderr}");
    tag.assert_gone_within(Duration::from_secs(3));
}

#[test]
fn a_server_with_a_dash_is_written_with_an_underscore() {
    if !tether::CODEMODE_AVAILABLE {
        return;
    }
    let tag = Tag::new();
    let dir = config_dir(json!({ "echo-srv": misbehave_entry(&tag, &[]) }));
    let (code, stdout, stderr) = run(dir.path(), &["tools", "--signatures"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("\nmcp__echo_srv__echo(args: {"), "{stdout}");
    // What the signature says is what a script can write.
    let script = "return (await tools.mcp__echo_srv__echo({ text: 'ok' })).content[0].text";
    let (code, stdout, stderr) = run(dir.path(), &["run", "-e", script]);
    assert_eq!((code, stdout.as_str()), (0, "ok\n"), "{stderr}");
    // The minus form gets a hint.
    let (code, _, stderr) = run(dir.path(), &["run", "-e", "await tools.mcp__echo-srv__echo({})"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("is written `_` in a script"), "{stderr}");
    tag.assert_gone_within(Duration::from_secs(3));
}

#[test]
fn tools_signatures_prints_what_scripts_see() {
    let tag = Tag::new();
    let mut entry = misbehave_entry(&tag, &[]);
    entry["toolExposure"] = json!({"fail": "hidden"});
    let dir = config_dir(json!({ "m": entry }));
    let (code, stdout, stderr) = run(dir.path(), &["tools", "m", "--signatures"]);
    if !tether::CODEMODE_AVAILABLE {
        // No script engine, no script to see signatures: said, and nothing started.
        assert_eq!(code, 2, "{stderr}");
        assert!(stderr.contains("built without codemode"), "{stderr}");
        tag.assert_gone();
        return;
    }
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("/** Return the given text unchanged. */\nmcp__m__echo(args: {\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("mcp__m__sleep(args: { ms: number }): Promise<CallToolResult>"),
        "{stdout}"
    );
    assert!(!stdout.contains("mcp__m__fail"), "{stdout}");
    tag.assert_gone_within(Duration::from_secs(3));
}

#[test]
fn the_model_sees_one_codemode_tool_and_a_servers_section() {
    if !tether::CODEMODE_AVAILABLE {
        return;
    }
    let tag = Tag::new();
    let mut server = codemode_server("m", &tag, &[]);
    server.description = Some("echoes and sleeps".into());
    let hub = Hub::start(Config::new().with_server(server), HubOptions::default());
    let declared: Vec<String> = hub.model_tools().into_iter().map(|tool| tool.name).collect();
    assert_eq!(declared, ["codemode"]);
    let codemode = hub.model_tools().into_iter().next().unwrap();
    assert!(
        codemode.description.contains("tools.mcp__<server>__<tool>(args)"),
        "{}",
        codemode.description
    );
    assert_eq!(codemode.input_schema["required"], json!(["code"]));
    let prompt = hub.servers_prompt();
    assert!(prompt.text.contains("\n- mcp__m (codemode): echoes and sleeps\n"), "{}", prompt.text);
    assert_eq!(hub.servers_prompt().generation, prompt.generation, "unchanged, same generation");

    let result = hub
        .call(
            "codemode",
            code("return (await tools.mcp__m__echo({ text: 'via the model' })).content[0].text"),
            &CallOptions::default(),
        )
        .unwrap();
    assert_eq!(result.to_text(), "via the model");
    assert!(!result.is_error());
    let failed =
        hub.call("codemode", code("\nthrow new Error('nope')"), &CallOptions::default()).unwrap();
    assert!(failed.is_error());
    assert_eq!(failed.to_text(), "The script failed: error at line 2, column 11: nope");
    // Shaped like any tool result: the same 20 KB cut, the full text spilled.
    let huge =
        hub.call("codemode", code("return 'x'.repeat(100000)"), &CallOptions::default()).unwrap();
    let tool: tether::Tool = serde_json::from_value(json!({"name": "codemode"})).unwrap();
    let shaped = tether::shape_result("tether", &tool, &huge, &tether::ResultLimits::default());
    assert!(shaped.saved_to.is_some());
    hub.shutdown();
    tag.assert_gone();
}

#[test]
fn the_servers_section_changes_when_a_server_tells_what_it_is_for() {
    let tag = Tag::new();
    let mut slow = codemode_server("m", &tag, &[]);
    slow.exposure = Exposure::Deferred;
    let hub =
        Hub::start(Config::new().with_server(slow), HubOptions::default().with_background(true));
    let first = hub.servers_prompt();
    hub.wait_started();
    let second = hub.servers_prompt();
    assert!(
        second.text.contains("- mcp__m (deferred): A deliberately misbehaving server"),
        "{}",
        second.text
    );
    if first.text != second.text {
        assert_eq!(second.generation, first.generation + 1);
    }
    assert_eq!(hub.servers_prompt().generation, second.generation);
    hub.shutdown();
    tag.assert_gone();
}

#[test]
fn hidden_tools_do_not_exist_for_a_script_and_a_dropped_server_reconnects() {
    if !tether::CODEMODE_AVAILABLE {
        return;
    }
    let tag = Tag::new();
    let mut server = codemode_server("m", &tag, &["--crash-on-call", "2"]);
    server.tool_exposure.push(("fail".into(), Exposure::Hidden));
    let hub = Hub::start(Config::new().with_server(server), HubOptions::default());
    let ran = hub.run_script("await tools.mcp__m__fail({})", &ScriptOptions::default()).unwrap();
    assert_eq!(ran.error.unwrap().kind, ScriptErrorKind::UnknownTool);
    // The second call crashes the server; the script catches it, and the
    // next call reconnects, as a direct call would.
    let script = "await tools.mcp__m__echo({ text: 'a' });\n\
                  try { await tools.mcp__m__echo({ text: 'b' }) } catch (e) { console.log('lost: ' + e.kind) }\n\
                  return (await tools.mcp__m__echo({ text: 'c' })).content[0].text";
    let ran = hub.run_script(script, &ScriptOptions::default()).unwrap();
    assert!(ran.error.is_none(), "{:?}", ran.error);
    assert_eq!(ran.value, Some(json!("c")));
    assert_eq!(ran.console, "lost: tool failed\n");
    let outcomes: Vec<&str> = ran.calls.iter().map(|call| call.outcome.as_str()).collect();
    assert_eq!(outcomes, ["ok", "failed", "ok"]);
    hub.shutdown();
    tag.assert_gone();
}

#[test]
fn calls_run_in_parallel_and_the_hosts_cancel_tells_the_servers() {
    if !tether::CODEMODE_AVAILABLE {
        return;
    }
    let tag = Tag::new();
    let hub = Hub::start(
        Config::new().with_server(codemode_server("m", &tag, &[])),
        HubOptions::default(),
    );
    let began = Instant::now();
    let ran = hub
        .run_script(
            "return (await Promise.all([1, 2, 3, 4].map(() => tools.mcp__m__sleep({ ms: 1000 })))).length",
            &ScriptOptions::default(),
        )
        .unwrap();
    assert_eq!(ran.value, Some(json!(4)));
    // One after another they would take 4 s.
    assert!(began.elapsed() < Duration::from_millis(2500), "{:?}", began.elapsed());

    let cancel = CancelHandle::new();
    let trigger = cancel.clone();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        trigger.cancel();
    });
    let began = Instant::now();
    let ran = hub
        .run_script(
            "await Promise.all([tools.mcp__m__sleep({ ms: 20000 }), tools.mcp__m__sleep({ ms: 20000 })])",
            &ScriptOptions::default().with_cancel(cancel),
        )
        .unwrap();
    stopper.join().unwrap();
    assert_eq!(ran.error.unwrap().kind, ScriptErrorKind::Cancelled);
    assert!(began.elapsed() < Duration::from_secs(3), "{:?}", began.elapsed());
    let told =
        hub.call("mcp__m__client_notifications", json!({}), &CallOptions::default()).unwrap();
    let notifications: Vec<Value> = serde_json::from_str(&told.to_text()).unwrap();
    let cancelled =
        notifications.iter().filter(|n| n["method"] == "notifications/cancelled").count();
    assert_eq!(cancelled, 2, "{notifications:?}");
    hub.shutdown();
    tag.assert_gone();
}

#[test]
fn the_hubs_hook_sees_each_nested_call_and_may_deny_it() {
    if !tether::CODEMODE_AVAILABLE {
        return;
    }
    let tag = Tag::new();
    let seen: Arc<Mutex<Vec<(String, String, u64)>>> = Arc::default();
    let kept = Arc::clone(&seen);
    let hook = move |call: &PlannedCall| {
        kept.lock().unwrap().push((call.name.clone(), call.parent.tool.clone(), call.parent.run));
        if call.tool.as_deref() == Some("sleep") {
            Verdict::Deny("no sleeping".into())
        } else {
            Verdict::Allow
        }
    };
    let options = HubOptions::default().with_call_hook(Arc::new(hook));
    let hub = Hub::start(Config::new().with_server(codemode_server("m", &tag, &[])), options);
    let result = hub
        .call(
            "codemode",
            code("await tools.mcp__m__echo({ text: 'a' }); await tools.mcp__m__sleep({ ms: 1 })"),
            &CallOptions::default(),
        )
        .unwrap();
    assert!(result.is_error());
    assert!(
        result.to_text().contains(
            "denied at line 1, column 54: mcp__m__sleep: denied by the host: no sleeping"
        ),
        "{}",
        result.to_text()
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].0, "mcp__m__echo");
    assert_eq!(seen[0].1, "codemode");
    assert_eq!(seen[0].2, seen[1].2);
    hub.shutdown();
    tag.assert_gone();
}

#[test]
fn the_script_limits_come_from_the_user_file() {
    let dir = TempDir::new();
    dir.write("mcp.json", r#"{"codemode": {"timeout": 0.3, "maxCalls": 2}, "mcpServers": {}}"#);
    let config = ConfigLoader::new().config_dir(dir.path()).load();
    assert_eq!(config.codemode.timeout, Duration::from_millis(300));
    assert_eq!(config.codemode.max_calls, 2);
    if !tether::CODEMODE_AVAILABLE {
        return;
    }
    let began = Instant::now();
    let hub = Hub::start(config, HubOptions::default());
    let ran = hub.run_script("while (true) {}", &ScriptOptions::default()).unwrap();
    assert_eq!(ran.error.unwrap().kind, ScriptErrorKind::Timeout);
    assert!(began.elapsed() < Duration::from_millis(1000), "{:?}", began.elapsed());
    // A project file may not change them.
    let project = TempDir::new();
    project.write(".mcp.json", r#"{"codemode": {"timeout": 999}, "mcpServers": {}}"#);
    let config = ConfigLoader::new()
        .project_dir(project.path())
        .environment(vec![("TETHER_TRUST_PROJECT".into(), "1".into())])
        .load();
    assert_eq!(config.codemode.timeout, Duration::from_secs(30));
    assert!(
        config.warnings.iter().any(|w| w.contains("user's mcp.json only")),
        "{:?}",
        config.warnings
    );
}

#[test]
fn the_word_count_example_works_verbatim_through_tether_run_and_the_agent_loop() {
    if !tether::CODEMODE_AVAILABLE {
        return;
    }
    let argv = interop_setup::python_wordcount_server();
    let dir = config_dir(json!({
        "wordcount": {"command": argv[0], "args": &argv[1..], "exposure": "codemode", "startTimeout": 60}
    }));
    let (code, stdout, stderr) = run(dir.path(), &["run", "-e", WORDCOUNT_SCRIPT]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "{\"content\":[{\"type\":\"text\",\"text\":\"4\"}]}\n");

    let mut example = Command::new(agent_loop_example());
    example.arg(dir.path()).current_dir(dir.path());
    let (output, _) = run_command(example, None, Duration::from_secs(120));
    let printed = stdout_of(&output);
    assert!(output.status.success(), "{printed}\n{}", stderr_of(&output));
    assert!(printed.contains("- mcp__wordcount (codemode"), "{printed}");
    assert!(
        printed.contains(&format!("model calls codemode {}", json!({"code": WORDCOUNT_SCRIPT}))),
        "{printed}"
    );
    assert!(
        printed.contains("  -> {\"content\":[{\"type\":\"text\",\"text\":\"4\"}]}\n"),
        "{printed}"
    );
}

#[test]
fn a_script_chains_server_everythings_tools() {
    if !tether::CODEMODE_AVAILABLE {
        return;
    }
    let argv = interop_setup::everything_server();
    let mut server = ServerConfig::stdio(
        "everything",
        &argv[0],
        &argv[1..].iter().map(String::as_str).collect::<Vec<_>>(),
    );
    server.exposure = Exposure::Codemode;
    server.start_timeout = Duration::from_secs(60);
    let hub = Hub::start(Config::new().with_server(server), HubOptions::default());
    assert_eq!(hub.status()[0].state, ServerState::Ready, "{:?}", hub.status()[0].error);
    let script = "const sum = await tools['mcp__everything__get-sum']({ a: 2, b: 40 });\n\
                  const total = sum.content[0].text.match(/\\d+/g).pop();\n\
                  const echoed = await tools.mcp__everything__echo({ message: 'sum ' + total });\n\
                  const found = searchTools('tiny image', { limit: 1 });\n\
                  const image = await tools[found[0].name]({});\n\
                  return { echoed: echoed.content[0].text, image: image.content.some(b => b.type === 'image') };";
    let ran = hub.run_script(script, &ScriptOptions::default()).unwrap();
    assert!(ran.error.is_none(), "{:?}", ran.error);
    let value = ran.value.unwrap();
    assert!(value["echoed"].as_str().unwrap().contains("sum 42"), "{value}");
    assert_eq!(value["image"], true);
    // `get_sum` reaches `get-sum` too.
    let ran = hub
        .run_script(
            "return (await tools.mcp__everything__get_sum({ a: 1, b: 1 })).content[0].text",
            &ScriptOptions::default(),
        )
        .unwrap();
    assert!(ran.value.unwrap().as_str().unwrap().contains('2'));
    hub.shutdown();
}

/// Without the `codemode` feature: the entry's tools are deferred, its
/// status says why, and `tether run` refuses.
#[test]
fn without_the_engine_codemode_is_deferred_and_said() {
    if tether::CODEMODE_AVAILABLE {
        return;
    }
    let tag = Tag::new();
    let hub = Hub::start(
        Config::new().with_server(codemode_server("m", &tag, &[])),
        HubOptions::default(),
    );
    assert!(hub.tools().iter().all(|tool| tool.exposure == Exposure::Deferred));
    let declared: Vec<String> = hub.model_tools().into_iter().map(|tool| tool.name).collect();
    assert_eq!(declared, ["tool_search"]);
    let status = &hub.status()[0];
    assert!(
        status.warnings.iter().any(|w| w.contains("\"codemode\" feature")),
        "{:?}",
        status.warnings
    );
    assert!(matches!(
        hub.run_script("return 1", &ScriptOptions::default()),
        Err(tether::Error::Engine(_))
    ));
    hub.shutdown();
    tag.assert_gone();
}

fn without_the_engine_tether_run_says_so() {
    let dir = config_dir(json!({}));
    let (code, _, stderr) = run(dir.path(), &["run", "-e", "return 1"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("built without codemode"), "{stderr}");
}

/// The agent_loop example's binary, built once.
fn agent_loop_example() -> PathBuf {
    static BUILT: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| {
        let status = Command::new(env!("CARGO"))
            .args(["build", "--quiet", "--example", "agent_loop"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the agent_loop example failed");
    });
    target_dir().join("debug/examples/agent_loop")
}

// Issue 26 (item 7): `run --stdio CMD` adds a server for the run alone,
// named after its program, which the script calls by that name.
#[test]
fn tether_run_takes_an_ad_hoc_server() {
    if !tether::CODEMODE_AVAILABLE {
        return;
    }
    let dir = crate::support::TempDir::new();
    let demo = crate::support::fixture("demo-server").display().to_string();
    let script =
        "return (await tools.mcp__demo_server__count_words({ text: 'a b c' })).structuredContent";
    let (code, stdout, stderr) = run(dir.path(), &["run", "--stdio", &demo, "-e", script]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), r#"{"characters":5,"words":3}"#);
    assert!(stderr.contains("is the server \"demo-server\""), "{stderr}");
    assert!(!dir.path().join("mcp.json").exists(), "nothing is written");
}
