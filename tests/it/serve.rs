//! `tether serve` (issue 24): a real `tether` process serving the fixture
//! servers, spoken to over its stdin and stdout by a client written here,
//! line by line, as MCP's stdio transport is.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver};
use serde_json::{json, Value};

use crate::support::{config_dir, misbehave_entry, tether_bin, Tag, TempDir};

const WITHIN: Duration = Duration::from_secs(20);

/// A client in front of `tether serve` (or `tether proxy`).
pub struct Front {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    /// What came that was not the answer waited for.
    pub seen: Vec<Value>,
    /// Every line as it came.
    raw: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    _dir: Option<TempDir>,
}

impl Front {
    pub fn start(servers: Value, args: &[&str]) -> Front {
        let dir = config_dir(servers);
        let mut serve = vec!["serve"];
        serve.extend_from_slice(args);
        let mut front = Front::spawn(dir.path(), &serve, &[]);
        front._dir = Some(dir);
        front
    }

    /// `tether --config-dir DIR ARGS` with these variables set.
    pub fn spawn(dir: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> Front {
        let mut child = Command::new(tether_bin())
            .arg("--config-dir")
            .arg(dir)
            .args(args)
            .envs(env.iter().copied())
            .env_remove("RUST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = unbounded();
        let raw: std::sync::Arc<std::sync::Mutex<Vec<String>>> = std::sync::Arc::default();
        let kept = std::sync::Arc::clone(&raw);
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                kept.lock().unwrap().push(line.clone());
                let value: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|err| panic!("not JSON from tether serve: {err}: {line}"));
                if sender.send(value).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Front { child, stdin, lines, seen: Vec::new(), raw, _dir: None }
    }

    pub fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// Several frames in one write: they reach tether together.
    pub fn send_together(&mut self, messages: &[Value]) {
        let mut text = String::new();
        for message in messages {
            text.push_str(&message.to_string());
            text.push('\n');
        }
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(text.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// The next message that `wanted` accepts; the others are kept in `seen`.
    pub fn next(&mut self, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        if let Some(at) = self.seen.iter().position(&wanted) {
            return self.seen.remove(at);
        }
        let deadline = Instant::now() + WITHIN;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no {what} within {WITHIN:?}; saw {:?}", self.seen));
            if wanted(&message) {
                return message;
            }
            self.seen.push(message);
        }
    }

    pub fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.next(&format!("answer to {method}"), |message| {
            message["id"] == json!(id) && message.get("method").is_none()
        })
    }

    pub fn initialize(&mut self, capabilities: Value) -> Value {
        let answer = self.request(
            1,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
                   "clientInfo": {"name": "front", "version": "1"}}),
        );
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        answer
    }

    /// Lists tools until `name` is there (servers connect in the background,
    /// each announced as a list change).
    pub fn tools_with(&mut self, name: &str) -> Vec<Value> {
        let deadline = Instant::now() + WITHIN;
        let mut id = 1000;
        loop {
            id += 1;
            let listed = self.request(id, "tools/list", json!({}));
            let tools = listed["result"]["tools"].as_array().cloned().unwrap_or_default();
            if tools.iter().any(|tool| tool["name"] == name) {
                return tools;
            }
            assert!(Instant::now() < deadline, "no tool {name}: {tools:?}");
            self.next("a tools list change", |message| {
                message["method"] == "notifications/tools/list_changed"
            });
        }
    }

    /// Closes stdin and waits for the exit; how long it took.
    pub fn close(self) -> (Option<i32>, Duration) {
        self.end_by(|front| drop(front.stdin.take()))
    }

    /// Sends SIGTERM and waits for the exit; how long it took.
    pub fn terminate(self) -> (Option<i32>, Duration) {
        self.end_by(|front| {
            // SAFETY: a signal to the child this test started.
            unsafe { libc::kill(front.child.id() as i32, libc::SIGTERM) };
        })
    }

    fn end_by(mut self, end: impl FnOnce(&mut Front)) -> (Option<i32>, Duration) {
        end(&mut self);
        drop(self.stdin.take());
        let closed = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status.code(), closed.elapsed());
            }
            if closed.elapsed() > WITHIN {
                self.child.kill().ok();
                self.child.wait().ok();
                panic!("tether serve did not exit after its stdin closed");
            }
            thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Front {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            self.child.kill().ok();
            self.child.wait().ok();
        }
    }
}

// The handshake is answered at once, before any server has connected; each
// server that connects is announced; tools are SERVER__TOOL; a call, its
// progress under the client's own token, a cancellation, a list change,
// resources and prompts pass through; the end of stdin ends everything
// within half a second.
#[test]
fn serve_passes_tools_progress_cancellation_and_list_changes_through() {
    let tag = Tag::new();
    let mut front = Front::start(json!({"fx": misbehave_entry(&tag, &[])}), &[]);
    let began = Instant::now();
    let answer = front.initialize(json!({}));
    let took = began.elapsed();
    assert_eq!(answer["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(answer["result"]["serverInfo"]["name"], "tether");
    assert_eq!(answer["result"]["capabilities"]["tools"]["listChanged"], true);
    eprintln!("initialize answered {took:?} after it was sent");
    let tools = front.tools_with("fx__echo");
    assert!(!tools.iter().any(|tool| tool["name"] == "tether__status"), "only with --status-tool");

    let echoed =
        front.request(2, "tools/call", json!({"name": "fx__echo", "arguments": {"text": "hi"}}));
    assert_eq!(echoed["result"]["content"][0]["text"], "hi", "{echoed}");

    // Progress reaches the client under its own token.
    let progressed = front.request(
        3,
        "tools/call",
        json!({"name": "fx__progress", "arguments": {"steps": 3}, "_meta": {"progressToken": "mine"}}),
    );
    assert!(progressed.get("result").is_some(), "{progressed}");
    let updates: Vec<&Value> =
        front.seen.iter().filter(|message| message["method"] == "notifications/progress").collect();
    assert_eq!(updates.len(), 3, "{:?}", front.seen);
    assert!(updates.iter().all(|update| update["params"]["progressToken"] == "mine"));

    // A cancelled call gets no answer; the next request does.
    front.send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                      "params": {"name": "fx__sleep", "arguments": {"ms": 30000}}}));
    thread::sleep(Duration::from_millis(300));
    front.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": 4, "reason": "changed my mind"}}));
    let pinged = front.request(5, "ping", json!({}));
    assert_eq!(pinged["result"], json!({}));
    thread::sleep(Duration::from_millis(300));
    assert!(!front.seen.iter().any(|message| message["id"] == 4), "{:?}", front.seen);

    // A server's own list change reaches the client, and the new tool is there.
    let grown =
        front.request(6, "tools/call", json!({"name": "fx__grow", "arguments": {"name": "extra"}}));
    assert!(grown.get("result").is_some(), "{grown}");
    front.tools_with("fx__extra");

    // An unknown tool is a JSON-RPC error, never silence.
    let unknown = front.request(7, "tools/call", json!({"name": "fx__nope", "arguments": {}}));
    assert!(unknown["error"]["message"].as_str().unwrap().contains("fx__nope"), "{unknown}");

    let (code, took) = front.close();
    assert_eq!(code, Some(0));
    assert!(took < Duration::from_millis(500), "exit took {took:?}");
    eprintln!("exited {took:?} after stdin closed");
    tag.assert_gone();
}

// A 2025-11-25 client in front of a 2026-07-28 server: the server's
// elicitation (an input_required round) becomes tether's request to the
// client, whose answer completes the call. And a 2026-07-28 client is
// served without a handshake.
#[test]
fn elicitation_crosses_eras_and_a_stateless_client_is_served() {
    let tag = Tag::new();
    let servers = json!({"modern": misbehave_entry(&tag, &["--era", "modern"])});
    let mut front = Front::start(servers.clone(), &[]);
    front.initialize(json!({"elicitation": {"form": {}}}));
    front.tools_with("modern__ask");
    front.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "modern__ask", "arguments": {}}}));
    let asked = front.next("an elicitation", |message| message["method"] == "elicitation/create");
    assert_eq!(asked["params"]["message"], "What is your name?");
    front.send(json!({"jsonrpc": "2.0", "id": asked["id"].clone(),
                      "result": {"action": "accept", "content": {"name": "Ada"}}}));
    let answered = front.next("the call's answer", |message| message["id"] == 2);
    assert_eq!(answered["result"]["content"][0]["text"], "hello Ada", "{answered}");
    front.close();

    let mut front = Front::start(servers, &["--status-tool"]);
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientInfo": {"name": "front", "version": "1"},
                      "io.modelcontextprotocol/clientCapabilities": {}});
    let discovered = front.request(1, "server/discover", json!({"_meta": meta}));
    assert_eq!(discovered["result"]["supportedVersions"], json!(["2026-07-28"]));
    let deadline = Instant::now() + WITHIN;
    loop {
        let listed = front.request(2, "tools/list", json!({"_meta": meta}));
        let names: Vec<&str> = listed["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|tool| tool["name"].as_str())
            .collect();
        assert!(names.contains(&"tether__status"), "{names:?}");
        if names.contains(&"modern__echo") {
            break;
        }
        assert!(Instant::now() < deadline, "{names:?}");
        thread::sleep(Duration::from_millis(50));
    }
    let status = front.request(3, "tools/call", json!({"name": "tether__status", "_meta": meta}));
    assert!(status["result"]["content"][0]["text"].as_str().unwrap().contains("modern: connected"));
    front.close();
    tag.assert_gone();
}

// One named server keeps its own names; a request tether does not answer
// goes to it; the upstream dying mid-call is an error naming it.
#[test]
fn one_server_keeps_its_names_and_its_failure_is_an_error() {
    let tag = Tag::new();
    let flags = ["--completions", "--refuse-envelope"];
    let mut front = Front::start(json!({"fx": misbehave_entry(&tag, &flags)}), &["fx"]);
    front.initialize(json!({}));
    front.tools_with("echo");
    // A method tether does not answer itself is the server's.
    let completed = front.request(
        3,
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "greet"},
               "argument": {"name": "name", "value": "A"}}),
    );
    let values = &completed["result"]["completion"]["values"];
    assert_eq!(values, &json!(["Ada", "Alan"]), "{completed}");
    let refused = front.request(4, "no/such", json!({}));
    assert_eq!(refused["error"]["code"], -32601, "{refused}");
    // A 2026-07-28 client's request reaches this handshake-era server
    // without its envelope (a cold trial: the server refused it).
    let stateless = front.request(
        5,
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "greet"},
               "argument": {"name": "name", "value": "A"},
               "_meta": stateless_meta(json!({}))}),
    );
    assert_eq!(stateless["result"]["completion"]["values"], json!(["Ada", "Alan"]), "{stateless}");
    front.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "sleep", "arguments": {"ms": 30000}}}));
    thread::sleep(Duration::from_millis(300));
    for (pid, command) in tag.live_processes() {
        if command.contains("misbehave") {
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    }
    let failed = front.next("the failed call", |message| message["id"] == 2);
    let message = failed["error"]["message"].as_str().unwrap_or_default();
    // Naming the server, and saying it failed (not a refusal).
    assert!(message.starts_with("server \"fx\": "), "{failed}");
    assert_eq!(failed["error"]["data"]["serverFailed"], true, "{failed}");
    front.close();
    tag.assert_gone();
}

// Serving several servers, a completion and a resource subscription were
// refused (-32601): they go to the server the request names, as a prompt
// and a read do, and the subscription's updates reach the client.
#[test]
fn many_servers_route_completions_and_subscriptions() {
    let tag = Tag::new();
    let servers = json!({
        "fx": misbehave_entry(&tag, &["--completions", "--resources"]),
        "other": misbehave_entry(&tag, &[]),
    });
    let mut front = Front::start(servers, &[]);
    let answer = front.initialize(json!({}));
    assert_eq!(answer["result"]["capabilities"]["resources"]["subscribe"], true, "{answer}");
    assert!(answer["result"]["capabilities"].get("completions").is_some(), "{answer}");
    front.tools_with("fx__touch");
    let by_prompt = front.request(
        2,
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "fx__greet"},
               "argument": {"name": "name", "value": "A"}}),
    );
    assert_eq!(by_prompt["result"]["completion"]["values"], json!(["Ada", "Alan"]), "{by_prompt}");
    let by_template = front.request(
        3,
        "completion/complete",
        json!({"ref": {"type": "ref/resource", "uri": "test://item/{id}"},
               "argument": {"name": "id", "value": ""}}),
    );
    assert!(by_template["result"]["completion"]["values"].is_array(), "{by_template}");
    let subscribed = front.request(4, "resources/subscribe", json!({"uri": "test://one"}));
    assert_eq!(subscribed["result"], json!({}), "{subscribed}");
    let touch = json!({"name": "fx__touch", "arguments": {"uri": "test://one"}});
    let touched = front.request(5, "tools/call", touch);
    assert!(touched.get("result").is_some(), "{touched}");
    let updated =
        front.next("the update", |message| message["method"] == "notifications/resources/updated");
    assert_eq!(updated["params"]["uri"], "test://one", "{updated}");
    front.close();
    tag.assert_gone();
}

// The TypeScript SDK's Client in front of `tether serve`, with
// server-everything behind it (stdio): tools, a call, progress under the
// client's token, cancellation, sampling and elicitation answered by the
// client in front, resources and prompts.
#[test]
fn the_typescript_sdk_reaches_server_everything_through_tether_serve() {
    let argv = crate::interop_setup::everything_server();
    let dir = config_dir(json!({"everything": {"command": argv[0], "args": argv[1..]}}));
    let config = dir.path().to_str().unwrap().to_owned();
    let out = crate::interop_setup::node_script(
        "serve-front.mjs",
        &[tether_bin(), &config],
        Duration::from_secs(120),
    );
    assert_the_sdk_saw_everything(&out, "stdio");
}

/// What `fixtures/node/serve-front.mjs` printed, checked: the SDK's client
/// in front of server-everything saw each thing pass through tether.
pub fn assert_the_sdk_saw_everything(out: &str, over: &str) {
    let seen: Value = serde_json::from_str(out.trim()).unwrap_or_else(|_| panic!("{out}"));
    eprintln!("the SDK saw over {over}: {seen}");
    let tools: Vec<&str> =
        seen["tools"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(tools.contains(&"everything__echo"), "{tools:?}");
    assert!(seen["echo"].as_str().unwrap().contains("hi there"), "{seen}");
    // The server sends three updates and tether passes three on (the test
    // above counts them on the wire); the SDK may drop the last when it
    // arrives in one read with the answer (it looks its progress handler up
    // after the answer removed it).
    assert!(seen["progress"].as_u64().unwrap() >= 2, "{seen}");
    assert_eq!(seen["cancelled"], true, "{seen}");
    assert!(seen["afterCancel"].as_str().unwrap().contains("again"), "{seen}");
    assert!(seen["sampling"].as_str().unwrap().contains("sampled by the front"), "{seen}");
    assert_eq!(seen["sampled"], 1, "{seen}");
    assert!(seen["elicitation"].as_str().unwrap().contains("Ada Lovelace"), "{seen}");
    assert!(seen["resources"].as_u64().unwrap() > 0, "{seen}");
    assert!(seen["prompts"].as_array().unwrap().iter().any(|p| p == "everything__simple-prompt"));
    assert!(seen["prompt"].as_u64().unwrap() > 0, "{seen}");
}

// A server behind `tether serve` that crashes is started again (with a
// backoff), announced, and called again; the call it crashed in is an
// error naming it.
#[test]
fn a_crashed_server_is_started_again() {
    let tag = Tag::new();
    let mut front =
        Front::start(json!({"fx": misbehave_entry(&tag, &["--abort-on-call", "2"])}), &[]);
    front.initialize(json!({}));
    front.tools_with("fx__echo");
    let call = |front: &mut Front, id: i64| {
        front.request(id, "tools/call", json!({"name": "fx__echo", "arguments": {"text": "hi"}}))
    };
    assert_eq!(call(&mut front, 2)["result"]["content"][0]["text"], "hi");
    let before: Vec<u32> = tag.live_processes().into_iter().map(|(pid, _)| pid).collect();
    let crashed = call(&mut front, 3);
    assert!(
        crashed["error"]["message"].as_str().unwrap_or_default().starts_with("server \"fx\": "),
        "{crashed}"
    );
    // Started again without a call asking (a new process), and announced.
    let deadline = Instant::now() + WITHIN;
    let restarted = loop {
        let now: Vec<(u32, String)> = tag
            .live_processes()
            .into_iter()
            .filter(|(pid, command)| command.contains("misbehave") && !before.contains(pid))
            .collect();
        if !now.is_empty() {
            break now;
        }
        assert!(Instant::now() < deadline, "never started again");
        thread::sleep(Duration::from_millis(50));
    };
    eprintln!("started again: {restarted:?}");
    front.next("the restart's list change", |message| {
        message["method"] == "notifications/tools/list_changed"
    });
    front.tools_with("fx__echo");
    assert_eq!(call(&mut front, 4)["result"]["content"][0]["text"], "hi");
    front.close();
    tag.assert_gone();
}

// A 2025-11-25 client in front of the Python SDK's 2026-07-28 server
// behind `tether serve`: tools, a call, and the server's elicitation (an
// input_required round) asked of the client in front and answered.
#[test]
fn a_handshake_client_reaches_the_python_sdks_stateless_server() {
    let argv = crate::interop_setup::python_server("stdio");
    let mut front = Front::start(json!({"py": {"command": argv[0], "args": argv[1..]}}), &[]);
    front.initialize(json!({"elicitation": {"form": {}}}));
    front.tools_with("py__greet_me");
    let added =
        front.request(2, "tools/call", json!({"name": "py__add", "arguments": {"a": 2, "b": 3}}));
    assert_eq!(added["result"]["content"][0]["text"], "5", "{added}");
    front.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                      "params": {"name": "py__greet_me", "arguments": {}}}));
    let asked = front.next("an elicitation", |message| message["method"] == "elicitation/create");
    assert_eq!(asked["params"]["message"], "What is your name?");
    front.send(json!({"jsonrpc": "2.0", "id": asked["id"].clone(),
                      "result": {"action": "accept", "content": {"name": "Ada"}}}));
    let greeted = front.next("the call's answer", |message| message["id"] == 3);
    assert_eq!(greeted["result"]["content"][0]["text"], "Hello, Ada!", "{greeted}");
    assert_eq!(front.close().0, Some(0));
}

// The Python SDK's Client (which speaks 2026-07-28 first) in front of
// `tether serve`: served statelessly, its results complete and not to be
// cached, the tools listed and called.
#[test]
fn the_python_sdk_client_is_served_statelessly() {
    let python = crate::interop_setup::python_server("stdio").remove(0);
    let tag = Tag::new();
    let dir = config_dir(asking_servers(&tag));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/python/serve_front.py");
    let mut command = Command::new(python);
    command.arg(script).arg(tether_bin()).arg(dir.path()).env("SERVE_FRONT_ASK", "1");
    let (output, _) = crate::support::run_command(command, None, Duration::from_secs(60));
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let seen: Value = serde_json::from_str(out.trim()).unwrap_or_else(|_| panic!("{out}"));
    assert_the_python_sdk_was_served(&seen);
    tag.assert_gone();
}

/// The demo server, and misbehave in each era with a tool that asks its
/// client a question mid-call.
pub fn asking_servers(tag: &Tag) -> Value {
    json!({
        "demo": {"command": crate::support::fixture("demo-server")},
        "modern": misbehave_entry(tag, &["--era", "modern"]),
        "legacy": misbehave_entry(tag, &[]),
    })
}

/// What `fixtures/python/serve_front.py` saw with `asking_servers` behind
/// tether: served in 2026-07-28, each question answered by its callback
/// through an `input_required` round.
pub fn assert_the_python_sdk_was_served(seen: &Value) {
    assert_eq!(seen["protocol"], "2026-07-28", "{seen}");
    assert!(seen["tools"].as_array().unwrap().contains(&json!("demo__count_words")), "{seen}");
    assert_eq!(seen["text"], json!(["3 words, 5 characters"]));
    assert_eq!(seen["structured"], json!({"characters": 5, "words": 3}));
    assert_eq!(seen["modern__ask"], json!(["hello Ada"]), "{seen}");
    let reply = seen["legacy__ask_form"][0].as_str().unwrap_or_else(|| panic!("{seen}"));
    let reply: Value = serde_json::from_str(reply).unwrap();
    assert_eq!(reply["result"]["content"], json!({"name": "Ada", "color": "#f00"}), "{seen}");
    assert_eq!(seen["questions"], json!(["What is your name?", "Tell us about you."]));
}

// A 2026-07-28 client in front hears of list changes only on the
// `subscriptions/listen` stream it opened: acknowledged with what it asked
// for, each change tagged with the stream's id, never answered while open.
#[test]
fn a_stateless_client_hears_list_changes_on_its_listen_stream() {
    let tag = Tag::new();
    let mut front = Front::start(json!({"fx": misbehave_entry(&tag, &[])}), &[]);
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientInfo": {"name": "front", "version": "1"},
                      "io.modelcontextprotocol/clientCapabilities": {}});
    front.request(1, "server/discover", json!({"_meta": meta}));
    front.send(json!({"jsonrpc": "2.0", "id": 2, "method": "subscriptions/listen",
                      "params": {"_meta": meta, "notifications": {"toolsListChanged": true}}}));
    let acknowledged = front.next("the acknowledgement", |message| {
        message["method"] == "notifications/subscriptions/acknowledged"
    });
    assert_eq!(acknowledged["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 2);
    assert_eq!(acknowledged["params"]["notifications"], json!({"toolsListChanged": true}));
    // The server connects: announced on the stream.
    let changed = front
        .next("a list change", |message| message["method"] == "notifications/tools/list_changed");
    assert_eq!(changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 2);
    let listed = front.request(3, "tools/list", json!({"_meta": meta}));
    assert_eq!(listed["result"]["resultType"], "complete");
    assert_eq!(listed["result"]["cacheScope"], "private");
    front.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": 2}}));
    front.request(4, "ping", json!({"_meta": meta}));
    assert!(!front.seen.iter().any(|message| message["id"] == 2), "{:?}", front.seen);
    front.close();
    tag.assert_gone();
}

/// Reads one JSON line from a socket client.
fn read_line(reader: &mut BufReader<std::os::unix::net::UnixStream>) -> Value {
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap_or_else(|err| panic!("{err}: {line:?}"))
}

// Issue 26 (item 9): the library's Unix-socket front, as a host uses it:
// two clients at once, each its own, in both eras; stopped at once.
#[test]
fn a_hub_served_on_a_unix_socket_answers_each_client_and_stops() {
    use std::os::unix::net::{UnixListener, UnixStream};
    use tether::{Config, Downstream, Hub, HubOptions, NameStyle, ServeOptions, ServerConfig};

    let tag = Tag::new();
    let program = crate::support::fixture("misbehave").display().to_string();
    let server = ServerConfig::stdio("fx", &program, &["--tag", &tag.0]);
    let downstream = std::sync::Arc::new(Downstream::new());
    let options =
        HubOptions::default().with_host(downstream.host()).with_name_style(NameStyle::Prefixed);
    let hub = Hub::start(Config::new().with_server(server), options);
    let dir = TempDir::new();
    let socket = dir.path().join("s.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let serving = {
        let (downstream, hub) = (std::sync::Arc::clone(&downstream), hub.clone());
        thread::spawn(move || {
            downstream.serve_unix(&hub, listener, &ServeOptions::default().with_passthrough("fx"))
        })
    };
    let connect = || {
        let stream = UnixStream::connect(&socket).unwrap();
        stream.set_read_timeout(Some(WITHIN)).unwrap();
        (stream.try_clone().unwrap(), BufReader::new(stream))
    };
    let (mut old, mut old_in) = connect();
    let (mut new, mut new_in) = connect();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    writeln!(old, "{initialize}").unwrap();
    assert_eq!(read_line(&mut old_in)["id"], 1);
    // The same id on the other connection: its own answer, statelessly.
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t2", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}});
    let call = |id: i64, text: &str, meta: Option<&Value>| {
        let mut params = json!({"name": "echo", "arguments": {"text": text}});
        if let Some(meta) = meta {
            params["_meta"] = meta.clone();
        }
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
    };
    writeln!(new, "{}", call(1, "new", Some(&meta))).unwrap();
    writeln!(old, "{}", call(2, "old", None)).unwrap();
    let answer = read_line(&mut new_in);
    assert_eq!(answer["id"], 1);
    assert_eq!(answer["result"]["content"][0]["text"], "new", "{answer}");
    let answer = read_line(&mut old_in);
    assert_eq!(answer["result"]["content"][0]["text"], "old", "{answer}");

    let stopping = Instant::now();
    downstream.stop();
    serving.join().unwrap().unwrap();
    assert!(stopping.elapsed() < Duration::from_secs(2), "{:?}", stopping.elapsed());
    // Its clients were let go.
    let mut rest = String::new();
    assert_eq!(old_in.read_line(&mut rest).unwrap_or(0), 0);
    hub.shutdown();
    assert!(tag.live_processes().is_empty());
}

// Issue 25 (item 8): an upstream server that gives up its elicitation has
// it withdrawn from the client in front too, under the id tether asked with.
#[test]
fn a_question_withdrawn_upstream_is_withdrawn_in_front() {
    let tag = Tag::new();
    let servers = json!({"fx": misbehave_entry(&tag, &["--era", "legacy"])});
    let mut front = Front::start(servers, &["fx"]);
    front.initialize(json!({"elicitation": {"form": {}}}));
    front.tools_with("withdraw");
    front.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "withdraw", "arguments": {"ms": 300}}}));
    let asked = front.next("an elicitation", |message| message["method"] == "elicitation/create");
    let withdrawn =
        front.next("its withdrawal", |message| message["method"] == "notifications/cancelled");
    assert_eq!(withdrawn["params"]["requestId"], asked["id"], "{withdrawn}");
    assert_eq!(withdrawn["params"]["reason"], "no longer needed");
    let answered = front.next("the call's answer", |message| message["id"] == 2);
    assert_eq!(answered["result"]["content"][0]["text"], "withdrew withdrawn-1", "{answered}");
    front.close();
}

// A review (issue 24): a `subscriptions/listen` on a handshake session
// turned the session stateless. It is refused, and the session goes on as
// it began: its list changes still reach it unprompted.
#[test]
fn a_listen_on_a_handshake_session_is_refused_and_changes_nothing() {
    let tag = Tag::new();
    let servers = json!({"fx": misbehave_entry(&tag, &["--era", "legacy"])});
    let mut front = Front::start(servers, &["fx"]);
    front.initialize(json!({}));
    front.tools_with("grow");
    let refused = front.request(
        7,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    );
    assert_eq!(refused["error"]["code"], -32601, "{refused}");
    let grown = front.request(8, "tools/call", json!({"name": "grow", "arguments": {"name": "x"}}));
    assert!(grown["result"].is_object(), "{grown}");
    let changed = front
        .next("a list change", |message| message["method"] == "notifications/tools/list_changed");
    assert!(changed["params"].get("_meta").is_none(), "{changed}");
    front.close();
}

// Issue 25 (item 6) through `tether serve`: an upstream's -32042 reaches the
// client in front as the server sent it (its pages listed), and so does the
// server's word that the page is done; a completion of an id the upstream
// never gave out does not.
#[test]
fn a_page_to_open_and_its_completion_pass_through_serve() {
    let tag = Tag::new();
    let servers = json!({"fx": misbehave_entry(&tag, &["--era", "legacy"])});
    let mut front = Front::start(servers, &["fx"]);
    front.initialize(json!({"elicitation": {"url": {}}}));
    front.tools_with("page_gate");
    let refused = front.request(
        2,
        "tools/call",
        json!({"name": "page_gate", "arguments": {"complete_ms": 200}}),
    );
    assert_eq!(refused["error"]["code"], -32042, "{refused}");
    let page = &refused["error"]["data"]["elicitations"][0];
    assert_eq!(page["elicitationId"], "page-1", "{refused}");
    assert_eq!(page["url"], "https://pages.example/open?id=page-1");
    let done = front.next("the completion", |message| {
        message["method"] == "notifications/elicitation/complete"
    });
    assert_eq!(done["params"]["elicitationId"], "page-1", "{done}");
    let answered = front.request(3, "tools/call", json!({"name": "page_gate", "arguments": {}}));
    assert_eq!(answered["result"]["content"][0]["text"], "the page was opened; 1 asked");
    front.close();
}

// Issue 25 (item 3) through `tether serve`: an upstream tool that must run
// as a task is served as a plain tool, and its call answered whole.
#[test]
fn an_upstream_task_is_answered_whole_through_serve() {
    let tag = Tag::new();
    let servers = json!({"fx": misbehave_entry(&tag, &["--tasks"])});
    let mut front = Front::start(servers, &["fx"]);
    front.initialize(json!({}));
    let tools = front.tools_with("task_job");
    let job = tools.iter().find(|tool| tool["name"] == "task_job").unwrap();
    assert!(job["execution"].get("taskSupport").is_none(), "{job}");
    let answered =
        front.request(2, "tools/call", json!({"name": "task_job", "arguments": {"ms": 200}}));
    assert_eq!(answered["result"]["content"][0]["text"], "job done after 200 ms", "{answered}");
    front.close();
}

/// A 2026-07-28 client's `_meta`, declaring `capabilities`.
pub fn stateless_meta(capabilities: Value) -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
           "io.modelcontextprotocol/clientInfo": {"name": "front", "version": "1"},
           "io.modelcontextprotocol/clientCapabilities": capabilities})
}

/// The one question of an `input_required` answer: its key and request.
fn the_question(answer: &Value) -> (String, Value) {
    assert_eq!(answer["result"]["resultType"], "input_required", "{answer}");
    let requests = answer["result"]["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1, "{answer}");
    let (key, request) = requests.iter().next().unwrap();
    (key.clone(), request.clone())
}

// A 2026-07-28 client in front takes no request from tether: an upstream's
// question in the middle of a call reaches it as an `input_required`
// answer, and its retry (a new id, the `requestState`, the answer) gets
// the call's result. Both upstream eras: a stateless upstream asks on the
// call's own thread, a handshake-era one on its connection's.
#[test]
fn a_stateless_client_answers_upstream_questions_in_input_required_rounds() {
    let tag = Tag::new();
    let servers = json!({
        "modern": misbehave_entry(&tag, &["--era", "modern"]),
        "legacy": misbehave_entry(&tag, &[]),
    });
    let mut front = Front::start(servers, &[]);
    let meta = stateless_meta(json!({"elicitation": {}}));
    front.request(1, "server/discover", json!({"_meta": meta}));
    front.tools_with("legacy__ask_form");
    front.tools_with("modern__ask");

    let asked = front.request(
        10,
        "tools/call",
        json!({"name": "modern__ask", "arguments": {}, "_meta": meta}),
    );
    let (key, question) = the_question(&asked);
    assert_eq!(question["method"], "elicitation/create");
    assert_eq!(question["params"]["message"], "What is your name?");
    let state = asked["result"]["requestState"].as_str().unwrap().to_owned();
    assert!(state.len() >= 32, "an unguessable token: {state}");

    // A token tether never gave, and the right one on another tool: refused.
    let forged = front.request(
        11,
        "tools/call",
        json!({"name": "modern__ask", "arguments": {}, "_meta": meta,
               "requestState": "0123456789abcdef0123456789abcdef"}),
    );
    assert_eq!(forged["error"]["code"], -32602, "{forged}");
    let misused = front.request(
        12,
        "tools/call",
        json!({"name": "modern__echo", "arguments": {"text": "x"}, "_meta": meta,
               "requestState": state}),
    );
    assert_eq!(misused["error"]["code"], -32602, "{misused}");

    let answered = front.request(
        13,
        "tools/call",
        json!({"name": "modern__ask", "arguments": {}, "_meta": meta, "requestState": state,
               "inputResponses": {key: {"action": "accept", "content": {"name": "Ada"}}}}),
    );
    assert_eq!(answered["result"]["content"][0]["text"], "hello Ada", "{answered}");
    assert_eq!(answered["result"]["resultType"], "complete");
    // The first request was answered once, with the question.
    assert!(!front.seen.iter().any(|message| message["id"] == 10), "{:?}", front.seen);

    // A handshake-era upstream sends its question as a request of its own.
    let asked = front.request(
        20,
        "tools/call",
        json!({"name": "legacy__ask_form", "arguments": {}, "_meta": meta}),
    );
    let (key, question) = the_question(&asked);
    assert_eq!(question["params"]["message"], "Tell us about you.", "{question}");
    let state = asked["result"]["requestState"].clone();
    // A retry without the answer is asked again.
    let again = front.request(
        21,
        "tools/call",
        json!({"name": "legacy__ask_form", "arguments": {}, "_meta": meta, "requestState": state}),
    );
    let (same_key, _) = the_question(&again);
    assert_eq!(same_key, key);
    let content = json!({"name": "Ada", "color": "#f00"});
    let answered = front.request(
        22,
        "tools/call",
        json!({"name": "legacy__ask_form", "arguments": {}, "_meta": meta, "requestState": state,
               "inputResponses": {key: {"action": "accept", "content": content}}}),
    );
    let text = answered["result"]["content"][0]["text"].as_str().unwrap_or_else(|| {
        panic!("{answered}");
    });
    let reply: Value = serde_json::from_str(text).unwrap();
    assert_eq!(reply["result"]["content"], content, "{reply}");

    // A client that declared no elicitation is never asked one.
    let bare = stateless_meta(json!({}));
    let refused = front.request(
        30,
        "tools/call",
        json!({"name": "modern__ask", "arguments": {}, "_meta": bare}),
    );
    assert!(refused.get("error").is_some() || refused["result"]["isError"] == true, "{refused}");
    front.close();
    tag.assert_gone();
}

// A request that comes alone is answered on the thread that read it; the
// other reading thread takes over the input when that answer takes long:
// a ping sent during a slow call is answered at once, and the end of stdin
// during it still ends everything within half a second.
#[test]
fn a_slow_call_answered_alone_holds_up_nothing_else() {
    let tag = Tag::new();
    let mut front = Front::start(json!({"fx": misbehave_entry(&tag, &[])}), &[]);
    front.initialize(json!({}));
    front.tools_with("fx__sleep");
    for round in 0..3 {
        let slow = 100 + round;
        front.send(json!({"jsonrpc": "2.0", "id": slow, "method": "tools/call",
                          "params": {"name": "fx__sleep", "arguments": {"ms": 1500}}}));
        thread::sleep(Duration::from_millis(50));
        let asked = Instant::now();
        let pinged = front.request(200 + round, "ping", json!({}));
        let took = asked.elapsed();
        assert_eq!(pinged["result"], json!({}));
        assert!(took < Duration::from_millis(300), "ping answered {took:?} into a slow call");
        let done = front.next("the slow call's answer", |message| message["id"] == slow);
        assert!(done.get("result").is_some(), "{done}");
    }
    front.send(json!({"jsonrpc": "2.0", "id": 300, "method": "tools/call",
                      "params": {"name": "fx__sleep", "arguments": {"ms": 30000}}}));
    thread::sleep(Duration::from_millis(100));
    let (code, took) = front.close();
    assert_eq!(code, Some(0));
    assert!(took < Duration::from_millis(500), "exit took {took:?} during a call");
    tag.assert_gone();
}

// A tool's result, and a resource read's, reach a handshake client in
// front as the server wrote them: never parsed past the envelope, so
// spaces, escapes and a number written 1.50 come through byte for byte (a
// parse and a write would have changed all three). A 2026-07-28 client's
// results are written anew, as they gain `resultType`.
#[test]
fn a_tool_result_passes_through_serve_as_the_server_wrote_it() {
    let tag = Tag::new();
    let mut front = Front::start(json!({"fx": misbehave_entry(&tag, &["--resources"])}), &[]);
    front.initialize(json!({}));
    front.tools_with("fx__verbatim");
    let answered = front.request(5, "tools/call", json!({"name": "fx__verbatim", "arguments": {}}));
    assert_eq!(answered["result"]["content"][0]["text"], "café ☃ /", "{answered}");
    let line = front.raw.lock().unwrap().iter().find(|line| line.contains("\"id\":5")).cloned();
    let expected = r#"{"jsonrpc":"2.0","id":5,"result":{ "content" : [ {"type": "text", "text": "caf\u00e9 \u2603 \/"} ], "isError": false, "n": 1.50 }}"#;
    assert_eq!(line.as_deref(), Some(expected));
    // Big results pass whole too.
    let big = front.request(
        6,
        "tools/call",
        json!({"name": "fx__huge", "arguments": {"bytes": 3_000_000}}),
    );
    assert_eq!(big["result"]["content"][0]["text"].as_str().map(str::len), Some(3_000_000));

    // A resource read passes so too.
    let read = front.request(8, "resources/read", json!({"uri": "test://verbatim"}));
    assert_eq!(read["result"]["contents"][0]["text"], "café /", "{read}");
    let line = front.raw.lock().unwrap().iter().find(|line| line.contains("\"id\":8")).cloned();
    let expected = r#"{"jsonrpc":"2.0","id":8,"result":{ "contents" : [ {"uri": "test://verbatim", "text": "caf\u00e9 \/"} ], "n": 1.50 }}"#;
    assert_eq!(line.as_deref(), Some(expected));
    let meta = stateless_meta(json!({}));
    let modern = front.request(
        7,
        "tools/call",
        json!({"name": "fx__verbatim", "arguments": {}, "_meta": meta}),
    );
    assert_eq!(modern["result"]["resultType"], "complete", "{modern}");
    assert_eq!(modern["result"]["n"], 1.5);

    let modern = front.request(
        9,
        "resources/read",
        json!({"uri": "test://verbatim", "_meta": stateless_meta(json!({}))}),
    );
    assert_eq!(modern["result"]["resultType"], "complete", "{modern}");
    assert_eq!(modern["result"]["contents"][0]["text"], "café /", "{modern}");
    front.close();
    tag.assert_gone();
}

// A handshake-era server's question names no call: with two calls of
// stateless clients to it under way, tether cannot tell whose it is and
// refuses it rather than show one client another's question. And a call
// waiting for its client's answer is given up when the client goes: the
// end of stdin still ends everything at once.
#[test]
fn round_questions_go_to_their_own_call_and_end_with_the_client() {
    let tag = Tag::new();
    let servers = json!({
        "modern": misbehave_entry(&tag, &["--era", "modern"]),
        "legacy": misbehave_entry(&tag, &[]),
    });
    let mut front = Front::start(servers, &[]);
    let meta = stateless_meta(json!({"elicitation": {}}));
    front.request(1, "server/discover", json!({"_meta": meta}));
    front.tools_with("legacy__ask_form");
    front.tools_with("modern__ask");
    let call = |name: &str| json!({"name": name, "arguments": {}, "_meta": meta});

    // Another call to the same server under way when it asks.
    let mut slow = call("legacy__sleep");
    slow["arguments"] = json!({"ms": 1500});
    front.send(json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": slow}));
    thread::sleep(Duration::from_millis(200));
    let asking = front.request(11, "tools/call", call("legacy__ask_form"));
    let refused = asking["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(refused.contains("several calls to legacy"), "{asking}");
    let slept = front.next("the slow call's answer", |message| message["id"] == 10);
    assert_eq!(slept["result"]["resultType"], "complete", "{slept}");
    // Alone, the same call is asked.
    let asked = front.request(12, "tools/call", call("legacy__ask_form"));
    the_question(&asked);

    let parked = front.request(20, "tools/call", call("modern__ask"));
    the_question(&parked);
    let (code, took) = front.close();
    assert_eq!(code, Some(0));
    assert!(took < Duration::from_millis(500), "exit took {took:?} with a call parked");
    tag.assert_gone();
}

pub fn tool_call(id: i64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": arguments}})
}

/// The notifications the misbehave server `fx` got from tether.
fn upstream_notifications(front: &mut Front, id: i64) -> Vec<Value> {
    let heard = front.request(id, "tools/call", json!({"name": "fx__client_notifications"}));
    let text = heard["result"]["content"][0]["text"].as_str().unwrap_or_default();
    serde_json::from_str(text).unwrap_or_else(|_| panic!("{heard}"))
}

// Calls that come together are passed on with no thread waiting for each
// (flights, answered by the thread that reads the server): each answer to
// its own request, a result byte for byte, progress under the client's
// own token keeping a call past its timeout, a cancellation (the server is
// told, nothing is answered), a timeout (answered as one, the server
// told); and the end of stdin with calls under way ends everything at once.
#[test]
fn calls_that_come_together_are_answered_cancelled_and_timed_out() {
    let tag = Tag::new();
    let mut entry = misbehave_entry(&tag, &[]);
    entry["timeout"] = json!(1.0);
    let mut front = Front::start(json!({"fx": entry}), &[]);
    front.initialize(json!({}));
    front.tools_with("fx__echo");
    let mut batch: Vec<Value> =
        (0..10).map(|i| tool_call(10 + i, "fx__echo", json!({"text": format!("n{i}")}))).collect();
    batch.push(json!({"jsonrpc": "2.0", "id": 30, "method": "tools/call",
                      "params": {"name": "fx__progress", "arguments": {"steps": 4, "interval_ms": 400},
                                 "_meta": {"progressToken": "mine"}}}));
    batch.push(tool_call(31, "fx__sleep", json!({"ms": 30000})));
    batch.push(tool_call(32, "fx__sleep", json!({"ms": 30000})));
    batch.push(tool_call(33, "fx__verbatim", json!({})));
    let sent = Instant::now();
    front.send_together(&batch);
    front.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": 31, "reason": "changed my mind"}}));
    for i in 0..10 {
        let echoed = front.next("an echo", |message| message["id"] == json!(10 + i));
        assert_eq!(echoed["result"]["content"][0]["text"], format!("n{i}"), "{echoed}");
    }
    front.next("the verbatim result", |message| message["id"] == 33);
    let line = front.raw.lock().unwrap().iter().find(|line| line.contains("\"id\":33")).cloned();
    let expected = r#"{"jsonrpc":"2.0","id":33,"result":{ "content" : [ {"type": "text", "text": "caf\u00e9 \u2603 \/"} ], "isError": false, "n": 1.50 }}"#;
    assert_eq!(line.as_deref(), Some(expected));

    // Its time (1 s) ran out: answered as a timeout, the server told.
    let timed_out = front.next("the timeout", |message| message["id"] == 32);
    let took = sent.elapsed();
    let message = timed_out["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("timed out") && message.contains("fx"), "{timed_out}");
    assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(5), "{took:?}");

    // Progress every 0.4 s kept this one going for 1.6 s.
    let progressed = front.next("the progress call", |message| message["id"] == 30);
    assert!(progressed.get("result").is_some(), "{progressed}");
    let updates: Vec<&Value> =
        front.seen.iter().filter(|message| message["method"] == "notifications/progress").collect();
    assert_eq!(updates.len(), 4, "{:?}", front.seen);
    assert!(updates.iter().all(|update| update["params"]["progressToken"] == "mine"));

    thread::sleep(Duration::from_millis(200));
    assert!(!front.seen.iter().any(|message| message["id"] == 31), "{:?}", front.seen);
    let heard = upstream_notifications(&mut front, 40);
    let reasons: Vec<&str> = heard
        .iter()
        .filter(|message| message["method"] == "notifications/cancelled")
        .filter_map(|message| message["params"]["reason"].as_str())
        .collect();
    assert!(reasons.contains(&"cancelled by the client"), "{heard:?}");
    assert!(reasons.contains(&"timed out"), "{heard:?}");

    // A 2026-07-28 client's calls that come together are its own: each
    // result says it is complete.
    let meta = stateless_meta(json!({}));
    let modern: Vec<Value> = (60..63)
        .map(|id| {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": "fx__echo", "arguments": {"text": "new"}, "_meta": meta}})
        })
        .collect();
    front.send_together(&modern);
    for id in 60..63 {
        let answered = front.next("a stateless call", |message| message["id"] == id);
        assert_eq!(answered["result"]["resultType"], "complete", "{answered}");
    }

    // Calls under way when stdin ends: given up, and out within 500 ms.
    let sleeps: Vec<Value> =
        (50..53).map(|id| tool_call(id, "fx__sleep", json!({"ms": 30000}))).collect();
    front.send_together(&sleeps);
    thread::sleep(Duration::from_millis(200));
    let (code, took) = front.close();
    assert_eq!(code, Some(0));
    assert!(took < Duration::from_millis(500), "exit took {took:?} with calls under way");
    tag.assert_gone();
}

// A server that crashes with calls under way that came together: each is
// answered with the server's failure (its stderr's last words included),
// never left without an answer; the server is started again.
#[test]
fn calls_under_way_when_their_server_crashes_are_answered_with_its_failure() {
    let tag = Tag::new();
    let entry = misbehave_entry(&tag, &["--crash-on-call", "3"]);
    let mut front = Front::start(json!({"fx": entry}), &[]);
    front.initialize(json!({}));
    front.tools_with("fx__echo");
    front.send_together(&[
        tool_call(10, "fx__sleep", json!({"ms": 30000})),
        tool_call(11, "fx__sleep", json!({"ms": 30000})),
        tool_call(12, "fx__echo", json!({"text": "the third"})),
    ]);
    for id in 10..13 {
        let failed = front.next("a failed call", |message| message["id"] == id);
        assert_eq!(failed["error"]["data"]["serverFailed"], true, "{failed}");
        let message = failed["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("fx"), "{failed}");
        if id == 12 {
            let stderr = failed["error"]["data"]["stderr"].to_string();
            assert!(stderr.contains("crashing now"), "{failed}");
        }
    }
    // Started again: a call works.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut id = 100;
    loop {
        id += 1;
        let echoed = front.request(
            id,
            "tools/call",
            json!({"name": "fx__echo", "arguments": {"text": "again"}}),
        );
        if echoed["result"]["content"][0]["text"] == "again" {
            break;
        }
        assert!(Instant::now() < deadline, "never started again: {echoed}");
        thread::sleep(Duration::from_millis(200));
    }
    front.close();
    tag.assert_gone();
}

// A 2026-07-28 client in front asks for the log messages of one request
// (`_meta` logLevel): they come before that request's answer, at its level
// or above, whichever era the server behind speaks; a request that does not
// ask hears none (MCP forbids them), and a level MCP does not name is
// refused. A cold trial saw none reach a stateless client at all.
#[test]
fn a_stateless_client_hears_the_log_of_its_own_request() {
    let tag = Tag::new();
    let servers = json!({"fx": misbehave_entry(&tag, &["--logging"]),
                         "md": misbehave_entry(&tag, &["--era", "modern"])});
    let mut front = Front::start(servers, &[]);
    front.tools_with("md__logs");
    front.tools_with("fx__logs");
    let asking = |level: &str| {
        let mut meta = stateless_meta(json!({}));
        meta["io.modelcontextprotocol/logLevel"] = json!(level);
        meta
    };
    let mut id = 10;
    for (tool, level, wanted) in [
        // The handshake server logs info and up (the level tether set).
        ("fx__logs", "info", vec!["info", "warning"]),
        ("fx__logs", "warning", vec!["warning"]),
        // Asked below it, tether lowers the server's level first.
        ("fx__logs", "debug", vec!["debug", "info", "warning"]),
        ("fx__logs", "info", vec!["info", "warning"]),
        ("md__logs", "debug", vec!["debug", "info", "warning"]),
        ("md__logs", "warning", vec!["warning"]),
    ] {
        id += 1;
        let data = format!("{tool}-{level}-{id}");
        let answer = front.request(
            id,
            "tools/call",
            json!({"name": tool, "arguments": {"tag": data}, "_meta": asking(level)}),
        );
        assert_eq!(answer["result"]["content"][0]["text"], "logged", "{answer}");
        // Everything of this call's came before its answer.
        let lines = front.raw.lock().unwrap().clone();
        let answered_at = lines
            .iter()
            .position(|line| {
                line.contains(&format!("\"id\":{id},")) || line.contains(&format!("\"id\":{id}}}"))
            })
            .unwrap();
        let heard: Vec<Value> = lines
            .iter()
            .filter(|line| line.contains(&data))
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        let levels: Vec<&str> =
            heard.iter().filter_map(|m| m["params"]["level"].as_str()).collect();
        assert_eq!(levels, wanted, "{tool} at {level}: {heard:?}");
        for message in &heard {
            assert_eq!(message["method"], "notifications/message", "{message}");
            assert_eq!(message["params"]["logger"], "misbehave", "{message}");
        }
        let last = lines.iter().rposition(|line| line.contains(&data)).unwrap();
        assert!(last < answered_at, "a log message came after the answer: {lines:?}");
    }
    // Not asked: nothing, from either server.
    for tool in ["fx__logs", "md__logs"] {
        id += 1;
        let call = json!({"name": tool, "arguments": {"tag": "unasked"},
                          "_meta": stateless_meta(json!({}))});
        let answer = front.request(id, "tools/call", call);
        assert_eq!(answer["result"]["content"][0]["text"], "logged", "{answer}");
    }
    thread::sleep(Duration::from_millis(200));
    let unasked = front.raw.lock().unwrap().iter().filter(|line| line.contains("unasked")).count();
    assert_eq!(unasked, 0, "{:?}", front.raw.lock().unwrap());
    let refused = front.request(
        99,
        "tools/call",
        json!({"name": "md__logs", "arguments": {}, "_meta": asking("loud")}),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    front.close();
    tag.assert_gone();
}

// A client that sent `initialize` hears every server's log messages, at the
// level it set (`logging/setLevel`) or above, those about its own call
// before the call's answer; a level MCP does not name is refused. Before,
// tether answered the level and sent every message, often after the answer.
#[test]
fn a_handshake_client_hears_logs_at_the_level_it_set() {
    let tag = Tag::new();
    let mut front = Front::start(json!({"fx": misbehave_entry(&tag, &["--logging"])}), &[]);
    front.initialize(json!({}));
    front.tools_with("fx__logs");
    let set = front.request(2, "logging/setLevel", json!({"level": "warning"}));
    assert_eq!(set["result"], json!({}), "{set}");
    let answer =
        front.request(3, "tools/call", json!({"name": "fx__logs", "arguments": {"tag": "w"}}));
    assert_eq!(answer["result"]["content"][0]["text"], "logged", "{answer}");
    let warned = front.next("the warning", |message| message["params"]["data"] == "w warning");
    assert_eq!(warned["method"], "notifications/message", "{warned}");
    // The info message would have come before it, on the same thread.
    assert!(!front.raw.lock().unwrap().iter().any(|line| line.contains("w info")));
    let set = front.request(4, "logging/setLevel", json!({"level": "info"}));
    assert_eq!(set["result"], json!({}), "{set}");
    front.request(5, "tools/call", json!({"name": "fx__logs", "arguments": {"tag": "i"}}));
    // Those about its own call come before the call's answer.
    let lines = front.raw.lock().unwrap().clone();
    let at = |text: &str| lines.iter().position(|line| line.contains(text));
    let answered = at("\"id\":5,").unwrap();
    assert!(at("i info").unwrap() < answered && at("i warning").unwrap() < answered, "{lines:?}");
    let refused = front.request(6, "logging/setLevel", json!({"level": "loud"}));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    // Calls that come together fly (no thread waits for them): theirs come
    // before their answers too, each at the level set. They had gone the
    // way of any other message, and often came after the answer.
    let calls: Vec<Value> =
        (10..30).map(|id| tool_call(id, "fx__logs", json!({"tag": format!("f{id}")}))).collect();
    front.send_together(&calls);
    for id in 10..30 {
        front.next("a flight's answer", |message| message["id"] == id);
    }
    let lines = front.raw.lock().unwrap().clone();
    let at = |text: &str| lines.iter().position(|line| line.contains(text));
    for id in 10..30 {
        let answered = at(&format!("\"id\":{id},")).unwrap();
        let (info, warning) = (at(&format!("f{id} info")), at(&format!("f{id} warning")));
        assert!(info.unwrap() < answered && warning.unwrap() < answered, "{id}: {lines:?}");
        assert!(at(&format!("f{id} debug")).is_none(), "{lines:?}");
    }
    front.close();
    tag.assert_gone();
}

// A 2026-07-28 request names a revision tether speaks and declares the
// client's capabilities, or is refused as the revision says (-32022 naming
// the one spoken, -32602); each result names tether as its server, not
// the server behind whose result it passes on (a cold trial saw
// `misbehave`'s name there).
#[test]
fn a_stateless_request_is_checked_and_answered_as_tethers() {
    let tag = Tag::new();
    let mut front = Front::start(json!({"md": misbehave_entry(&tag, &["--era", "modern"])}), &[]);
    front.tools_with("md__echo");
    let call =
        |meta: Value| json!({"name": "md__echo", "arguments": {"text": "hi"}, "_meta": meta});
    let answer = front.request(2, "tools/call", call(stateless_meta(json!({}))));
    assert_eq!(answer["result"]["content"][0]["text"], "hi", "{answer}");
    let server = &answer["result"]["_meta"]["io.modelcontextprotocol/serverInfo"];
    assert_eq!(server["name"], "tether", "{answer}");
    let future = json!({"io.modelcontextprotocol/protocolVersion": "2099-01-01",
                        "io.modelcontextprotocol/clientCapabilities": {}});
    let refused = front.request(3, "tools/call", call(future));
    assert_eq!(refused["error"]["code"], -32022, "{refused}");
    assert_eq!(refused["error"]["data"]["supported"], json!(["2026-07-28"]), "{refused}");
    let bare = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"});
    let refused = front.request(4, "tools/call", call(bare));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    front.close();
    tag.assert_gone();
}
