//! What `tether serve` says of faults, as a cold trial of it asked: every
//! frame that is not a request answered as JSON-RPC says, the requests read
//! before the input ended answered, a call that comes before its server
//! connected waiting for it, what cannot be served said on stderr, and the
//! names given judged alone.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::serve::{stateless_meta, tool_call, Front};
use crate::support::{
    config_dir, misbehave_entry, run_tether, run_tether_with_stdin, stderr_of, stdout_of,
    tether_bin, wait_exit, Tag, TempDir,
};

const WITHIN: Duration = Duration::from_secs(20);

fn initialize(id: i64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize",
           "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                      "clientInfo": {"name": "front", "version": "1"}}})
    .to_string()
}

/// Each line tether wrote, as JSON.
fn answers(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect()
}

// JSON-RPC 2.0, section 5: text that is not JSON is answered -32700, JSON
// that is not a request -32600, with the id where one can be read; a frame
// shaped as an answer is never answered. They went unanswered on stdio.
#[test]
fn frames_that_are_not_requests_are_answered_as_json_rpc_says() {
    let dir = config_dir(json!({}));
    let lines = [
        r#"{bad json"#.to_owned(),
        json!([{"jsonrpc": "2.0", "id": 15, "method": "ping"}]).to_string(),
        r#""a string""#.to_owned(),
        r#"{"jsonrpc": "2.0", "id": 7, "method": 5}"#.to_owned(),
        r#"{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}"#.to_owned(),
        json!({"jsonrpc": "2.0", "id": 99, "result": {}}).to_string(),
        json!({"jsonrpc": "1.0", "id": 9, "method": "ping"}).to_string(),
        json!({"id": 10, "method": "ping"}).to_string(),
        json!({"jsonrpc": "2.0", "id": null, "method": "ping"}).to_string(),
        json!({"jsonrpc": "2.0", "id": 8, "method": "ping"}).to_string(),
    ];
    let input = lines.join("\n") + "\n";
    let (output, _) = run_tether_with_stdin(dir.path(), &["serve"], Some(&input), WITHIN);
    let seen = answers(&stdout_of(&output));
    let codes: Vec<(Value, Value)> =
        seen.iter().map(|answer| (answer["id"].clone(), answer["error"]["code"].clone())).collect();
    let null = Value::Null;
    let expected = [
        (null.clone(), json!(-32700)),
        (null.clone(), json!(-32600)),
        (null.clone(), json!(-32600)),
        (json!(7), json!(-32600)),
        (null.clone(), json!(-32600)),
        (json!(9), json!(-32600)),
        (json!(10), json!(-32600)),
        (null.clone(), json!(-32600)),
        (json!(8), null),
    ];
    assert_eq!(codes, expected, "{seen:?}");
    assert_eq!(seen[1]["error"]["message"], "batches are not served");
    assert_eq!(seen[8]["result"], json!({}));
}

// MCP forbids a client to use an id twice in a session. A second request
// under the id of one under way was answered as well, two answers under
// one id, and the first could no longer be cancelled: it is refused at
// once now, and the first goes on (and is cancelled by that id). Once
// answered, an id names nothing under way.
#[test]
fn a_request_under_the_id_of_one_under_way_is_refused() {
    let tag = Tag::new();
    let mut front = Front::start(json!({"fx": misbehave_entry(&tag, &[])}), &[]);
    front.initialize(json!({}));
    front.tools_with("fx__echo");
    let sleep = tool_call(5, "fx__sleep", json!({"ms": 30000}));
    front.send_together(&[sleep, tool_call(5, "fx__echo", json!({"text": "twin"}))]);
    let refused = front.next("the refusal", |message| message["error"]["code"] == -32600);
    // Under id 5 the client would take it for the first call's answer.
    assert_eq!(refused["id"], Value::Null, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("request id 5 is in use"), "{refused}");
    front.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": 5}}));
    thread::sleep(Duration::from_millis(300));
    let again =
        front.request(6, "tools/call", json!({"name": "fx__echo", "arguments": {"text": "a"}}));
    assert_eq!(again["result"]["content"][0]["text"], "a", "{again}");
    assert!(!front.seen.iter().any(|message| message["id"] == 5), "{:?}", front.seen);
    let reused =
        front.request(6, "tools/call", json!({"name": "fx__echo", "arguments": {"text": "b"}}));
    assert_eq!(reused["result"]["content"][0]["text"], "b", "{reused}");
    front.close();
    tag.assert_gone();
}

// A request cancelled while it waited for a worker was answered all the
// same once one was free: a cancellation found only the requests being
// answered. It finds the queued ones too, and they get no answer.
#[test]
fn a_request_cancelled_in_the_queue_is_never_answered() {
    let tag = Tag::new();
    let mut front = Front::start(json!({"fx": misbehave_entry(&tag, &[])}), &[]);
    let meta = stateless_meta(json!({}));
    let call = |id: i64, name: &str, arguments: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": name, "arguments": arguments, "_meta": meta}})
    };
    let warm = front.request(
        2,
        "tools/call",
        call(2, "fx__echo", json!({"text": "up"}))["params"].clone(),
    );
    assert_eq!(warm["result"]["content"][0]["text"], "up", "{warm}");
    // A 2026-07-28 client's calls go to the workers: eight sleeps take
    // them all, and the ninth call waits in the queue.
    let mut calls: Vec<Value> =
        (20..28).map(|id| call(id, "fx__sleep", json!({"ms": 30000}))).collect();
    calls.push(call(29, "fx__echo", json!({"text": "queued"})));
    front.send_together(&calls);
    thread::sleep(Duration::from_millis(300));
    for id in [29].into_iter().chain(20..28) {
        front.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": id}}));
    }
    thread::sleep(Duration::from_millis(500));
    let after = front.request(
        30,
        "tools/call",
        call(30, "fx__echo", json!({"text": "on"}))["params"].clone(),
    );
    assert_eq!(after["result"]["content"][0]["text"], "on", "{after}");
    thread::sleep(Duration::from_millis(100));
    let answered: Vec<&Value> =
        front.seen.iter().filter(|message| message.get("id").is_some()).collect();
    assert!(answered.is_empty(), "cancelled requests were answered: {answered:?}");
    front.close();
    tag.assert_gone();
}

// A line past the 16 MiB a message may hold ended the serving (exit 0, as
// if stdin had ended) and gave up the calls under way. It is answered
// -32600 and skipped; what came before and after it is answered.
#[test]
fn a_line_too_large_is_refused_and_the_serving_goes_on() {
    let tag = Tag::new();
    let mut front = Front::start(json!({"fx": misbehave_entry(&tag, &[])}), &[]);
    front.initialize(json!({}));
    front.tools_with("fx__echo");
    front.send(tool_call(2, "fx__sleep", json!({"ms": 1000})));
    let huge = "x".repeat(17 * 1024 * 1024);
    front.send(tool_call(3, "fx__echo", json!({"text": huge})));
    let refused = front.next("the refusal", |message| message["error"]["code"] == -32600);
    assert_eq!(refused["id"], Value::Null, "{refused}");
    let pong = front.request(4, "ping", json!({}));
    assert_eq!(pong["result"], json!({}), "{pong}");
    let slept = front.next("the call under way", |message| message["id"] == 2);
    assert!(slept.get("result").is_some(), "{slept}");
    assert!(!front.seen.iter().any(|message| message["id"] == 3), "{:?}", front.seen);
    front.close();
    tag.assert_gone();
}

// A script that writes its requests and closes its input at once hears the
// quick ones: the end of the input gives what is under way a moment before
// giving it up. The answer to `initialize` was lost 9 times in 30.
#[test]
fn requests_read_before_the_input_ended_are_answered() {
    let tag = Tag::new();
    let dir = config_dir(json!({"fx": misbehave_entry(&tag, &[])}));
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    let input = format!("{}\n{ping}\n", initialize(1));
    for _ in 0..10 {
        let (output, _) = run_tether_with_stdin(dir.path(), &["serve"], Some(&input), WITHIN);
        let seen = answers(&stdout_of(&output));
        let ids: Vec<&Value> = seen.iter().map(|answer| &answer["id"]).collect();
        assert!(ids.contains(&&json!(1)) && ids.contains(&&json!(2)), "{seen:?}");
        assert_eq!(seen.len(), 2, "{seen:?}");
    }
    tag.assert_gone();
}

// A client that calls right after `initialize` (from a list it kept) got
// "unknown tool" while the server was still starting; lists waited. The
// call waits for the start as a list does.
#[test]
fn a_call_that_comes_before_its_server_connected_waits_for_it() {
    let tag = Tag::new();
    let servers = json!({"fx": misbehave_entry(&tag, &["--start-delay", "600"])});
    for args in [&["fx"][..], &[]] {
        let mut front = Front::start(servers.clone(), args);
        front.initialize(json!({}));
        let name = if args.is_empty() { "fx__echo" } else { "echo" };
        let called =
            front.request(2, "tools/call", json!({"name": name, "arguments": {"text": "early"}}));
        assert_eq!(called["result"]["content"][0]["text"], "early", "{called}");
        front.close();
    }
    tag.assert_gone();
}

/// `tether serve` over this config folder, its stderr read line by line:
/// returns once a line holds each of `wanted` (or panics past the bound).
fn stderr_until(dir: &TempDir, wanted: &[&str]) -> String {
    let mut child = Command::new(tether_bin())
        .arg("--config-dir")
        .arg(dir.path())
        .arg("serve")
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{}", initialize(1)).unwrap();
    let said = said_on_stderr(&mut child, wanted);
    drop(stdin);
    assert_eq!(wait_exit(&mut child, Duration::from_secs(5)), Some(0));
    said
}

/// `child`'s stderr, read line by line until a line holds each of
/// `wanted`; past the bound the child is ended and the test fails.
fn said_on_stderr(child: &mut std::process::Child, wanted: &[&str]) -> String {
    let (lines, read) = crossbeam_channel::unbounded();
    let stderr = child.stderr.take().unwrap();
    thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + WITHIN;
    let mut said = String::new();
    while !wanted.iter().all(|word| said.contains(word)) {
        let left = deadline.saturating_duration_since(Instant::now());
        match read.recv_timeout(left) {
            Ok(line) => said.push_str(&(line + "\n")),
            Err(_) => {
                child.kill().ok();
                child.wait().ok();
                panic!("not all of {wanted:?} said within {WITHIN:?}: {said}");
            }
        }
    }
    said
}

// Claude Desktop keeps the serving's stderr and nothing else: a file that
// cannot be read, an entry that cannot be used and a server that cannot
// start are each said there (they were silent: the client saw no tools).
#[test]
fn what_cannot_be_served_is_said_on_stderr() {
    let dir = TempDir::new();
    dir.write(
        "mcp.json",
        &json!({"mcpServers": {
            "gone": {"command": "/nonexistent/tether-test-server"},
            "typo": {"comand": "x"},
        }})
        .to_string(),
    );
    let said = stderr_until(&dir, &["gone: ", "typo"]);
    assert!(said.contains("/nonexistent/tether-test-server"), "{said}");
    assert!(said.contains("\"comand\""), "{said}");
    let broken = TempDir::new();
    broken.write("mcp.json", r#"{"mcpServers": {"a": {"command": "x",}}"#);
    let said = stderr_until(&broken, &["mcp.json"]);
    assert!(said.contains("trailing comma"), "{said}");
}

// `serve NAME` judges the servers named, as every command that names one:
// a disabled one is refused, and another entry's fault is not this
// serving's (`--check` failed on it).
#[test]
fn the_servers_named_are_judged_alone() {
    let tag = Tag::new();
    let dir = config_dir(json!({
        "on": misbehave_entry(&tag, &[]),
        "off": {"command": "x", "enabled": false},
        "typo": {"comand": "x"},
    }));
    let (off, _) = run_tether(dir.path(), &["serve", "off"], WITHIN);
    assert_eq!(off.status.code(), Some(2));
    assert!(stderr_of(&off).contains("disabled"), "{}", stderr_of(&off));
    let (typo, _) = run_tether(dir.path(), &["serve", "typo", "--check"], WITHIN);
    assert_eq!(typo.status.code(), Some(2));
    assert!(stderr_of(&typo).contains("invalid entry"), "{}", stderr_of(&typo));
    let (on, _) = run_tether(dir.path(), &["serve", "on", "--check"], WITHIN);
    let printed = stdout_of(&on);
    assert_eq!(on.status.code(), Some(0), "{printed}{}", stderr_of(&on));
    assert!(printed.starts_with("on ") && !printed.contains("typo"), "{printed}");
    tag.assert_gone();
}

// Parameters tether cannot take are refused as MCP says (-32602): a
// cursor tether never gave (it lists all in one page), and arguments that
// are not an object, which were passed on to the server.
#[test]
fn parameters_tether_cannot_take_are_refused() {
    let tag = Tag::new();
    let dir = config_dir(json!({"fx": misbehave_entry(&tag, &[])}));
    let requests = [
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"cursor": "x"}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "fx__echo", "arguments": ["not", "an", "object"]}}),
    ];
    let mut input = initialize(1) + "\n";
    for request in &requests {
        input.push_str(&format!("{request}\n"));
    }
    let (output, _) = run_tether_with_stdin(dir.path(), &["serve"], Some(&input), WITHIN);
    let seen = answers(&stdout_of(&output));
    for id in [2, 3] {
        let answer = seen.iter().find(|answer| answer["id"] == id).unwrap_or_else(|| {
            panic!("no answer to {id}: {seen:?}");
        });
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
    }
    tag.assert_gone();
}

// `--http` and `--allow-origin` values that cannot be right are bad usage
// (exit 2), said before anything starts; they were "cannot listen" (3),
// and any origin was taken without a word.
#[test]
fn serving_flags_that_cannot_be_right_are_bad_usage() {
    let dir = config_dir(json!({}));
    for args in [
        &["serve", "--http", "notaport"][..],
        &["serve", "--http", "127.0.0.1:99999"],
        &["serve", "--http", "8931", "--allow-origin", "notanorigin"],
        &["serve", "--http", "8931", "--allow-origin", "https://app.example/path"],
    ] {
        let (output, _) = run_tether(dir.path(), args, WITHIN);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr_of(&output));
    }
}

// A call of a tool whose server could not start was "unknown tool": it is
// answered with that server's failure, named, as a call that fails is.
#[test]
fn a_call_to_a_server_that_failed_is_answered_with_its_failure() {
    let tag = Tag::new();
    let servers = json!({
        "gone": {"command": "/nonexistent/tether-test-server"},
        "fx": misbehave_entry(&tag, &[]),
    });
    let mut front = Front::start(servers, &[]);
    front.initialize(json!({}));
    let called = front.request(2, "tools/call", json!({"name": "gone__echo", "arguments": {}}));
    let message = called["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("server \"gone\": could not start"), "{called}");
    assert_eq!(called["error"]["data"]["serverFailed"], true, "{called}");
    let unknown = front.request(3, "tools/call", json!({"name": "fx__nothing", "arguments": {}}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    front.close();
    tag.assert_gone();
}

// The issue asks every upstream gone within half a second of the client's
// going away. A server that ignores its input's end and SIGTERM kept
// `tether serve` 1.6 s (the grace before SIGKILL); now tether exits
// without waiting it out, and the server's supervisor ends its group.
#[test]
fn a_server_that_ignores_its_end_is_gone_soon_after_the_client() {
    let tag = Tag::new();
    let flags = ["--ignore-eof", "--ignore-sigterm"];
    let mut front = Front::start(json!({"fx": misbehave_entry(&tag, &flags)}), &[]);
    front.initialize(json!({}));
    front.tools_with("fx__echo");
    let (code, took) = front.close();
    assert_eq!(code, Some(0));
    assert!(took < Duration::from_secs(1), "exited {took:?} after stdin closed");
    tag.assert_gone_within(Duration::from_millis(500));
    // SIGTERM too: tether had waited for such a server for 1.6 s.
    let mut front = Front::start(json!({"fx": misbehave_entry(&tag, &flags)}), &[]);
    front.initialize(json!({}));
    front.tools_with("fx__echo");
    let (code, took) = front.terminate();
    assert_eq!(code, Some(143));
    assert!(took < Duration::from_millis(400), "exited {took:?} after SIGTERM");
    tag.assert_gone_within(Duration::from_millis(500));
}

// `initialize` is answered before the one server served alone connects, so
// it could not say what that server offers beyond the lists (a cold trial:
// completions and subscriptions worked, undeclared). Once the server has
// connected, the next serving says it from the first moment, as the server
// last said it.
#[test]
fn the_next_serving_declares_what_the_server_said_of_itself() {
    let tag = Tag::new();
    let flags = ["--completions", "--resources", "--start-delay", "300"];
    let dir = config_dir(json!({"fx": misbehave_entry(&tag, &flags)}));
    let mut first = Front::spawn(dir.path(), &["serve", "fx"], &[]);
    let answer = first.initialize(json!({}));
    assert!(answer["result"]["capabilities"].get("completions").is_none(), "{answer}");
    first.tools_with("echo");
    first.close();
    let mut second = Front::spawn(dir.path(), &["serve", "fx"], &[]);
    let answer = second.initialize(json!({}));
    let capabilities = &answer["result"]["capabilities"];
    assert!(capabilities.get("completions").is_some(), "{answer}");
    assert_eq!(capabilities["resources"]["subscribe"], true, "{answer}");
    assert_eq!(answer["result"]["serverInfo"]["name"], "misbehave", "{answer}");
    second.close();
    tag.assert_gone();
}

// A client that stops reading its output while big answers come: tether
// held every one (a cold trial saw 870 MB and climbing). What waits for
// the client is bounded (64 MiB, and the answers being handed on); an
// answer that finds no room is replaced by an error under its id, so
// every request still has exactly one answer once the client reads.
// (With release builds, 100 answers of 4 MB unread took tether to 256 MB
// before and 107 MB after; a debug server is too slow to fill the bound
// in these 3 s, so this guards the bound and the answers, not the change.)
#[test]
fn a_client_that_does_not_read_costs_bounded_memory() {
    let tag = Tag::new();
    let dir = config_dir(json!({"fx": misbehave_entry(&tag, &[])}));
    /// Killed if the test fails before it ends.
    struct Serving(std::process::Child);
    impl Drop for Serving {
        fn drop(&mut self) {
            self.0.kill().ok();
            self.0.wait().ok();
        }
    }
    let mut serving = Serving(
        Command::new(tether_bin())
            .arg("--config-dir")
            .arg(dir.path())
            .args(["serve", "fx"])
            .env_remove("RUST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let child = &mut serving.0;
    let mut stdin = child.stdin.take().unwrap();
    let mut input = format!("{}\n", initialize(1));
    input.push_str("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
    let calls = 100;
    for id in 0..calls {
        let call = json!({"jsonrpc": "2.0", "id": 10 + id, "method": "tools/call",
                          "params": {"name": "huge", "arguments": {"bytes": 4_000_000}}});
        input.push_str(&format!("{call}\n"));
    }
    stdin.write_all(input.as_bytes()).unwrap();
    // Nobody reads: 100 answers of 4 MB each would be 400 MB.
    let rss_kib = || {
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id()));
        let status = status.unwrap_or_default();
        let line = status.lines().find(|line| line.starts_with("VmRSS:")).unwrap_or("");
        line.split_whitespace().nth(1).and_then(|kib| kib.parse::<u64>().ok()).unwrap_or(0)
    };
    let mut peak = 0;
    let watching = Instant::now();
    while watching.elapsed() < Duration::from_secs(3) {
        peak = peak.max(rss_kib());
        thread::sleep(Duration::from_millis(50));
    }
    assert!(peak < 200 * 1024, "tether held {peak} KiB for a client that does not read");
    // Now it reads: each request answered once, with its result or an
    // error saying why it was dropped.
    let stdout = child.stdout.take().unwrap();
    let reader = thread::spawn(move || {
        let mut seen = Vec::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let value: Value = serde_json::from_str(&line).unwrap();
            // Announcements (a list change) come too.
            if value.get("id").is_none() {
                continue;
            }
            seen.push((value["id"].clone(), value.get("result").is_some()));
            if seen.len() == calls as usize + 1 {
                break;
            }
        }
        seen
    });
    let deadline = Instant::now() + WITHIN;
    while !reader.is_finished() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    assert!(reader.is_finished(), "not every request was answered");
    let seen = reader.join().unwrap();
    let mut ids: Vec<i64> = seen.iter().filter_map(|(id, _)| id.as_i64()).collect();
    ids.sort_unstable();
    let expected: Vec<i64> = std::iter::once(1).chain(10..10 + calls).collect();
    assert_eq!(ids, expected);
    assert!(seen.iter().filter(|(_, result)| *result).count() > 10, "{seen:?}");
    drop(stdin);
    assert_eq!(wait_exit(child, WITHIN), Some(0));
    tag.assert_gone();
}

// A client that closes its end of tether's output while a call streams
// progress: nothing can reach it any more, so its calls are given up at
// once (the serving said nothing and kept them going until stdin ended,
// a cold trial found). The end of stdin still ends the serving.
#[test]
fn a_client_that_closes_its_output_has_its_calls_given_up() {
    let tag = Tag::new();
    let dir = config_dir(json!({"fx": misbehave_entry(&tag, &[])}));
    let mut child = Command::new(tether_bin())
        .arg("--config-dir")
        .arg(dir.path())
        .args(["serve", "fx"])
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "progress", "arguments": {"steps": 100, "interval_ms": 50},
                                 "_meta": {"progressToken": "p"}}});
    writeln!(stdin, "{}\n{call}", initialize(1)).unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let deadline = Instant::now() + WITHIN;
    while !line.contains("notifications/progress") {
        line.clear();
        assert!(stdout.read_line(&mut line).unwrap() > 0 && Instant::now() < deadline);
    }
    drop(stdout);
    said_on_stderr(&mut child, &["closed its end of the output"]);
    drop(stdin);
    assert_eq!(wait_exit(&mut child, Duration::from_secs(5)), Some(0));
    tag.assert_gone();
}
