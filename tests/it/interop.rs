//! tether against real third-party MCP servers over stdio, installed at
//! pinned versions by `interop_setup`.

use std::time::Duration;

use serde_json::json;
use tether::{CallOptions, Client, ClientOptions, HttpKind, HttpTarget, StdioCommand, Transport};

use crate::interop_setup;
use crate::support::TempDir;

fn stdio(argv: Vec<String>) -> Transport {
    let args: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
    Transport::Stdio(StdioCommand::new(&argv[0], &args))
}

fn options() -> ClientOptions {
    ClientOptions::default().with_request_timeout(Duration::from_secs(30))
}

#[test]
fn server_everything_over_stdio() {
    let client =
        Client::connect("everything", &stdio(interop_setup::everything_server()), options())
            .unwrap();
    assert_eq!(client.server_info().unwrap().protocol_version, "2025-11-25");
    let tools = client.list_tools(&CallOptions::default()).unwrap();
    for expected in ["echo", "get-sum", "get-tiny-image", "trigger-long-running-operation"] {
        assert!(tools.iter().any(|tool| tool.name == expected), "no {expected} in {tools:?}");
    }
    let echoed =
        client.call_tool("echo", json!({"message": "hi there"}), &CallOptions::default()).unwrap();
    assert!(echoed.to_text().contains("hi there"), "{}", echoed.to_text());
    let sum =
        client.call_tool("get-sum", json!({"a": 2, "b": 40}), &CallOptions::default()).unwrap();
    assert!(sum.to_text().contains("42"), "{}", sum.to_text());
    let image = client.call_tool("get-tiny-image", json!({}), &CallOptions::default()).unwrap();
    assert!(image.to_text().contains("[image: image/png"), "{}", image.to_text());
    client.close().unwrap();
}

#[test]
fn server_filesystem_over_stdio() {
    let dir = TempDir::new();
    dir.write("hello.txt", "hello from tether\n");
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let client =
        Client::connect("fs", &stdio(interop_setup::filesystem_server(&root)), options()).unwrap();
    let tools = client.list_tools(&CallOptions::default()).unwrap();
    assert!(tools.iter().any(|tool| tool.name == "read_text_file"));
    let path = root.join("hello.txt").display().to_string();
    let result =
        client.call_tool("read_text_file", json!({"path": path}), &CallOptions::default()).unwrap();
    assert!(!result.is_error(), "{:?}", result.raw);
    assert!(result.to_text().contains("hello from tether"), "{}", result.to_text());
    let listing =
        client.call_tool("list_directory", json!({"path": root}), &CallOptions::default()).unwrap();
    assert!(listing.to_text().contains("hello.txt"), "{}", listing.to_text());
    client.close().unwrap();
}

#[test]
fn python_sdk_server_over_stdio() {
    let client =
        Client::connect("py", &stdio(interop_setup::python_server("stdio")), options()).unwrap();
    let tools = client.list_tools(&CallOptions::default()).unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
    assert!(names.contains(&"echo") && names.contains(&"add"), "{names:?}");
    let result = client.call_tool("add", json!({"a": 2, "b": 3}), &CallOptions::default()).unwrap();
    assert_eq!(result.to_text(), "5");
    let echoed =
        client.call_tool("echo", json!({"text": "snake"}), &CallOptions::default()).unwrap();
    assert_eq!(echoed.to_text(), "snake");
    client.close().unwrap();
}

fn http_client(name: &str, url: &str, kind: HttpKind) -> Client {
    Client::connect(name, &Transport::Http(HttpTarget::new(url, kind)), options()).unwrap()
}

fn check_everything(client: &Client) {
    let tools = client.list_tools(&CallOptions::default()).unwrap();
    assert!(tools.iter().any(|tool| tool.name == "get-sum"), "{tools:?}");
    let echoed =
        client.call_tool("echo", json!({"message": "over http"}), &CallOptions::default()).unwrap();
    assert!(echoed.to_text().contains("over http"), "{}", echoed.to_text());
    // Progress arrives on the POST's event stream while the call runs.
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&seen);
    let options = CallOptions::default().with_progress(move |_: &tether::Progress| {
        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    });
    let result = client
        .call_tool("trigger-long-running-operation", json!({"duration": 1, "steps": 3}), &options)
        .unwrap();
    assert!(!result.is_error(), "{:?}", result.raw);
    assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 3);
}

#[test]
fn server_everything_over_streamable_http() {
    let (argv, env) = interop_setup::everything_server_http("streamableHttp");
    let server = interop_setup::spawn_http_server(&argv, &env);
    let client = http_client("everything", &server.url("/mcp"), HttpKind::Streamable);
    assert_eq!(client.transport_name(), "http");
    check_everything(&client);
    client.close().unwrap();
}

#[test]
fn server_everything_over_legacy_sse_and_by_fallback() {
    let (argv, env) = interop_setup::everything_server_http("sse");
    let server = interop_setup::spawn_http_server(&argv, &env);
    let client = http_client("everything", &server.url("/sse"), HttpKind::Sse);
    assert_eq!(client.transport_name(), "sse");
    check_everything(&client);
    client.close().unwrap();
    // A URL with no type tries Streamable HTTP first, then falls back.
    let client = http_client("everything", &server.url("/sse"), HttpKind::Auto);
    assert_eq!(client.transport_name(), "sse");
    let echoed =
        client.call_tool("echo", json!({"message": "fallback"}), &CallOptions::default()).unwrap();
    assert!(echoed.to_text().contains("fallback"));
    client.close().unwrap();
}

#[test]
fn python_sdk_server_over_streamable_http_and_sse() {
    for (mode, path, kind) in
        [("http", "/mcp", HttpKind::Streamable), ("sse", "/sse", HttpKind::Sse)]
    {
        let argv = interop_setup::python_server(mode);
        let server = interop_setup::spawn_http_server(&argv, &[]);
        let client = http_client("py", &server.url(path), kind);
        let result =
            client.call_tool("add", json!({"a": 20, "b": 22}), &CallOptions::default()).unwrap();
        assert_eq!(result.to_text(), "42", "{mode}");
        client.close().unwrap();
    }
}

/// A host that answers sampling and elicitation, and has one root.
#[derive(Default)]
struct FullHost {
    asked: std::sync::Mutex<Vec<String>>,
    logs: std::sync::Mutex<Vec<String>>,
}

impl tether::Host for FullHost {
    fn roots(&self) -> Vec<tether::Root> {
        vec![tether::Root::new("file:///srv/project").with_name("project")]
    }

    fn handles_sampling(&self) -> bool {
        true
    }

    fn create_message(
        &self,
        _server: &str,
        params: &serde_json::Value,
    ) -> Result<serde_json::Value, tether::RpcError> {
        self.asked
            .lock()
            .unwrap()
            .push(format!("sampling: {}", params["messages"][0]["content"]["text"]));
        Ok(json!({"role": "assistant", "content": {"type": "text", "text": "a scripted answer"},
                  "model": "scripted", "stopReason": "endTurn"}))
    }

    fn handles_elicitation(&self) -> bool {
        true
    }

    fn elicit(
        &self,
        _server: &str,
        params: &serde_json::Value,
    ) -> Result<serde_json::Value, tether::RpcError> {
        self.asked.lock().unwrap().push(format!("elicitation: {}", params["message"]));
        Ok(json!({"action": "accept", "content": {"name": "Ada Lovelace", "check": true}}))
    }

    fn notification(&self, _server: &str, notification: &tether::Notification) {
        if notification.method == "notifications/message" {
            self.logs
                .lock()
                .unwrap()
                .push(notification.params.as_ref().map(|p| p.to_string()).unwrap_or_default());
        }
    }
}

#[test]
fn server_everything_serves_what_an_agent_loop_needs() {
    let host = std::sync::Arc::new(FullHost::default());
    let argv = interop_setup::everything_server();
    let config = tether::Config::new().with_server(tether::ServerConfig::stdio(
        "everything",
        &argv[0],
        &argv[1..].iter().map(String::as_str).collect::<Vec<_>>(),
    ));
    let hub = tether::Hub::start(config, tether::HubOptions::default().with_host(host.clone()));
    assert_eq!(hub.status()[0].state, tether::ServerState::Ready, "{:?}", hub.status());

    // Resources, templates and prompts, and the model-facing resource tools.
    let (resources, errors) = hub.resources();
    assert!(errors.is_empty() && resources.len() >= 3, "{errors:?}");
    let (templates, _) = hub.resource_templates();
    assert!(!templates.is_empty());
    let (prompts, _) = hub.prompts();
    assert!(prompts.iter().any(|p| p.item.name == "simple-prompt"));
    let prompt = hub
        .get_prompt("everything", "args-prompt", json!({"city": "Lyon"}), &CallOptions::default())
        .unwrap();
    assert!(serde_json::to_string(&prompt.messages).unwrap().contains("Lyon"));
    let declared: Vec<String> = hub.model_tools().into_iter().map(|tool| tool.name).collect();
    assert!(declared.contains(&"read_mcp_resource".to_owned()), "{declared:?}");
    let uri = resources[0].item.uri.clone();
    let read = hub
        .call(
            "read_mcp_resource",
            json!({"server": "everything", "uri": uri}),
            &CallOptions::default(),
        )
        .unwrap();
    assert!(!read.is_error() && read.to_text().len() > 10, "{}", read.to_text());

    // Server→client requests, answered by the host.
    let roots =
        hub.call("mcp__everything__get-roots-list", json!({}), &CallOptions::default()).unwrap();
    assert!(roots.to_text().contains("file:///srv/project"), "{}", roots.to_text());
    let sampled = hub
        .call(
            "mcp__everything__trigger-sampling-request",
            json!({"prompt": "hello", "maxTokens": 20}),
            &CallOptions::default(),
        )
        .unwrap();
    assert!(sampled.to_text().contains("a scripted answer"), "{}", sampled.to_text());
    let elicited = hub
        .call("mcp__everything__trigger-elicitation-request", json!({}), &CallOptions::default())
        .unwrap();
    assert!(elicited.to_text().contains("Ada Lovelace"), "{}", elicited.to_text());
    assert_eq!(host.asked.lock().unwrap().len(), 2);

    // Results for the model: an image kept as an image, structured content checked.
    let limits = tether::ResultLimits::default();
    let tool =
        |name: &str| hub.tools().into_iter().find(|entry| entry.tool.name == name).unwrap().tool;
    let image =
        hub.call("mcp__everything__get-tiny-image", json!({}), &CallOptions::default()).unwrap();
    let shaped = tether::shape_result("everything", &tool("get-tiny-image"), &image, &limits);
    assert!(
        shaped.blocks.iter().any(|block| matches!(block, tether::ModelBlock::Image { .. })),
        "{shaped:?}"
    );
    let structured = hub
        .call(
            "mcp__everything__get-structured-content",
            json!({"location": "New York"}),
            &CallOptions::default(),
        )
        .unwrap();
    let shaped =
        tether::shape_result("everything", &tool("get-structured-content"), &structured, &limits);
    assert!(shaped.structured_content.is_some() && shaped.warnings.is_empty(), "{shaped:?}");

    // Logging: the server's simulated log messages reach the host.
    hub.call("mcp__everything__toggle-simulated-logging", json!({}), &CallOptions::default())
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while host.logs.lock().unwrap().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no log message within 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    hub.shutdown();
}

#[test]
fn the_cli_answers_elicitation_on_a_terminal() {
    assert!(
        std::path::Path::new("/usr/bin/script").exists(),
        "this test needs `script` (apt-get install util-linux)"
    );
    let argv = interop_setup::everything_server();
    let dir = crate::support::config_dir(json!({"ev": {"command": argv[0], "args": argv[1..]}}));
    let command_line = format!(
        "{} --config-dir {} call ev trigger-elicitation-request",
        crate::support::tether_bin(),
        dir.path().display()
    );
    let mut command = std::process::Command::new("script");
    command.args(["-qec", &command_line, "/dev/null"]);
    // The name, then the defaults of every other field, then "accept".
    let answers = format!("Ada\n{}a\n", "\n".repeat(14));
    let (output, _) = crate::support::run_command(command, Some(&answers), Duration::from_secs(60));
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(out.contains("asks: Please provide inputs"), "{out}");
    assert!(
        out.contains("\"name\": \"Ada\"") && out.contains("It was a dark and stormy night."),
        "{out}"
    );
}

#[test]
fn the_cli_browses_resources_and_prompts() {
    let argv = interop_setup::everything_server();
    let dir = crate::support::config_dir(json!({"ev": {"command": argv[0], "args": argv[1..]}}));
    let run = |args: &[&str]| {
        let (output, _) = crate::support::run_tether(dir.path(), args, Duration::from_secs(60));
        assert_eq!(
            output.status.code(),
            Some(0),
            "{args:?}: {}",
            crate::support::stderr_of(&output)
        );
        crate::support::stdout_of(&output)
    };
    let listed = run(&["resources"]);
    assert!(listed.contains("ev  demo://resource/static/document/architecture.md"), "{listed}");
    assert!(
        listed.contains("demo://resource/dynamic/blob/{resourceId}")
            && listed.contains("(template)"),
        "{listed}"
    );
    let text = run(&["read", "ev", "demo://resource/static/document/architecture.md"]);
    assert!(text.starts_with("# Everything Server"), "{text}");
    // A binary resource goes to a file whose path is printed: into a folder
    // given with -o (named after the URI, never replacing a file), or to
    // the file -o names; --raw writes its bytes to stdout.
    let out = crate::support::TempDir::new();
    let folder = out.path().display().to_string();
    let saved = run(&["read", "ev", "demo://resource/dynamic/blob/1", "-o", &folder]);
    let path = saved.trim().rsplit(" saved to ").next().unwrap().to_owned();
    assert_eq!(path, out.path().join("1").display().to_string(), "{saved}");
    let again = run(&["read", "ev", "demo://resource/dynamic/blob/1", "-o", &folder]);
    assert!(again.trim().ends_with(&format!("saved to {}", out.path().join("1-1").display())));
    let named = out.path().join("blob.bin").display().to_string();
    let saved = run(&["read", "ev", "demo://resource/dynamic/blob/1", "--output", &named]);
    assert!(saved.trim().ends_with(&format!("saved to {named}")), "{saved}");
    let bytes = std::fs::read(&path).unwrap();
    assert!(!bytes.is_empty());
    // The blob holds the time it was made: compare what does not change.
    let raw = run(&["read", "ev", "demo://resource/dynamic/blob/1", "--raw"]);
    let stable = "Resource 1: This is a base64 blob";
    assert!(raw.starts_with(stable) && bytes.starts_with(stable.as_bytes()), "{raw:?}");
    assert!(std::fs::read(&named).unwrap().starts_with(stable.as_bytes()));
    let prompts = run(&["prompts"]);
    assert!(prompts.contains("ev  args-prompt city [state]"), "{prompts}");
    let prompt = run(&["prompt", "ev", "args-prompt", r#"{"city": "Lyon"}"#]);
    assert!(prompt.starts_with("user: ") && prompt.contains("Lyon"), "{prompt}");
}

// Issue 8: over Streamable HTTP the session starts in order and the GET
// stream is open before the first call, so what the server asks while a tool
// runs (an elicitation, its roots) is answered every time.
#[test]
fn issue_8_server_everything_asks_during_calls_over_streamable_http() {
    let (argv, env) = interop_setup::everything_server_http("streamableHttp");
    let server = interop_setup::spawn_http_server(&argv, &env);
    let transport = Transport::Http(HttpTarget::new(&server.url("/mcp"), HttpKind::Streamable));
    for round in 0..20 {
        let host = std::sync::Arc::new(FullHost::default());
        let client_options = options().with_host(host.clone());
        let client = Client::connect("everything", &transport, client_options).unwrap();
        let elicited = client
            .call_tool("trigger-elicitation-request", json!({}), &CallOptions::default())
            .unwrap();
        assert!(
            elicited.to_text().contains("Ada Lovelace"),
            "round {round}: {}",
            elicited.to_text()
        );
        let roots = client.call_tool("get-roots-list", json!({}), &CallOptions::default()).unwrap();
        assert!(
            roots.to_text().contains("file:///srv/project"),
            "round {round}: {}",
            roots.to_text()
        );
        client.close().unwrap();
    }
}

/// A loopback proxy in front of an HTTP server that cuts the first answer
/// to a POST whose body holds `cut_after`, right after the first event with
/// an id, as a network would. One request per connection (it asks the
/// server to close), so what it relays is exactly one exchange.
struct CuttingProxy {
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    cuts: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl CuttingProxy {
    fn start(upstream: u16, cut_after: &'static str) -> CuttingProxy {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let cuts = std::sync::Arc::new(AtomicUsize::new(0));
        let (stopping, cutting) = (stop.clone(), cuts.clone());
        std::thread::spawn(move || {
            while !stopping.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let cutting = cutting.clone();
                        std::thread::spawn(move || relay(client, upstream, cut_after, &cutting));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        CuttingProxy { port, stop, cuts }
    }
}

impl Drop for CuttingProxy {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

fn relay(
    mut client: std::net::TcpStream,
    upstream: u16,
    cut_after: &str,
    cuts: &std::sync::atomic::AtomicUsize,
) {
    use std::io::{Read, Write};
    let _ = client.set_nonblocking(false);
    let _ = client.set_read_timeout(Some(Duration::from_secs(10)));
    // The request: its head, then as many body bytes as it says.
    let mut request = Vec::new();
    let mut buffer = [0u8; 8192];
    let head_end = loop {
        match client.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buffer[..n]),
        }
        if let Some(at) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&request[..head_end]).to_string();
    let length = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length").then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0usize);
    while request.len() < head_end + length {
        match client.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buffer[..n]),
        }
    }
    let body = String::from_utf8_lossy(&request[head_end..]).to_string();
    let cut = head.starts_with("POST") && body.contains(cut_after);
    // One exchange per connection.
    let head = head
        .lines()
        .filter(|line| !line.to_ascii_lowercase().starts_with("connection:") && !line.is_empty())
        .map(|line| format!("{line}\r\n"))
        .collect::<String>()
        + "Connection: close\r\n\r\n";
    let Ok(mut server) = std::net::TcpStream::connect(("127.0.0.1", upstream)) else { return };
    if server
        .write_all(head.as_bytes())
        .and_then(|()| server.write_all(&request[head_end..]))
        .is_err()
    {
        return;
    }
    let mut seen = String::new();
    // The answer's head is held until complete and rewritten, so that the
    // client does not keep the connection for another request.
    let mut answer_head: Option<Vec<u8>> = Some(Vec::new());
    loop {
        let n = match server.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut bytes = buffer[..n].to_vec();
        if let Some(mut head) = answer_head.take() {
            head.extend_from_slice(&bytes);
            let Some(at) = head.windows(4).position(|w| w == b"\r\n\r\n") else {
                answer_head = Some(head);
                continue;
            };
            let lines: String = String::from_utf8_lossy(&head[..at])
                .lines()
                .filter(|line| !line.to_ascii_lowercase().starts_with("connection:"))
                .map(|line| format!("{line}\r\n"))
                .collect();
            bytes = format!("{lines}Connection: close\r\n\r\n").into_bytes();
            bytes.extend_from_slice(&head[at + 4..]);
        }
        if client.write_all(&bytes).is_err() {
            break;
        }
        seen.push_str(&String::from_utf8_lossy(&buffer[..n]));
        // Past the priming event, the first event with data and an id.
        if cut && seen.contains("notifications/progress") && seen.contains("\nid:") {
            cuts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            break;
        }
    }
    let _ = client.shutdown(std::net::Shutdown::Both);
    let _ = server.shutdown(std::net::Shutdown::Both);
}

// Issue 8: a response stream that breaks is resumed with Last-Event-ID, and
// server-everything (whose Streamable HTTP keeps events for resumption)
// replays the rest: the call completes, every time.
#[test]
fn issue_8_server_everything_resumes_a_broken_response_stream() {
    let (argv, env) = interop_setup::everything_server_http("streamableHttp");
    let server = interop_setup::spawn_http_server(&argv, &env);
    let proxy = CuttingProxy::start(server.port, "trigger-long-running-operation");
    let url = format!("http://127.0.0.1:{}/mcp", proxy.port);
    for round in 0..20 {
        let started = std::time::Instant::now();
        let client = http_client("everything", &url, HttpKind::Streamable);
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = seen.clone();
        let options = CallOptions::default().with_progress(move |_| {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
        let result = client
            .call_tool(
                "trigger-long-running-operation",
                json!({"duration": 0.3, "steps": 3}),
                &options,
            )
            .unwrap_or_else(|err| panic!("round {round}: {err}"));
        assert!(!result.is_error(), "round {round}: {:?}", result.raw);
        assert!(result.to_text().contains("completed"), "round {round}: {}", result.to_text());
        let called = started.elapsed();
        client.close().unwrap();
        eprintln!(
            "round {round}: call {:.2} s, with close {:.2} s",
            called.as_secs_f64(),
            started.elapsed().as_secs_f64()
        );
    }
    assert_eq!(proxy.cuts.load(std::sync::atomic::Ordering::SeqCst), 20, "every round was cut");
}

// Issue 10: the Python SDK 2.3 speaks 2026-07-28, server-everything stays
// on 2025-11-25; the CLI's list shows each era and the browsing commands
// work against both, over stdio and over Streamable HTTP.
#[test]
fn issue_10_each_server_in_its_own_era_over_stdio_and_http() {
    let everything = interop_setup::everything_server();
    let python = interop_setup::python_server("stdio");
    let (argv, env) = interop_setup::everything_server_http("streamableHttp");
    let everything_http = interop_setup::spawn_http_server(&argv, &env);
    let python_http = interop_setup::spawn_http_server(&interop_setup::python_server("http"), &[]);
    let dir = crate::support::config_dir(json!({
        "ev": {"command": everything[0], "args": everything[1..]},
        "py": {"command": python[0], "args": python[1..]},
        "evh": {"url": everything_http.url("/mcp")},
        "pyh": {"url": python_http.url("/mcp")},
    }));
    let run = |args: &[&str]| {
        let (output, _) = crate::support::run_tether(dir.path(), args, Duration::from_secs(60));
        let stderr = crate::support::stderr_of(&output);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {stderr}");
        crate::support::stdout_of(&output)
    };
    let listed: Vec<serde_json::Value> = serde_json::from_str(&run(&["list", "--json"])).unwrap();
    let era = |name: &str| {
        let entry = listed.iter().find(|entry| entry["name"] == name).unwrap();
        assert_eq!(entry["state"], "connected", "{entry}");
        (entry["era"].as_str().unwrap(), entry["protocolVersion"].as_str().unwrap())
    };
    assert_eq!(era("ev"), ("legacy", "2025-11-25"));
    assert_eq!(era("evh"), ("legacy", "2025-11-25"));
    assert_eq!(era("py"), ("modern", "2026-07-28"));
    assert_eq!(era("pyh"), ("modern", "2026-07-28"));
    for py in ["py", "pyh"] {
        assert_eq!(run(&["call", py, "add", r#"{"a": 2, "b": 40}"#]).trim(), "42");
        assert!(run(&["resources", py]).contains("fixture://greeting"));
        assert_eq!(
            run(&["read", py, "fixture://greeting"]).trim(),
            "Hello from the tether Python fixture"
        );
        assert!(run(&["prompts", py]).contains("greet name"));
        assert_eq!(
            run(&["prompt", py, "greet", r#"{"name": "Ada"}"#]).trim(),
            "user: Please greet Ada."
        );
    }
    for ev in ["ev", "evh"] {
        assert!(run(&["call", ev, "get-sum", r#"{"a": 2, "b": 40}"#]).contains("42"));
        assert!(run(&["resources", ev]).contains("demo://resource/static/document/architecture.md"));
        let text = run(&["read", ev, "demo://resource/static/document/architecture.md"]);
        assert!(text.starts_with("# Everything Server"), "{text}");
        assert!(run(&["prompts", ev]).contains("args-prompt city"));
        assert!(run(&["prompt", ev, "args-prompt", r#"{"city": "Lyon"}"#]).contains("Lyon"));
    }
}

// Issue 10: an elicitation from a stateless server (an input_required
// round) reaches the host and the call completes; a list change comes on
// the subscriptions/listen stream and the hub re-lists. Over both
// transports.
#[test]
fn issue_10_python_sdk_asks_and_announces_statelessly() {
    let python_http = interop_setup::spawn_http_server(&interop_setup::python_server("http"), &[]);
    let python = interop_setup::python_server("stdio");
    let config = tether::Config::new()
        .with_server(tether::ServerConfig::stdio(
            "py",
            &python[0],
            &python[1..].iter().map(String::as_str).collect::<Vec<_>>(),
        ))
        .with_server(tether::ServerConfig::http(
            "pyh",
            &python_http.url("/mcp"),
            HttpKind::Streamable,
        ));
    let host = std::sync::Arc::new(FullHost::default());
    let hub = tether::Hub::start(config, tether::HubOptions::default().with_host(host.clone()));
    for server in ["py", "pyh"] {
        let greeting = hub
            .call(&format!("mcp__{server}__greet_me"), json!({}), &CallOptions::default())
            .unwrap();
        assert_eq!(greeting.to_text(), "Hello, Ada Lovelace!", "{server}");
        hub.call(&format!("mcp__{server}__grow"), json!({"name": "newt"}), &CallOptions::default())
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let wanted = format!("mcp__{server}__newt");
        while !hub.tools().iter().any(|tool| tool.qualified_name == wanted) {
            assert!(std::time::Instant::now() < deadline, "{server}: no re-list after grow");
            std::thread::sleep(Duration::from_millis(50));
        }
        let called = hub.call(&wanted, json!({}), &CallOptions::default()).unwrap();
        assert_eq!(called.to_text(), "called newt");
    }
    let asked = host.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked.iter().all(|ask| ask.contains("What is your name?")), "{asked:?}");
    hub.shutdown();
}

// Issue 26 (item 8): `key=value` words typed by a real server's schema:
// server-everything's `get-sum` takes two numbers, so `a=2 b=3` are numbers;
// a word of the wrong type is refused before the call, naming the type.
#[test]
fn key_value_arguments_take_server_everythings_schema() {
    let argv = interop_setup::everything_server();
    let dir =
        crate::support::config_dir(json!({"everything": {"command": argv[0], "args": argv[1..]}}));
    let within = Duration::from_secs(60);
    let (summed, _) = crate::support::run_tether(
        dir.path(),
        &["call", "everything", "get-sum", "a=2", "b=3.5"],
        within,
    );
    let out = String::from_utf8_lossy(&summed.stdout);
    assert_eq!(summed.status.code(), Some(0), "{}", String::from_utf8_lossy(&summed.stderr));
    assert!(out.contains("5.5"), "{out}");
    let (echoed, _) = crate::support::run_tether(
        dir.path(),
        &["call", "mcp__everything__echo", "message=42"],
        within,
    );
    assert!(String::from_utf8_lossy(&echoed.stdout).contains("Echo: 42"));
    let (refused, _) = crate::support::run_tether(
        dir.path(),
        &["call", "everything", "get-sum", "a=two", "b=3"],
        within,
    );
    assert_eq!(refused.status.code(), Some(2));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("a: the tool takes number, not \"two\""), "{said}");

    // Issue 26 (item 10): --max-chars cuts what is printed; --save-images
    // writes each image block to a file, named on stdout.
    let (cut, _) = crate::support::run_tether(
        dir.path(),
        &["call", "everything", "echo", "message=abcdefghijklmnop", "--max-chars", "10"],
        within,
    );
    let out = String::from_utf8_lossy(&cut.stdout);
    assert!(out.starts_with("Echo: abcd\n[cut at 10 of 22 characters"), "{out}");
    let images = dir.path().join("images");
    let (saved, _) = crate::support::run_tether(
        dir.path(),
        &["call", "everything", "get-tiny-image", "--save-images", images.to_str().unwrap()],
        within,
    );
    let out = String::from_utf8_lossy(&saved.stdout);
    assert_eq!(saved.status.code(), Some(0), "{}", String::from_utf8_lossy(&saved.stderr));
    assert!(out.contains("[image 1 saved to"), "{out}");
    let png = std::fs::read(images.join("image-1.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG file");
}

/// Takes every elicitation: a URL one by accepting it, a form by the first
/// choice of each field (what server-everything's research tool asks).
struct AcceptingHost {
    asked: std::sync::Mutex<Vec<String>>,
}

impl tether::Host for AcceptingHost {
    fn handles_elicitation(&self) -> bool {
        true
    }

    fn elicit(
        &self,
        _server: &str,
        params: &serde_json::Value,
    ) -> Result<serde_json::Value, tether::RpcError> {
        let asked = tether::Elicitation::of(params);
        self.asked.lock().unwrap().push(asked.mode.to_owned());
        if asked.mode == "url" {
            return Ok(json!({"action": "accept"}));
        }
        let mut content = serde_json::Map::new();
        let properties = asked.schema.and_then(|schema| schema["properties"].as_object());
        for (name, field) in properties.into_iter().flatten() {
            if let Some(first) = field["oneOf"][0].get("const") {
                content.insert(name.clone(), first.clone());
            }
        }
        Ok(json!({"action": "accept", "content": content}))
    }
}

// Issue 25 (items 3 and 6) against server-everything: its research tool
// must run as a task (polled, its clarification asked through
// tasks/result), and its URL elicitation tool refuses with -32042 first,
// then asks the page with elicitation/create.
#[test]
fn server_everythings_task_tool_and_url_elicitation() {
    let host = std::sync::Arc::new(AcceptingHost { asked: Default::default() });
    let options = options().with_host(host.clone());
    let client =
        Client::connect("everything", &stdio(interop_setup::everything_server()), options).unwrap();
    let tools = client.list_tools(&CallOptions::default()).unwrap();
    let research = tools.iter().find(|tool| tool.name == "simulate-research-query").unwrap();
    assert_eq!(research.execution.as_ref().unwrap()["taskSupport"], "required");

    let plain = CallOptions::default();
    let report = client.call_tool("simulate-research-query", json!({"topic": "tides"}), &plain);
    let report = report.unwrap().to_text();
    assert!(report.contains("tides") && report.contains("completed"), "{report}");
    let asked = json!({"topic": "python", "ambiguous": true});
    let report = client.call_tool("simulate-research-query", asked, &plain).unwrap().to_text();
    assert!(report.contains("After receiving clarification"), "{report}");
    assert_eq!(*host.asked.lock().unwrap(), ["form"]);

    let arguments = json!({"url": "https://example.com/connect", "errorPath": true});
    let refused =
        client.call_tool("trigger-url-elicitation", arguments.clone(), &plain).unwrap_err();
    let tether::Error::UrlElicitationRequired { elicitations, .. } = &refused else {
        panic!("{refused:?}")
    };
    assert_eq!(elicitations[0].url, "https://modelcontextprotocol.io");
    let done = client.call_tool("trigger-url-elicitation", arguments, &plain).unwrap().to_text();
    assert!(done.contains("User completed the URL elicitation flow"), "{done}");
    assert_eq!(*host.asked.lock().unwrap(), ["form", "url"]);
    client.close().unwrap();
}

/// Records the URIs of `notifications/resources/updated`.
#[derive(Default)]
struct UpdatesHost {
    updated: std::sync::Mutex<Vec<String>>,
}

impl tether::Host for UpdatesHost {
    fn notification(&self, _server: &str, notification: &tether::Notification) {
        if notification.method == "notifications/resources/updated" {
            let uri = notification.params.as_ref().and_then(|params| params["uri"].as_str());
            self.updated.lock().unwrap().push(uri.unwrap_or("").to_owned());
        }
    }
}

// Issue 25 (items 1 and 2) against server-everything: completion of a
// prompt's arguments (the second narrowed by the first, as context), and a
// resource subscription whose update reaches the host.
#[test]
fn server_everythings_completions_and_subscriptions() {
    let host = std::sync::Arc::new(UpdatesHost::default());
    let options = options().with_host(host.clone());
    let client =
        Client::connect("everything", &stdio(interop_setup::everything_server()), options).unwrap();
    let plain = CallOptions::default();
    let prompt = tether::CompletionRef::Prompt("completable-prompt".into());
    let departments = client.complete(&prompt, "department", "E", None, &plain).unwrap();
    assert_eq!(departments.values, ["Engineering"]);
    let context = json!({"department": "Sales"});
    let names = client.complete(&prompt, "name", "", Some(&context), &plain).unwrap();
    assert_eq!(names.values, ["David", "Eve", "Frank"]);

    let resources = client.list_resources(&plain).unwrap();
    let uri = resources.first().expect("server-everything lists resources").uri.clone();
    client.subscribe_resource(&uri, &plain).unwrap();
    client.call_tool("toggle-subscriber-updates", json!({}), &plain).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while host.updated.lock().unwrap().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(host.updated.lock().unwrap().first(), Some(&uri));
    client.close().unwrap();
}

// Issue 25 (items 2 and 9) against the Python SDK 2.3, in both eras: a
// tool whose outputSchema the SDK made from its return type (`$defs`, a
// `$ref` under `anyOf`) has its structuredContent checked and found to
// match; a wrong one is found; and a prompt argument is completed.
#[test]
fn python_sdk_output_schemas_and_completions_in_both_eras() {
    for era in [tether::EraChoice::Legacy, tether::EraChoice::Modern] {
        let options = options().with_era(era);
        let client =
            Client::connect("py", &stdio(interop_setup::python_server("stdio")), options).unwrap();
        let plain = CallOptions::default();
        let tools = client.list_tools(&plain).unwrap();
        let measure = tools.iter().find(|tool| tool.name == "measure").unwrap();
        assert!(measure.output_schema.as_ref().unwrap()["$defs"]["Word"].is_object());
        let measured = client.call_tool("measure", json!({"text": "tide pools"}), &plain).unwrap();
        assert_eq!(measured.schema_mismatch, None, "{era:?}: {:?}", measured.raw);
        assert_eq!(
            measured.structured_content().unwrap(),
            &json!({"words": 2, "characters": 10, "longest": {"text": "pools", "length": 5}})
        );
        let empty = client.call_tool("measure", json!({"text": ""}), &plain).unwrap();
        assert_eq!(empty.schema_mismatch, None, "{era:?}: {:?}", empty.raw);
        // The same schema judges a result that breaks it.
        let schema = measure.output_schema.clone().unwrap();
        let broken = json!({"words": 1, "characters": 2, "longest": {"text": "x"}});
        let why = tether::for_cli::check_schema(&broken, &schema).unwrap_err();
        assert_eq!(why, "$.longest: matches none of the schemas in anyOf");

        let prompt = tether::CompletionRef::Prompt("greet".into());
        let names = client.complete(&prompt, "name", "A", None, &plain).unwrap();
        assert_eq!(names.values, ["Ada", "Alan"], "{era:?}");
        client.close().unwrap();
    }
}
