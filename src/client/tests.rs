//! The client's routing, over the in-memory transport: the test plays the
//! server, so every order of events can be set up exactly.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::exchange::with_progress_token;
use super::*;
use crate::error::Step;
use crate::host::{Host, Root};
use crate::jsonrpc::{Notification, RpcError};
use crate::protocol::EraChoice;
use crate::transport::memory::{self, MemoryServer};

#[derive(Default)]
struct RecordingHost {
    notifications: Mutex<Vec<String>>,
}

impl Host for RecordingHost {
    fn roots(&self) -> Vec<Root> {
        vec![Root::new("file:///work")]
    }

    fn notification(&self, _server: &str, notification: &Notification) {
        self.notifications.lock().unwrap().push(notification.method.clone());
    }
}

fn connect_with(options: ClientOptions) -> (Client, MemoryServer) {
    let mut server = None;
    let client = Client::over("mem", options, |inbox| {
        let (endpoint, end) = memory::open(inbox);
        server = Some(end);
        Ok(endpoint)
    })
    .unwrap();
    (client, server.unwrap())
}

fn connect() -> (Client, MemoryServer) {
    connect_with(ClientOptions::default().with_request_timeout(Duration::from_secs(5)))
}

fn initialize_result(version: &str) -> Value {
    json!({"protocolVersion": version, "capabilities": {"tools": {}},
           "serverInfo": {"name": "mem", "version": "1.0"}})
}

/// Answers the era probe as a handshake-era server does: method not found.
fn refuse_probe(server: &MemoryServer) {
    let probe = server.next();
    assert_eq!(probe["method"], "server/discover");
    assert_eq!(probe["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    server.fail(&probe["id"], -32601, "Method not found", None);
}

fn discover_result(capabilities: Value) -> Value {
    json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
           "capabilities": capabilities, "ttlMs": 0, "cacheScope": "public",
           "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modern", "version": "2.0"}}})
}

/// A client started against a stateless server offering `capabilities`.
fn connect_modern(capabilities: Value) -> (Client, MemoryServer) {
    let (client, server) = connect_with(
        ClientOptions::default()
            .with_request_timeout(Duration::from_secs(5))
            .with_host(Arc::new(RecordingHost::default())),
    );
    thread::scope(|scope| {
        let started = scope.spawn(|| client.initialize(Duration::from_secs(5)).map(|_| ()));
        let probe = server.next();
        server.answer(&probe["id"], discover_result(capabilities));
        started.join().unwrap().unwrap();
    });
    (client, server)
}

/// A client started against a stateless server that declares list
/// changes: the start ends once the listen stream is acknowledged; the
/// listen request comes back too.
fn connect_listening(host: Arc<dyn Host>) -> (Client, MemoryServer, Value) {
    let (client, server) = connect_with(
        ClientOptions::default().with_request_timeout(Duration::from_secs(5)).with_host(host),
    );
    let listen = thread::scope(|scope| {
        let started = scope.spawn(|| client.initialize(Duration::from_secs(5)).map(|_| ()));
        let probe = server.next();
        server.answer(&probe["id"], discover_result(json!({"tools": {"listChanged": true}})));
        let listen = server.next();
        assert_eq!(listen["method"], "subscriptions/listen");
        server.send(json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
            "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": listen["id"]},
                       "notifications": {"toolsListChanged": true}}}));
        let started_at = Instant::now();
        started.join().unwrap().unwrap();
        assert!(started_at.elapsed() < Duration::from_secs(1), "the start ended at the ack");
        listen
    });
    (client, server, listen)
}

#[test]
fn initialize_then_initialized_before_anything_else() {
    let (client, server) = connect();
    thread::scope(|scope| {
        let started =
            scope.spawn(|| client.initialize(Duration::from_secs(5)).map(|info| info.name.clone()));
        refuse_probe(&server);
        let request = server.next();
        assert_eq!(request["method"], "initialize");
        assert_eq!(request["params"]["protocolVersion"], "2025-11-25");
        assert_eq!(request["params"]["capabilities"]["roots"]["listChanged"], true);
        assert!(request["params"]["capabilities"].get("sampling").is_none());
        server.answer(&request["id"], initialize_result("2025-06-18"));
        assert_eq!(server.next()["method"], "notifications/initialized");
        assert_eq!(started.join().unwrap().unwrap(), "mem");
    });
    assert_eq!(client.server_info().unwrap().protocol_version, "2025-06-18");
}

#[test]
fn a_second_initialize_keeps_the_session_it_opened() {
    let (client, server) = connect();
    thread::scope(|scope| {
        let started = scope.spawn(|| client.initialize(Duration::from_secs(5)).map(|_| ()));
        refuse_probe(&server);
        let request = server.next();
        server.answer(&request["id"], initialize_result("2025-06-18"));
        assert_eq!(server.next()["method"], "notifications/initialized");
        started.join().unwrap().unwrap();
    });
    // Once a session is open, initialize says what it opened and sends
    // nothing: no second probe that could leave the client half in each era.
    let info = client.initialize(Duration::from_secs(5)).unwrap();
    assert_eq!(info.protocol_version, "2025-06-18");
    assert!(server.is_quiet_for(Duration::from_millis(100)));
    // Server requests are still answered (a stateless server's are ignored).
    server.send(json!({"jsonrpc": "2.0", "id": "r", "method": "roots/list"}));
    assert_eq!(server.next()["id"], "r");
}

#[test]
fn a_revision_tether_does_not_speak_is_refused() {
    let (client, server) = connect();
    thread::scope(|scope| {
        let started = scope.spawn(|| client.initialize(Duration::from_secs(5)).map(|_| ()));
        refuse_probe(&server);
        let request = server.next();
        server.answer(&request["id"], initialize_result("1999-01-01"));
        let err = started.join().unwrap().unwrap_err();
        assert!(matches!(err, Error::UnsupportedProtocol(ref v) if v == "1999-01-01"), "{err:?}");
    });
    assert!(server.is_quiet_for(Duration::from_millis(50)), "no initialized after a refusal");
}

#[test]
fn answers_reach_their_own_callers_in_any_order() {
    let (client, server) = connect();
    thread::scope(|scope| {
        let first = scope.spawn(|| client.request("a", None, &CallOptions::default()));
        let a = server.next();
        let second = scope.spawn(|| client.request("b", None, &CallOptions::default()));
        let b = server.next();
        assert_ne!(a["id"], b["id"], "ids are never reused");
        server.answer(&b["id"], json!({"which": "b"}));
        server.answer(&a["id"], json!({"which": "a"}));
        assert_eq!(first.join().unwrap().unwrap()["which"], "a");
        assert_eq!(second.join().unwrap().unwrap()["which"], "b");
    });
}

#[test]
fn a_timeout_cancels_on_the_server_and_a_late_answer_is_dropped() {
    let (client, server) = connect();
    let options = CallOptions::default().with_timeout(Duration::from_millis(100));
    let started = Instant::now();
    thread::scope(|scope| {
        let call = scope.spawn(|| client.request("slow", None, &options));
        let request = server.next();
        let err = call.join().unwrap().unwrap_err();
        let Error::Timeout(timeout) = err else { panic!("{err:?}") };
        assert_eq!((timeout.step, timeout.method.as_str()), (Step::Request, "slow"));
        assert!(started.elapsed() < Duration::from_secs(2));
        let cancelled = server.next();
        assert_eq!(cancelled["method"], "notifications/cancelled");
        assert_eq!(cancelled["params"]["requestId"], request["id"]);
        // The answer comes after all: nobody waits for it.
        server.answer(&request["id"], json!({"late": true}));
        let next = scope.spawn(|| client.request("next", None, &CallOptions::default()));
        let again = server.next();
        server.answer(&again["id"], json!({"late": false}));
        assert_eq!(next.join().unwrap().unwrap()["late"], false);
    });
}

#[test]
fn a_cancel_handle_ends_the_call_and_tells_the_server() {
    let (client, server) = connect();
    let cancel = CancelHandle::new();
    let options = CallOptions::default().with_cancel(cancel.clone());
    thread::scope(|scope| {
        let call = scope.spawn(|| client.request("long", None, &options));
        let request = server.next();
        cancel.cancel();
        assert!(matches!(call.join().unwrap(), Err(Error::Cancelled)));
        let cancelled = server.next();
        assert_eq!(cancelled["params"]["requestId"], request["id"]);
        // A cancelled handle stops later calls before they are sent.
        assert!(matches!(client.request("never", None, &options), Err(Error::Cancelled)));
    });
    assert!(server.is_quiet_for(Duration::from_millis(50)));
}

#[test]
fn progress_resets_the_timer_and_reaches_the_callback() {
    let (client, server) = connect();
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&seen);
    let options = CallOptions::default()
        .with_timeout(Duration::from_millis(300))
        .with_max_total_timeout(Duration::from_secs(5))
        .with_progress(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        });
    thread::scope(|scope| {
        let call = scope.spawn(|| client.call_tool("work", json!({}), &options));
        let request = server.next();
        let token = request["params"]["_meta"]["progressToken"].clone();
        assert_eq!(token, request["id"], "tools/call carries a progress token");
        // Four updates 150 ms apart: 600 ms in all, twice the timeout.
        for step in 1..=4 {
            thread::sleep(Duration::from_millis(150));
            server.send(json!({"jsonrpc": "2.0", "method": "notifications/progress",
                               "params": {"progressToken": token, "progress": step}}));
        }
        server.answer(&request["id"], json!({"content": []}));
        assert!(call.join().unwrap().is_ok());
    });
    assert_eq!(seen.load(Ordering::SeqCst), 4);
}

#[test]
fn progress_cannot_carry_a_call_past_its_ceiling() {
    let (client, server) = connect();
    let options = CallOptions::default()
        .with_timeout(Duration::from_millis(100))
        .with_max_total_timeout(Duration::from_millis(300));
    let started = Instant::now();
    thread::scope(|scope| {
        let call = scope.spawn(|| client.call_tool("endless", json!({}), &options));
        let request = server.next();
        let token = request["params"]["_meta"]["progressToken"].clone();
        while !call.is_finished() && started.elapsed() < Duration::from_secs(3) {
            server.send(json!({"jsonrpc": "2.0", "method": "notifications/progress",
                               "params": {"progressToken": token, "progress": 1}}));
            thread::sleep(Duration::from_millis(40));
        }
        assert!(matches!(call.join().unwrap(), Err(Error::Timeout(_))));
    });
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(2), "{took:?}");
}

#[test]
fn server_requests_are_answered_and_notifications_reach_the_host() {
    let host = Arc::new(RecordingHost::default());
    let (client, server) = connect_with(ClientOptions::default().with_host(host.clone()));
    server.send(json!({"jsonrpc": "2.0", "id": "p", "method": "ping"}));
    assert_eq!(server.next(), json!({"jsonrpc": "2.0", "id": "p", "result": {}}));
    server.send(json!({"jsonrpc": "2.0", "id": "r", "method": "roots/list"}));
    assert_eq!(server.next()["result"]["roots"][0]["uri"], "file:///work");
    server.send(json!({"jsonrpc": "2.0", "id": "s", "method": "sampling/createMessage"}));
    assert_eq!(server.next()["error"]["code"], -32601, "declined by default");
    server.send(json!({"jsonrpc": "2.0", "id": 7, "method": "no/such"}));
    let unknown = server.next();
    assert_eq!(
        (unknown["id"].clone(), unknown["error"]["code"].clone()),
        (json!(7), json!(-32601))
    );
    server.send(json!({"jsonrpc": "2.0", "method": "notifications/message",
                       "params": {"level": "info", "data": "hi"}}));
    let deadline = Instant::now() + Duration::from_secs(2);
    while host.notifications.lock().unwrap().is_empty() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(*host.notifications.lock().unwrap(), ["notifications/message"]);
    drop(client);
}

#[test]
fn a_closed_connection_fails_every_waiter_at_once() {
    let (client, server) = connect();
    let started = Instant::now();
    thread::scope(|scope| {
        let first = scope.spawn(|| client.request("a", None, &CallOptions::default()));
        let second = scope.spawn(|| client.request("b", None, &CallOptions::default()));
        server.next();
        server.next();
        server.close(CloseReason::Eof);
        for call in [first, second] {
            assert!(matches!(call.join().unwrap(), Err(Error::Disconnected(CloseReason::Eof))));
        }
    });
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(client.close_reason(), Some(CloseReason::Eof));
    assert!(matches!(
        client.request("after", None, &CallOptions::default()),
        Err(Error::Disconnected(CloseReason::Eof))
    ));
    assert!(server.is_quiet_for(Duration::from_millis(50)), "nothing is sent once closed");
}

#[test]
fn an_error_answer_is_an_rpc_error() {
    let (client, server) = connect();
    thread::scope(|scope| {
        let call = scope.spawn(|| client.request("bad", None, &CallOptions::default()));
        let request = server.next();
        server.send(json!({"jsonrpc": "2.0", "id": request["id"],
                           "error": {"code": -32602, "message": "no such tool"}}));
        let err = call.join().unwrap().unwrap_err();
        assert!(matches!(err, Error::Rpc(RpcError { code: -32602, .. })), "{err:?}");
    });
}

#[test]
fn lists_follow_cursors_to_the_end_and_refuse_a_repeated_one() {
    let (client, server) = connect();
    thread::scope(|scope| {
        let listing = scope.spawn(|| client.list_tools(&CallOptions::default()));
        let page = server.next();
        assert!(page["params"].get("cursor").is_none());
        server.answer(&page["id"], json!({"tools": [{"name": "a"}], "nextCursor": "2"}));
        let page = server.next();
        assert_eq!(page["params"]["cursor"], "2");
        server.answer(&page["id"], json!({"tools": [{"name": "b"}]}));
        let names: Vec<String> =
            listing.join().unwrap().unwrap().into_iter().map(|t| t.name).collect();
        assert_eq!(names, ["a", "b"]);

        let listing = scope.spawn(|| client.list_tools(&CallOptions::default()));
        for _ in 0..2 {
            let page = server.next();
            server.answer(&page["id"], json!({"tools": [], "nextCursor": "same"}));
        }
        assert!(matches!(listing.join().unwrap(), Err(Error::Protocol(_))));
    });
}

#[test]
fn a_discover_result_makes_every_request_stateless() {
    let (client, server) = connect_modern(json!({"tools": {}}));
    let info = client.server_info().unwrap();
    assert_eq!((info.era, info.protocol_version.as_str()), (Era::Modern, "2026-07-28"));
    assert_eq!((info.name.as_str(), info.version.as_str()), ("modern", "2.0"));
    thread::scope(|scope| {
        let call =
            scope.spawn(|| client.call_tool("echo", json!({"x": 1}), &CallOptions::default()));
        let request = server.next();
        assert_eq!(request["method"], "tools/call");
        let meta = &request["params"]["_meta"];
        assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
        assert_eq!(meta["io.modelcontextprotocol/clientCapabilities"]["roots"], json!({}));
        assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "tether");
        assert!(meta.get("progressToken").is_some(), "the progress token stays");
        server.answer(&request["id"], json!({"resultType": "complete", "content": []}));
        call.join().unwrap().unwrap();
    });
    // No listChanged declared: no listen stream, nothing more on the wire.
    assert!(server.is_quiet_for(Duration::from_millis(50)));
}

#[test]
fn an_unsupported_version_with_a_handshake_revision_means_the_handshake() {
    let (client, server) = connect();
    thread::scope(|scope| {
        let started = scope.spawn(|| client.initialize(Duration::from_secs(5)).map(|_| ()));
        let probe = server.next();
        let data = json!({"supported": ["2025-11-25"], "requested": "2026-07-28"});
        server.fail(&probe["id"], -32022, "Unsupported protocol version", Some(data));
        let request = server.next();
        assert_eq!(request["method"], "initialize");
        server.answer(&request["id"], initialize_result("2025-11-25"));
        assert_eq!(server.next()["method"], "notifications/initialized");
        started.join().unwrap().unwrap();
    });
    assert_eq!(client.era(), Era::Legacy);
}

#[test]
fn an_unsupported_version_with_nothing_in_common_is_no_fallback() {
    let (client, server) = connect();
    thread::scope(|scope| {
        let started = scope.spawn(|| client.initialize(Duration::from_secs(5)).map(|_| ()));
        let probe = server.next();
        let data = json!({"supported": ["2031-01-01"], "requested": "2026-07-28"});
        server.fail(&probe["id"], -32022, "Unsupported protocol version", Some(data));
        let err = started.join().unwrap().unwrap_err();
        assert!(matches!(err, Error::UnsupportedProtocol(ref v) if v == "2031-01-01"), "{err:?}");
    });
    assert!(server.is_quiet_for(Duration::from_millis(50)), "no initialize after -32022");
}

#[test]
fn a_pinned_handshake_sends_no_probe() {
    let (client, server) = connect_with(ClientOptions::default().with_era(EraChoice::Legacy));
    thread::scope(|scope| {
        let started = scope.spawn(|| client.initialize(Duration::from_secs(5)).map(|_| ()));
        let request = server.next();
        assert_eq!(request["method"], "initialize");
        server.answer(&request["id"], initialize_result("2025-11-25"));
        assert_eq!(server.next()["method"], "notifications/initialized");
        started.join().unwrap().unwrap();
    });
}

#[test]
fn input_required_goes_to_the_host_and_the_request_is_sent_again() {
    let (client, server) = connect_modern(json!({"tools": {}}));
    thread::scope(|scope| {
        let call = scope.spawn(|| client.call_tool("ask", json!({}), &CallOptions::default()));
        let first = server.next();
        server.answer(
            &first["id"],
            json!({"resultType": "input_required", "requestState": "round-1",
                   "inputRequests": {"where": {"method": "roots/list", "params": {}}}}),
        );
        let second = server.next();
        assert_ne!(first["id"], second["id"], "a retry is a new request");
        assert_eq!(second["params"]["name"], "ask");
        assert_eq!(second["params"]["requestState"], "round-1");
        assert_eq!(
            second["params"]["inputResponses"]["where"],
            json!({"roots": [{"uri": "file:///work"}]})
        );
        assert_eq!(
            second["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        // A round with state only, and the answer.
        server.answer(
            &second["id"],
            json!({"resultType": "input_required", "requestState": "round-2"}),
        );
        let third = server.next();
        assert_eq!(third["params"]["requestState"], "round-2");
        assert!(third["params"].get("inputResponses").is_none(), "no stale answers");
        server.answer(&third["id"], json!({"content": [{"type": "text", "text": "ok"}]}));
        assert_eq!(call.join().unwrap().unwrap().to_text(), "ok");
    });
}

#[test]
fn a_declined_input_request_fails_the_call_and_odd_results_are_errors() {
    let (client, server) = connect_modern(json!({"tools": {}}));
    thread::scope(|scope| {
        let call = scope.spawn(|| client.call_tool("ask", json!({}), &CallOptions::default()));
        let first = server.next();
        let elicit = json!({"method": "elicitation/create", "params": {"message": "name?"}});
        server.answer(
            &first["id"],
            json!({"resultType": "input_required", "inputRequests": {"n": elicit}}),
        );
        let err = call.join().unwrap().unwrap_err();
        assert!(matches!(err, Error::Rpc(_)), "the host declined: {err:?}");

        let list = scope.spawn(|| client.list_tools(&CallOptions::default()));
        let request = server.next();
        server.answer(&request["id"], json!({"resultType": "input_required", "requestState": "x"}));
        let err = list.join().unwrap().unwrap_err();
        assert!(matches!(err, Error::Protocol(_)), "tools/list may not ask: {err:?}");

        let list = scope.spawn(|| client.list_tools(&CallOptions::default()));
        let request = server.next();
        server.answer(&request["id"], json!({"resultType": "later", "tools": []}));
        let err = list.join().unwrap().unwrap_err();
        assert!(err.to_string().contains("unknown resultType"), "{err}");
    });
}

#[test]
fn a_list_is_kept_for_its_ttl_until_the_server_says_it_changed() {
    let (client, server) = connect_modern(json!({"tools": {}}));
    let tools = json!([{"name": "a", "inputSchema": {"type": "object"}}]);
    thread::scope(|scope| {
        let list = scope.spawn(|| client.list_tools(&CallOptions::default()));
        let request = server.next();
        server.answer(
            &request["id"],
            json!({"tools": tools, "ttlMs": 60_000, "cacheScope": "public"}),
        );
        assert_eq!(list.join().unwrap().unwrap().len(), 1);
    });
    // Kept: no request goes out.
    assert_eq!(client.list_tools(&CallOptions::default()).unwrap().len(), 1);
    assert!(server.is_quiet_for(Duration::from_millis(50)));
    server.send(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    thread::scope(|scope| {
        let list = scope.spawn(|| client.list_tools(&CallOptions::default()));
        let request = server.next();
        assert_eq!(request["method"], "tools/list", "a change makes the list stale");
        server.answer(&request["id"], json!({"tools": [], "ttlMs": 0}));
        assert_eq!(list.join().unwrap().unwrap().len(), 0);
    });
    // ttlMs 0 keeps nothing.
    thread::scope(|scope| {
        let list = scope.spawn(|| client.list_tools(&CallOptions::default()));
        let request = server.next();
        server.answer(&request["id"], json!({"tools": []}));
        list.join().unwrap().unwrap();
    });
}

#[test]
fn list_changes_are_listened_for_and_the_listen_is_cancelled_on_close() {
    let (client, server, listen) = connect_listening(Arc::new(RecordingHost::default()));
    assert_eq!(listen["params"]["notifications"], json!({"toolsListChanged": true}));
    assert_eq!(listen["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    // The server ends it gracefully: it is opened again.
    server.answer(&listen["id"], json!({"resultType": "complete"}));
    let again = server.next();
    assert_eq!(again["method"], "subscriptions/listen");
    assert_ne!(again["id"], listen["id"]);
    client.close().unwrap();
    let cancelled = server.next();
    assert_eq!(cancelled["method"], "notifications/cancelled");
    assert_eq!(cancelled["params"]["requestId"], again["id"]);
}

#[test]
fn a_lost_answer_is_asked_for_again_except_a_tool_call() {
    let (client, server) = connect_modern(json!({"tools": {}}));
    thread::scope(|scope| {
        let list = scope.spawn(|| client.list_tools(&CallOptions::default()));
        let first = server.next();
        server.lose(&first["id"], "tools/list");
        let second = server.next();
        assert_eq!(second["method"], "tools/list");
        assert_ne!(second["id"], first["id"], "sent again under a new id");
        server.answer(&second["id"], json!({"tools": []}));
        assert!(list.join().unwrap().unwrap().is_empty());

        let call = scope.spawn(|| client.call_tool("t", json!({}), &CallOptions::default()));
        let request = server.next();
        server.lose(&request["id"], "tools/call");
        let err = call.join().unwrap().unwrap_err();
        assert!(matches!(err, Error::ResponseLost { .. }), "{err:?}");
        assert!(server.is_quiet_for(Duration::from_millis(100)), "a tool call is never repeated");
    });
}

#[test]
fn a_stateless_server_gets_no_answer_to_a_request_of_its_own() {
    let (client, server) = connect_modern(json!({"tools": {}}));
    server.send(json!({"jsonrpc": "2.0", "id": "s1", "method": "ping"}));
    server.send(json!({"jsonrpc": "2.0", "id": "s2", "method": "roots/list"}));
    assert!(server.is_quiet_for(Duration::from_millis(100)), "the client writes no response");
    client.close().unwrap();
}

#[test]
fn the_listen_stream_is_reopened_when_the_server_cancels_it_and_other_subscriptions_are_dropped() {
    let host = Arc::new(RecordingHost::default());
    let (client, server, listen) = connect_listening(Arc::clone(&host) as Arc<dyn Host>);
    // Tagged with another subscription: not this client's, not delivered.
    server.send(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                       "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 999}}}));
    server.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                       "params": {"requestId": listen["id"], "reason": "shutting down"}}));
    let again = server.next();
    assert_eq!(again["method"], "subscriptions/listen", "reopened after the server ended it");
    assert_ne!(again["id"], listen["id"]);
    thread::sleep(Duration::from_millis(50));
    let seen = host.notifications.lock().unwrap().clone();
    assert!(!seen.iter().any(|method| method.ends_with("list_changed")), "{seen:?}");
    // The reopened stream's acknowledgement catches up what may have
    // changed meanwhile: the host hears of a tools list change.
    server.send(json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
        "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": again["id"]},
                   "notifications": {"toolsListChanged": true}}}));
    thread::sleep(Duration::from_millis(50));
    let seen = host.notifications.lock().unwrap().clone();
    assert!(seen.iter().any(|method| method == "notifications/tools/list_changed"), "{seen:?}");
    client.close().unwrap();
}

#[test]
fn a_list_fetched_while_it_changed_is_not_kept() {
    let (client, server) = connect_modern(json!({"tools": {}}));
    let tools = json!([{"name": "a", "inputSchema": {"type": "object"}}]);
    thread::scope(|scope| {
        let list = scope.spawn(|| client.list_tools(&CallOptions::default()));
        let request = server.next();
        // The change overtakes the (old) answer.
        server.send(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
        std::thread::sleep(Duration::from_millis(20));
        server.answer(&request["id"], json!({"tools": tools, "ttlMs": 60_000}));
        list.join().unwrap().unwrap();
    });
    thread::scope(|scope| {
        let list = scope.spawn(|| client.list_tools(&CallOptions::default()));
        let request = server.next();
        assert_eq!(request["method"], "tools/list", "asked again: the kept list may be old");
        server.answer(&request["id"], json!({"tools": []}));
        list.join().unwrap().unwrap();
    });
}

/// A host whose roots panic.
struct PanickyHost;

impl Host for PanickyHost {
    fn roots(&self) -> Vec<Root> {
        panic!("the host's roots are broken");
    }
}

#[test]
fn a_panicking_host_answers_with_an_error_and_later_requests_are_answered() {
    let (client, server) = connect_with(
        ClientOptions::default()
            .with_request_timeout(Duration::from_secs(5))
            .with_host(Arc::new(PanickyHost)),
    );
    server.send(json!({"jsonrpc": "2.0", "id": "r1", "method": "roots/list"}));
    server.send(json!({"jsonrpc": "2.0", "id": "r2", "method": "elicitation/create",
                       "params": {"message": "?"}}));
    // Each is answered on a thread of its own: in either order.
    let mut answers = [server.next(), server.next()];
    answers.sort_by_key(|answer| answer["id"].to_string());
    let [first, second] = answers;
    assert_eq!((first["id"].clone(), first["error"]["code"].clone()), (json!("r1"), json!(-32603)));
    assert_eq!(second["id"], "r2", "the request beside the panic is answered too");
    assert!(second.get("error").is_some(), "declined by the default: {second}");
    client.close().unwrap();
}

/// The progress token is written into the frame exactly where inserting it
/// into the parameters would put it (key order kept), without touching them.
#[test]
fn the_progress_token_is_written_where_inserting_it_would_put_it() {
    fn inserted(params: Option<Value>, token: i64) -> Value {
        let mut params = params;
        let object = params.get_or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(map) = object {
            let meta = map.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(meta) = meta {
                meta.insert("progressToken".to_owned(), Value::from(token));
            }
        }
        params.unwrap()
    }
    for params in [
        None,
        Some(json!({"name": "echo", "arguments": {"text": "x"}})),
        Some(json!({"a": 1, "_meta": {"x": true}, "b": 2})),
        Some(json!({"_meta": {"progressToken": "old", "y": 1}})),
        Some(json!({"_meta": "not an object"})),
        Some(json!([1, 2])),
    ] {
        let written = serde_json::to_string(&with_progress_token(params.as_ref(), 7)).unwrap();
        let expected = serde_json::to_string(&inserted(params.clone(), 7)).unwrap();
        assert_eq!(written, expected, "{params:?}");
    }
}

/// A `tools/call` written straight from its name and arguments is the very
/// frame the `Value` path writes.
#[test]
fn tool_call_params_are_written_as_the_value_path_writes_them() {
    let arguments = json!({"text": "x", "nested": {"b": [1, 2], "a": null}});
    for token in [None, Some(7)] {
        let direct = serde_json::to_string(&super::exchange::ToolCallParams {
            name: "echo",
            arguments: &arguments,
            progress_token: token,
        })
        .unwrap();
        let value = json!({"name": "echo", "arguments": arguments});
        let through_value = match token {
            Some(token) => serde_json::to_string(&with_progress_token(Some(&value), token)),
            None => serde_json::to_string(&value),
        }
        .unwrap();
        assert_eq!(direct, through_value);
    }
}
