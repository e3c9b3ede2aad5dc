//! `tether serve --http` (issue 24): a real `tether` process serving
//! Streamable HTTP on 127.0.0.1, spoken to over real sockets by the
//! TypeScript and Python SDKs' clients and by requests written here.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{config_dir, misbehave_entry, tether_bin, wait_exit, Tag, TempDir};

/// `tether serve --http 0`, with the address and token it printed.
struct HttpServe {
    child: Child,
    /// `127.0.0.1:PORT`.
    address: String,
    url: String,
    token: String,
    _dir: TempDir,
}

impl HttpServe {
    fn start(servers: Value, args: &[&str]) -> HttpServe {
        let mut words = vec!["serve", "--http", "0"];
        words.extend_from_slice(args);
        HttpServe::start_with(servers, &words)
    }

    /// `tether --config-dir DIR WORDS…`, which must serve over HTTP.
    fn start_with(servers: Value, words: &[&str]) -> HttpServe {
        let dir = config_dir(servers);
        let mut child = Command::new(tether_bin())
            .arg("--config-dir")
            .arg(dir.path())
            .args(words)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (sender, lines) = crossbeam_channel::unbounded();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = sender.send(line);
            }
        });
        let (mut url, mut token) = (String::new(), String::new());
        let deadline = Instant::now() + Duration::from_secs(20);
        while url.is_empty() || token.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = lines.recv_timeout(left) else {
                child.kill().ok();
                child.wait().ok();
                panic!("tether serve --http said no address and token");
            };
            if let Some(rest) = line.strip_prefix("tether: serving MCP at ") {
                url = rest.trim().to_owned();
            }
            if let Some((_, rest)) = line.split_once("TOKEN\"): ") {
                token = rest.trim().to_owned();
            }
        }
        let address = url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
        HttpServe { child, address, url, token, _dir: dir }
    }

    /// One request on its own connection: the status, the head, the body.
    fn exchange(&self, head: &str, body: &[u8]) -> (u16, String, String) {
        let mut stream = TcpStream::connect(&self.address).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut request = head.replace("{address}", &self.address).replace("{token}", &self.token);
        request.push_str(&format!("Content-Length: {}\r\nConnection: close\r\n\r\n", body.len()));
        stream.write_all(request.as_bytes()).unwrap();
        let _ = stream.write_all(body);
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        let answer = String::from_utf8_lossy(&answer).into_owned();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        let status = head.split(' ').nth(1).and_then(|code| code.parse().ok()).unwrap_or(0);
        (status, head.to_owned(), body.to_owned())
    }

    /// A POST of `message` with the token (and `extra` header lines); a
    /// 2026-07-28 request (`extra` names the version) also mirrors its
    /// method and name into headers, as the revision asks.
    fn post(&self, message: &Value, extra: &str) -> (u16, String, String) {
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {{address}}\r\nAuthorization: Bearer {{token}}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{extra}{}",
            mirrored(message, extra)
        );
        self.exchange(&head, message.to_string().as_bytes())
    }

    /// A session begun (`initialize`, then `initialized`): its header line.
    fn session(&self) -> String {
        let (status, head, _) = self.post(&initialize(), "");
        assert_eq!(status, 200, "{head}");
        let session = format!("Mcp-Session-Id: {}\r\n", session_of(&head));
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert_eq!(self.post(&initialized, &session).0, 202);
        session
    }

    /// SIGTERM, and how long the exit took.
    fn stop(mut self) -> (Option<i32>, Duration) {
        let began = Instant::now();
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let code = wait_exit(&mut self.child, Duration::from_secs(10));
        (code, began.elapsed())
    }
}

impl Drop for HttpServe {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

/// The `Mcp-Method` and `Mcp-Name` header lines of a 2026-07-28 request
/// (when `extra` says that revision); none otherwise.
fn mirrored(message: &Value, extra: &str) -> String {
    let Some(method) = message["method"].as_str().filter(|_| extra.contains("2026-07-28")) else {
        return String::new();
    };
    let mut lines = format!("Mcp-Method: {method}\r\n");
    let name = message["params"]["name"].as_str().or(message["params"]["uri"].as_str());
    if let Some(name) = name.filter(|_| message["id"].is_number() || message["id"].is_string()) {
        lines.push_str(&format!("Mcp-Name: {name}\r\n"));
    }
    lines
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
           "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                      "clientInfo": {"name": "raw", "version": "1"}}})
}

fn session_of(head: &str) -> String {
    head.lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id").then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session in {head}"))
}

// What guards the port: the bearer token, Host and Origin (DNS
// rebinding), the path, sessions, batches and the size of a body; each
// refused with its status before anything reaches a server. Then a
// session's call, its end, and SIGTERM: no process left.
#[test]
fn the_http_front_guards_its_port_and_serves_a_session() {
    let tag = Tag::new();
    let serve = HttpServe::start(json!({"fx": misbehave_entry(&tag, &[])}), &[]);
    let body = initialize().to_string();
    let init = body.as_bytes();
    let plain = "POST /mcp HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n";
    assert_eq!(serve.exchange(plain, init).0, 401, "no token");
    let wrong = format!("{plain}Authorization: Bearer x{{token}}\r\n");
    let refused = serve.exchange(&wrong, init);
    assert_eq!(refused.0, 401, "a wrong token");
    assert!(refused.2.contains("not this serving's"), "{refused:?}");
    let evil_origin = serve.post(&initialize(), "Origin: http://evil.example\r\n");
    assert_eq!(evil_origin.0, 403, "{evil_origin:?}");
    let rebinding = "POST /mcp HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Bearer {token}\r\n";
    assert_eq!(serve.exchange(rebinding, init).0, 403, "a foreign Host");
    let elsewhere = "POST /other HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\n";
    assert_eq!(serve.exchange(elsewhere, init).0, 404);
    let huge = format!(
        "POST /mcp HTTP/1.1\r\nHost: {{address}}\r\nAuthorization: Bearer {{token}}\r\n\
         Content-Length: {}\r\n",
        64 * 1024 * 1024
    );
    let (status, _, _) = serve.exchange(&huge, b"");
    assert_eq!(status, 413, "a body past the limit is refused before it is read");
    // A client that sends the whole body before it reads reads the 413
    // too, not a reset: the rest of the body is read and dropped.
    let body = vec![b' '; 5 * 1024 * 1024];
    let sent_whole = "POST /mcp HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\n";
    for _ in 0..3 {
        assert_eq!(serve.exchange(sent_whole, &body).0, 413, "a body sent whole");
    }
    let batch = serve.post(&json!([initialize()]), "");
    assert_eq!(batch.0, 400, "{batch:?}");
    let tools = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    assert_eq!(serve.post(&tools, "").0, 400, "no session");
    let unknown = serve.post(&tools, "Mcp-Session-Id: nope\r\n");
    assert_eq!(unknown.0, 404, "an unknown session");
    // The refusal answers the request it read.
    let refused: Value = serde_json::from_str(&unknown.2).unwrap();
    assert_eq!(refused["id"], 2, "{refused}");
    let get = "GET /mcp HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\n\
               Accept: text/event-stream\r\nMcp-Session-Id: nope\r\n";
    assert_eq!(serve.exchange(get, b"").0, 404);

    // A session: initialize, a call answered as an event stream, its end.
    let (status, head, answer) = serve.post(&initialize(), "Origin: http://localhost:3000\r\n");
    assert_eq!(status, 200, "{head}\n{answer}");
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer["result"]["serverInfo"]["name"], "tether");
    let session = format!("Mcp-Session-Id: {}\r\n", session_of(&head));
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(serve.post(&initialized, &session).0, 202);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, _, listed) = serve.post(&tools, &session);
        if listed.contains("fx__echo") {
            break;
        }
        assert!(Instant::now() < deadline, "no fx__echo: {listed}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                      "params": {"name": "fx__echo", "arguments": {"text": "over http"}}});
    let (status, head, events) = serve.post(&call, &session);
    assert_eq!(status, 200);
    assert!(head.contains("text/event-stream"), "{head}");
    let data = events.lines().find_map(|line| line.strip_prefix("data: ")).unwrap();
    let answered: Value = serde_json::from_str(data).unwrap();
    assert_eq!(answered["result"]["content"][0]["text"], "over http", "{events}");
    let delete = format!(
        "DELETE /mcp HTTP/1.1\r\nHost: {{address}}\r\nAuthorization: Bearer {{token}}\r\n{session}"
    );
    assert_eq!(serve.exchange(&delete, b"").0, 200);
    assert_eq!(serve.post(&tools, &session).0, 404, "the ended session is gone");

    let (code, took) = serve.stop();
    assert_eq!(code, Some(128 + libc::SIGTERM), "exit code");
    assert!(took < Duration::from_millis(500), "exit took {took:?}");
    tag.assert_gone();
}

// At most 32 sessions live at once: the 33rd `initialize` is refused (503)
// while every session is fresh, and the port is still served after. Once
// these, never `initialized`, have been idle 10 s, a new one takes the
// place of the one idle longest, whose client is told 404 (a cold trial's
// 32 clients that never ended their sessions had locked every other out
// for 5 minutes).
#[test]
fn sessions_are_bounded() {
    let serve = HttpServe::start(json!({}), &[]);
    let began = Instant::now();
    let mut first = String::new();
    for n in 0..32 {
        let (status, head, _) = serve.post(&initialize(), "");
        assert_eq!(status, 200, "session {n}: {head}");
        if n == 0 {
            first = format!("Mcp-Session-Id: {}\r\n", session_of(&head));
        }
    }
    let (status, _, body) = serve.post(&initialize(), "");
    assert_eq!(status, 503, "{body}");
    std::thread::sleep(Duration::from_millis(10_300).saturating_sub(began.elapsed()));
    let (status, head, _) = serve.post(&initialize(), "");
    assert_eq!(status, 200, "a session idle 10 s gave its place: {head}");
    let ping = json!({"jsonrpc": "2.0", "id": 5, "method": "ping"});
    assert_eq!(serve.post(&ping, &first).0, 404, "the idlest session ended");
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}});
    let list = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list",
                      "params": {"_meta": meta}});
    let (status, _, body) = serve.post(&list, "MCP-Protocol-Version: 2026-07-28\r\n");
    assert_eq!(status, 200, "a stateless request needs no session: {body}");
    // A method 2026-07-28 does not have is 404 and -32601, as the revision
    // says, and so is one tether does not serve.
    for method in ["ping", "no/such"] {
        let asked =
            json!({"jsonrpc": "2.0", "id": 10, "method": method, "params": {"_meta": meta}});
        let (status, head, body) = serve.post(&asked, "MCP-Protocol-Version: 2026-07-28\r\n");
        assert_eq!(status, 404, "{method}: {head}{body}");
        let refused: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(refused["error"]["code"], -32601, "{body}");
    }
    serve.stop();
}

// The TypeScript SDK's Client over Streamable HTTP in front of `tether
// serve --http`, with server-everything behind it: tools, a call with
// progress, cancellation, sampling and elicitation answered by the client
// (asked on the call's own stream), resources and prompts.
#[test]
fn the_typescript_sdk_reaches_server_everything_over_http() {
    let argv = crate::interop_setup::everything_server();
    let serve =
        HttpServe::start(json!({"everything": {"command": argv[0], "args": argv[1..]}}), &[]);
    let out = crate::interop_setup::node_script(
        "serve-front.mjs",
        &["--url", &serve.url, &serve.token],
        Duration::from_secs(120),
    );
    crate::serve::assert_the_sdk_saw_everything(&out, "HTTP");
    let (code, took) = serve.stop();
    assert_eq!(code, Some(128 + libc::SIGTERM));
    assert!(took < Duration::from_millis(500), "exit took {took:?}");
}

// The Python SDK's Client (2026-07-28 first) over Streamable HTTP: served
// without a session, statelessly; upstream questions reach it as
// `input_required` rounds, each retry on a connection of its own.
#[test]
fn the_python_sdk_client_is_served_over_http() {
    let python = crate::interop_setup::python_server("stdio").remove(0);
    let tag = Tag::new();
    let serve = HttpServe::start(crate::serve::asking_servers(&tag), &[]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/python/serve_front.py");
    let mut command = Command::new(python);
    command.arg(script).args(["--url", &serve.url, &serve.token]).env("SERVE_FRONT_ASK", "1");
    let (output, _) = crate::support::run_command(command, None, Duration::from_secs(60));
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let seen: Value = serde_json::from_str(out.trim()).unwrap_or_else(|_| panic!("{out}"));
    crate::serve::assert_the_python_sdk_was_served(&seen);
    serve.stop();
    tag.assert_gone();
}

// `tether proxy URL --http 0`: a remote server (the http-server fixture)
// served again over Streamable HTTP, with its own names.
#[test]
fn tether_proxy_serves_a_remote_server_over_http_too() {
    let tag = Tag::new();
    let (mut upstream, url) = crate::support::start_url_fixture("http-server", &tag, &[]);
    let serve = HttpServe::start_with(json!({}), &["proxy", &url, "--http", "0"]);
    let (status, head, _) = serve.post(&initialize(), "");
    assert_eq!(status, 200, "{head}");
    let session = format!("Mcp-Session-Id: {}\r\n", session_of(&head));
    let tools = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let (_, _, listed) = serve.post(&tools, &session);
    assert!(listed.contains("\"echo\""), "{listed}");
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                      "params": {"name": "echo", "arguments": {"text": "through two"}}});
    let (_, _, events) = serve.post(&call, &session);
    assert!(events.contains("through two"), "{events}");
    serve.stop();
    drop(upstream.stdin.take());
    let _ = upstream.wait();
    tag.assert_gone();
}

// A 2026-07-28 client cancels by closing its request's stream. Its close
// was found only when the answer (or a keep-alive 15 s later) was written,
// so the server behind never heard; now within a tick (0.5 s).
#[test]
fn a_stateless_client_that_closes_its_stream_cancels_its_call() {
    let tag = Tag::new();
    let serve = HttpServe::start(json!({"fx": misbehave_entry(&tag, &[])}), &[]);
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}});
    let version = "MCP-Protocol-Version: 2026-07-28\r\n";
    let call = |id: i64, name: &str, arguments: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": name, "arguments": arguments, "_meta": meta}})
    };
    // Once fx is there, a call that sleeps, its connection closed soon.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !serve.post(&call(1, "fx__echo", json!({"text": "up"})), version).2.contains("up") {
        assert!(Instant::now() < deadline, "fx never connected");
        std::thread::sleep(Duration::from_millis(50));
    }
    let body = call(2, "fx__sleep", json!({"ms": 5000})).to_string();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         {version}Mcp-Method: tools/call\r\nMcp-Name: fx__sleep\r\nContent-Length: {}\r\n\r\n",
        serve.address,
        serve.token,
        body.len()
    );
    let mut stream = TcpStream::connect(&serve.address).unwrap();
    stream.write_all(format!("{head}{body}").as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    drop(stream);
    let closed = Instant::now();
    let heard = loop {
        let seen = serve.post(&call(3, "fx__client_notifications", json!({})), version).2;
        if seen.contains("notifications/cancelled") || closed.elapsed() > Duration::from_secs(4) {
            break seen;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(heard.contains("notifications/cancelled"), "{heard}");
    assert!(closed.elapsed() < Duration::from_secs(2), "heard only after {:?}", closed.elapsed());
    serve.stop();
    tag.assert_gone();
}

// `tether proxy URL --check` lists the tools as they would be served: one
// `--ignore-tool` leaves out is not listed (a cold trial saw it listed).
#[test]
fn proxy_check_lists_the_tools_as_served() {
    let tag = Tag::new();
    let (mut upstream, url) = crate::support::start_url_fixture("http-server", &tag, &[]);
    let dir = crate::support::TempDir::new();
    let within = Duration::from_secs(30);
    let (all, _) = crate::support::run_tether(dir.path(), &["proxy", &url, "--check"], within);
    let listed = crate::support::stdout_of(&all);
    assert_eq!(all.status.code(), Some(0), "{listed}");
    assert!(listed.contains("echo") && listed.contains("sleep"), "{listed}");
    let args = ["proxy", &url, "--check", "--ignore-tool", "ech*"];
    let (some, _) = crate::support::run_tether(dir.path(), &args, within);
    let listed = crate::support::stdout_of(&some);
    assert_eq!(some.status.code(), Some(0), "{listed}");
    assert!(!listed.contains("echo") && listed.contains("sleep"), "{listed}");
    drop(upstream.stdin.take());
    let _ = upstream.wait();
    tag.assert_gone();
}

// From the review of the HTTP front: a chunk size near usize::MAX is
// refused at once (it wrapped the size check before), and two stateless
// clients using the same request id at the same time each get their own
// answer (they shared one link before, and got each other's).
#[test]
fn hostile_chunks_are_refused_and_stateless_clients_never_share_ids() {
    let tag = Tag::new();
    let serve = HttpServe::start(json!({"fx": misbehave_entry(&tag, &["--slow", "400"])}), &[]);
    let began = Instant::now();
    let chunked = "POST /mcp HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\n\
                   Transfer-Encoding: chunked\r\n";
    let mut stream = TcpStream::connect(&serve.address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let head = chunked.replace("{address}", &serve.address).replace("{token}", &serve.token);
    stream.write_all(format!("{head}\r\n1\r\nA\r\nffffffffffffffff\r\n").as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(began.elapsed() < Duration::from_secs(5), "refused at once");

    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}});
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let tools = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                           "params": {"_meta": meta}});
        let (_, _, listed) = serve.post(&tools, "MCP-Protocol-Version: 2026-07-28\r\n");
        if listed.contains("fx__echo") {
            break;
        }
        assert!(Instant::now() < deadline, "{listed}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let answers: Vec<String> = std::thread::scope(|scope| {
        let calls: Vec<_> = ["first", "second"]
            .into_iter()
            .map(|text| {
                let (serve, meta) = (&serve, &meta);
                scope.spawn(move || {
                    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                      "params": {"name": "fx__echo", "arguments": {"text": text},
                                                 "_meta": meta}});
                    serve.post(&call, "MCP-Protocol-Version: 2026-07-28\r\n").2
                })
            })
            .collect();
        calls.into_iter().map(|call| call.join().unwrap()).collect()
    });
    assert!(answers[0].contains("first") && !answers[0].contains("second"), "{answers:?}");
    assert!(answers[1].contains("second") && !answers[1].contains("first"), "{answers:?}");
    serve.stop();
    tag.assert_gone();
}

// Issue 24: a page allowed with --allow-origin (or one on this machine)
// can call from a browser: its preflight (no token) is answered with what
// it may send, and every answer names it and exposes the session header.
// Another site's page gets neither.
#[test]
fn an_allowed_page_passes_the_browsers_cors_checks() {
    let tag = Tag::new();
    let serve = HttpServe::start(
        json!({"fx": misbehave_entry(&tag, &[])}),
        &["--allow-origin", "https://app.example.com"],
    );
    let preflight =
        "OPTIONS /mcp HTTP/1.1\r\nHost: {address}\r\nOrigin: https://app.example.com\r\n\
                     Access-Control-Request-Method: POST\r\n\
                     Access-Control-Request-Headers: authorization, content-type\r\n";
    let (status, head, _) = serve.exchange(preflight, b"");
    assert_eq!(status, 204, "{head}");
    let lower = head.to_ascii_lowercase();
    assert!(lower.contains("access-control-allow-origin: https://app.example.com"), "{head}");
    assert!(lower.contains("access-control-allow-methods: get, post, delete, options"), "{head}");
    assert!(lower.contains("access-control-allow-headers: authorization, content-type"), "{head}");
    let elsewhere = preflight.replace("https://app.example.com", "https://evil.example");
    assert_eq!(serve.exchange(&elsewhere, b"").0, 403);
    // A 2026-07-28 page sends the headers it mirrors from its body; a
    // preflight that refused them left it no way to send its requests.
    let modern = preflight.replace(
        "authorization, content-type",
        "authorization, content-type, mcp-method, mcp-name, mcp-param-region, bad header",
    );
    let (status, head, _) = serve.exchange(&modern, b"");
    assert_eq!(status, 204, "{head}");
    let allowed = head
        .lines()
        .find_map(|line| line.strip_prefix("Access-Control-Allow-Headers: "))
        .unwrap_or_else(|| panic!("{head}"))
        .to_ascii_lowercase();
    for name in ["mcp-method", "mcp-name", "mcp-param-region", "mcp-protocol-version"] {
        assert!(allowed.split(", ").any(|allowed| allowed == name), "{name}: {head}");
    }
    assert!(!allowed.contains("bad"), "{head}");
    // A name where byte 10 falls inside a character had the serving
    // panic (a reading of the change): answered, and the port still served.
    let odd =
        preflight.replace("authorization, content-type", "mcp-param\u{e9}x, Mcp-Param\u{fffd}");
    assert_eq!(serve.exchange(&odd, b"").0, 204);

    let (status, head, _) = serve.post(&initialize(), "Origin: https://app.example.com\r\n");
    assert_eq!(status, 200, "{head}");
    let lower = head.to_ascii_lowercase();
    assert!(lower.contains("access-control-allow-origin: https://app.example.com"), "{head}");
    assert!(lower.contains("access-control-expose-headers: mcp-session-id"), "{head}");
    // A refusal too, so the page can read why.
    let (status, head, _) = serve.exchange(
        "POST /mcp HTTP/1.1\r\nHost: {address}\r\nOrigin: https://app.example.com\r\n",
        b"{}",
    );
    assert_eq!(status, 401);
    assert!(head.to_ascii_lowercase().contains("access-control-allow-origin"), "{head}");
    // No Origin (not a browser): no CORS lines.
    let (_, head, _) = serve.post(&initialize(), "");
    assert!(!head.to_ascii_lowercase().contains("access-control"), "{head}");
    serve.stop();
    tag.assert_gone();
}

// tether's own `Client`, over HTTP in 2026-07-28, asks for a call's log
// messages: `serve --http` sends them on that request's response stream
// before its answer, and the client's reader hands them to the call whose
// stream they came on. A raw request sees the same order, at its level.
#[test]
fn a_calls_log_messages_come_on_its_own_http_stream() {
    use std::sync::{Arc, Mutex};
    use tether::{CallOptions, Client, ClientOptions, Era, HttpKind, HttpTarget, LogLevel};
    let tag = Tag::new();
    let serve = HttpServe::start(json!({"md": misbehave_entry(&tag, &["--era", "modern"])}), &[]);
    let mut target = HttpTarget::new(&serve.url, HttpKind::Streamable);
    target.bearer_token = Some(serve.token.clone());
    let options = ClientOptions::default().with_request_timeout(Duration::from_secs(10));
    let client = Client::connect("front", &tether::Transport::Http(target), options).unwrap();
    assert_eq!(client.era(), Era::Modern);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !client.list_tools(&CallOptions::default()).unwrap().iter().any(|t| t.name == "md__logs")
    {
        assert!(Instant::now() < deadline, "md never connected");
        std::thread::sleep(Duration::from_millis(50));
    }
    let heard = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&heard);
    let asking = CallOptions::default().with_log(LogLevel::Info, move |message| {
        kept.lock().unwrap().push(format!("{} {}", message.level, message.text()));
    });
    let arguments = json!({"tag": "h", "interval_ms": 20});
    let result = client.call_tool("md__logs", arguments, &asking).unwrap();
    assert_eq!(result.to_text(), "logged");
    assert_eq!(*heard.lock().unwrap(), ["info h info", "warning h warning"]);
    // The same over a raw request, at warning: one message, then the answer.
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {},
                      "io.modelcontextprotocol/logLevel": "warning"});
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                      "params": {"name": "md__logs", "arguments": {"tag": "raw"}, "_meta": meta}});
    let (status, head, body) = serve.post(&call, "MCP-Protocol-Version: 2026-07-28\r\n");
    assert_eq!(status, 200, "{head}{body}");
    assert!(head.to_ascii_lowercase().contains("text/event-stream"), "{head}");
    assert!(!body.contains("raw info") && !body.contains("raw debug"), "{body}");
    let logged = body.find("raw warning").unwrap_or_else(|| panic!("no message: {body}"));
    let answered = body.find("\"result\"").unwrap_or_else(|| panic!("no answer: {body}"));
    assert!(logged < answered, "{body}");
    client.close().unwrap();
    serve.stop();
    tag.assert_gone();
}

// A handshake session over HTTP with no GET stream open hears the log
// messages about its own call on that call's response stream, before the
// answer (a cold trial saw only the answer there).
#[test]
fn a_sessions_call_brings_its_own_log_messages() {
    let tag = Tag::new();
    let serve = HttpServe::start(json!({"fx": misbehave_entry(&tag, &["--logging"])}), &[]);
    let session = serve.session();
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                      "params": {"name": "fx__logs", "arguments": {"tag": "s"}}});
    let deadline = Instant::now() + Duration::from_secs(20);
    let events = loop {
        let (status, _, events) = serve.post(&call, &session);
        if status == 200 && events.contains("logged") {
            break events;
        }
        assert!(Instant::now() < deadline, "fx__logs never answered: {events}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let at = |text: &str| events.find(text).unwrap_or_else(|| panic!("no {text}: {events}"));
    assert!(at("s info") < at("\"result\"") && at("s warning") < at("\"result\""), "{events}");
    // tether asks its servers for info and up.
    assert!(!events.contains("s debug"), "{events}");
    serve.stop();
    tag.assert_gone();
}

// A 2026-07-28 POST mirrors its body into headers; one whose headers are
// missing or say otherwise than the body is refused (400, -32020), its
// call never made: a gateway in front may have routed on the headers. A
// cold trial saw such requests answered as their bodies said.
#[test]
fn a_stateless_post_whose_headers_disagree_with_its_body_is_refused() {
    let tag = Tag::new();
    let serve = HttpServe::start(json!({"fx": misbehave_entry(&tag, &[])}), &[]);
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}});
    let call = |id: i64, text: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "fx__echo", "arguments": {"text": text}, "_meta": meta}})
    };
    let version = "MCP-Protocol-Version: 2026-07-28\r\n";
    let deadline = Instant::now() + Duration::from_secs(20);
    while !serve.post(&call(1, "up"), version).2.contains("up") {
        assert!(Instant::now() < deadline, "fx never connected");
        std::thread::sleep(Duration::from_millis(50));
    }
    let raw = |message: &Value, headers: &str| {
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {{address}}\r\nAuthorization: Bearer {{token}}\r\n\
             Content-Type: application/json\r\nAccept: application/json\r\n{headers}"
        );
        serve.exchange(&head, message.to_string().as_bytes())
    };
    for (headers, says) in [
        ("", "MCP-Protocol-Version"),
        ("MCP-Protocol-Version: 2026-07-28\r\nMcp-Name: fx__echo\r\n", "Mcp-Method"),
        ("MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\n", "Mcp-Name"),
        (
            "MCP-Protocol-Version: 2025-11-25\r\nMcp-Method: tools/call\r\nMcp-Name: fx__echo\r\n",
            "MCP-Protocol-Version",
        ),
        (
            "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\nMcp-Name: fx__echo\r\n",
            "Mcp-Method",
        ),
        (
            "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: fx__fail\r\n",
            "Mcp-Name",
        ),
    ] {
        let (status, head, body) = raw(&call(2, "refused"), headers);
        assert_eq!(status, 400, "{headers:?}: {head}{body}");
        let refused: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(refused["error"]["code"], -32020, "{body}");
        assert_eq!(refused["id"], 2, "{body}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{headers:?}: {message}");
    }
    // Base64 in the sentinel is read before comparing.
    let encoded = "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\n\
                   Mcp-Name: =?base64?ZnhfX2VjaG8=?=\r\n";
    let (status, _, body) = raw(&call(3, "encoded"), encoded);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("encoded"), "{body}");
    // None of the refused calls reached the server.
    let heard = serve.post(&call(4, "count"), version).2;
    let counted = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                         "params": {"name": "fx__request_counts", "arguments": {}, "_meta": meta}});
    let counts = serve.post(&counted, version).2;
    assert!(heard.contains("count"), "{heard}");
    let calls: Value = {
        let data = counts.lines().find_map(|line| line.strip_prefix("data: ")).unwrap_or(&counts);
        let body: Value = serde_json::from_str(data).unwrap();
        serde_json::from_str(body["result"]["content"][0]["text"].as_str().unwrap()).unwrap()
    };
    // The first call that reached fx, 3, 4 and this one: not the six refused.
    assert!(calls["tools/call"].as_u64().unwrap() <= 4, "{calls}");
    serve.stop();
    tag.assert_gone();
}

// Two POSTs of one session under one id, the first still under way: the
// second is refused (400, -32600) rather than answered too, and the first
// keeps its stream and its answer.
#[test]
fn a_sessions_request_under_an_id_under_way_is_refused() {
    let tag = Tag::new();
    let serve = HttpServe::start(json!({"fx": misbehave_entry(&tag, &[])}), &[]);
    let session = serve.session();
    let echo = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                      "params": {"name": "fx__echo", "arguments": {"text": "twin"}}});
    // The server behind connects in the background.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !serve.post(&echo, &session).2.contains("twin") {
        assert!(Instant::now() < deadline, "fx__echo never answered");
        std::thread::sleep(Duration::from_millis(50));
    }
    let sleep = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                       "params": {"name": "fx__sleep", "arguments": {"ms": 1500}}});
    std::thread::scope(|scope| {
        let first = scope.spawn(|| serve.post(&sleep, &session));
        std::thread::sleep(Duration::from_millis(400));
        let (status, _, body) = serve.post(&echo, &session);
        assert_eq!(status, 400, "{body}");
        let refused: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(refused["id"], 7, "{body}");
        assert_eq!(refused["error"]["code"], -32600, "{body}");
        let (status, _, body) = first.join().unwrap();
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("\"result\"") && !body.contains("twin"), "{body}");
    });
    serve.stop();
    tag.assert_gone();
}
