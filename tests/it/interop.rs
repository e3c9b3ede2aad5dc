//! tether against real third-party MCP servers over stdio, installed at
//! pinned versions by `interop_setup`.

use std::time::Duration;

use serde_json::json;
use tether::{CallOptions, Client, ClientOptions, HttpTarget, RemoteKind, StdioCommand, Transport};

use crate::interop_setup;
use crate::support::{base_env, TempDir};

fn stdio(argv: Vec<String>) -> Transport {
    let mut argv = argv.into_iter();
    Transport::Stdio(StdioCommand {
        program: argv.next().unwrap(),
        args: argv.collect(),
        env: base_env(),
        cwd: None,
    })
}

fn options() -> ClientOptions {
    ClientOptions { request_timeout: Duration::from_secs(30), ..ClientOptions::default() }
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

fn http_client(name: &str, url: &str, kind: RemoteKind) -> Client {
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
    let options = CallOptions {
        progress: Some(std::sync::Arc::new(move |_: &tether::Progress| {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        })),
        ..CallOptions::default()
    };
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
    let client = http_client("everything", &server.url("/mcp"), RemoteKind::StreamableHttp);
    assert_eq!(client.transport_name(), Some("http"));
    check_everything(&client);
    client.close().unwrap();
}

#[test]
fn server_everything_over_legacy_sse_and_by_fallback() {
    let (argv, env) = interop_setup::everything_server_http("sse");
    let server = interop_setup::spawn_http_server(&argv, &env);
    let client = http_client("everything", &server.url("/sse"), RemoteKind::Sse);
    assert_eq!(client.transport_name(), Some("sse"));
    check_everything(&client);
    client.close().unwrap();
    // A URL with no type tries Streamable HTTP first, then falls back.
    let client = http_client("everything", &server.url("/sse"), RemoteKind::Auto);
    assert_eq!(client.transport_name(), Some("sse"));
    let echoed =
        client.call_tool("echo", json!({"message": "fallback"}), &CallOptions::default()).unwrap();
    assert!(echoed.to_text().contains("fallback"));
    client.close().unwrap();
}

#[test]
fn python_sdk_server_over_streamable_http_and_sse() {
    for (mode, path, kind) in
        [("http", "/mcp", RemoteKind::StreamableHttp), ("sse", "/sse", RemoteKind::Sse)]
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
