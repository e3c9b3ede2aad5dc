//! tether against real third-party MCP servers over stdio, installed at
//! pinned versions by `interop_setup`.

use std::time::Duration;

use serde_json::json;
use tether::{CallOptions, Client, ClientOptions, StdioCommand, Transport};

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
