//! Remote servers against the `http-server` fixture: one test per failure
//! path of Streamable HTTP and the legacy HTTP+SSE transport, each with a
//! time bound, and the fixture's request log to prove what went over the wire.

use std::process::{Child, Command};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tether::{
    CallOptions, Client, ClientOptions, Error, Host, HttpKind, HttpTarget, Notification, Progress,
    Transport,
};

use crate::support::{
    assert_quick, config_dir, run_tether, start_url_fixture, stderr_of, stdout_of, Tag,
};

/// A running `http-server`; killed on drop.
struct HttpFixture {
    child: Child,
    url: String,
}

impl HttpFixture {
    fn start(tag: &Tag, flags: &[&str]) -> HttpFixture {
        let (child, url) = start_url_fixture("http-server", tag, flags);
        HttpFixture { child, url }
    }

    fn target(&self, kind: HttpKind) -> Transport {
        Transport::Http(HttpTarget::new(&self.url, kind))
    }
}

impl Drop for HttpFixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn options(timeout_ms: u64) -> ClientOptions {
    ClientOptions::default()
        .with_request_timeout(Duration::from_millis(timeout_ms))
        .with_max_total_timeout(Duration::from_millis(timeout_ms * 10))
}

fn connect(server: &HttpFixture, kind: HttpKind) -> Client {
    Client::connect("web", &server.target(kind), options(10_000)).expect("connects")
}

fn echo(client: &Client, text: &str) -> Result<String, Error> {
    client
        .call_tool("echo", json!({"text": text}), &CallOptions::default())
        .map(|result| result.to_text())
}

/// The fixture's log of every HTTP request it received.
fn http_log(client: &Client) -> Vec<Value> {
    let text = client.call_tool("http_log", json!({}), &CallOptions::default()).unwrap().to_text();
    serde_json::from_str(&text).unwrap()
}

fn posts_of<'a>(log: &'a [Value], rpc_method: &str) -> Vec<&'a Value> {
    log.iter()
        .filter(|entry| entry["method"] == "POST" && entry["rpc_method"] == rpc_method)
        .collect()
}

#[test]
fn json_answers_with_the_right_headers() {
    let tag = Tag::new();
    let server = HttpFixture::start(&tag, &[]);
    let client = connect(&server, HttpKind::Streamable);
    assert_eq!(client.transport_name(), "http");
    assert!(client
        .list_tools(&CallOptions::default())
        .unwrap()
        .iter()
        .any(|tool| tool.name == "echo"));
    assert_eq!(echo(&client, "plain json").unwrap(), "plain json");
    let log = http_log(&client);
    let initialize = posts_of(&log, "initialize")[0];
    assert_eq!(initialize["headers"]["accept"], "application/json, text/event-stream");
    assert_eq!(initialize["headers"]["content-type"], "application/json");
    assert!(
        initialize["headers"].get("mcp-protocol-version").is_none(),
        "not before it is negotiated"
    );
    let call = posts_of(&log, "tools/call")[0];
    assert_eq!(call["headers"]["mcp-protocol-version"], "2025-11-25");
    // notifications/initialized was accepted with 202 and nothing else.
    assert_eq!(posts_of(&log, "notifications/initialized")[0]["status"], 202);
    client.close().unwrap();
}

#[test]
fn sse_answers_carry_progress_then_the_response() {
    let tag = Tag::new();
    let server = HttpFixture::start(&tag, &["--answer", "sse"]);
    let client = connect(&server, HttpKind::Streamable);
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&seen);
    let options = CallOptions::default().with_progress(move |_: &Progress| {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    let result =
        client.call_tool("progress", json!({"steps": 4, "interval_ms": 50}), &options).unwrap();
    assert!(!result.is_error());
    assert_eq!(seen.load(Ordering::SeqCst), 4);
    client.close().unwrap();
}

// A call POSTed on its caller's thread waits inside the socket's reads:
// progress must still reach the callback as it comes, and still move the
// timeout on (the whole call takes twice the timeout).
#[test]
fn progress_on_a_response_stream_comes_as_it_happens_and_keeps_a_short_timeout_alive() {
    let tag = Tag::new();
    let server = HttpFixture::start(&tag, &["--answer", "sse"]);
    let client = connect(&server, HttpKind::Streamable);
    let started = Instant::now();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let times = Arc::clone(&seen);
    let options = CallOptions::default()
        .with_timeout(Duration::from_millis(400))
        .with_progress(move |_: &Progress| times.lock().unwrap().push(started.elapsed()));
    let result =
        client.call_tool("progress", json!({"steps": 6, "interval_ms": 150}), &options).unwrap();
    let took = started.elapsed();
    assert_eq!(result.to_text(), "done");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 6, "{seen:?}");
    assert!(took >= Duration::from_millis(800), "{took:?}");
    assert!(
        seen[0] + Duration::from_millis(400) < took,
        "the first came at once: {seen:?}, {took:?}"
    );
    client.close().unwrap();
}

// A progress callback that makes calls of its own, on the thread that is
// reading the outer call's response stream: one as a plain call (on that
// thread too), one with a cancel handle (through a worker). All answered.
#[test]
fn a_progress_callback_may_call_the_same_server() {
    let tag = Tag::new();
    let server = HttpFixture::start(&tag, &["--answer", "sse"]);
    let client = Arc::new(connect(&server, HttpKind::Streamable));
    let inner = Arc::clone(&client);
    let answers = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&answers);
    let options = CallOptions::default().with_progress(move |progress: &Progress| {
        let text = format!("inside {}", progress.progress);
        seen.lock().unwrap().push(echo(&inner, &text).map_err(|err| err.to_string()));
        let cancellable = CallOptions::default().with_cancel(tether::CancelHandle::new());
        let answer = inner.call_tool("echo", json!({"text": text}), &cancellable);
        seen.lock().unwrap().push(answer.map(|result| result.to_text()).map_err(|e| e.to_string()));
    });
    let outer = Arc::clone(&client);
    let (done, finished) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let result = outer.call_tool("progress", json!({"steps": 3, "interval_ms": 20}), &options);
        let _ = done.send(result.map(|result| result.to_text()).map_err(|e| e.to_string()));
    });
    let result = finished.recv_timeout(Duration::from_secs(10)).expect("the outer call ends");
    assert_eq!(result, Ok("done".to_owned()));
    let answers = answers.lock().unwrap().clone();
    let expected: Vec<Result<String, String>> = (1..=3)
        .flat_map(|step| [Ok(format!("inside {step}")), Ok(format!("inside {step}"))])
        .collect();
    assert_eq!(answers, expected);
    client.close().unwrap();
}

// Closing the client while a caller waits inside its own POST: the call
// ends at once, as disconnected, and close is not held up either.
#[test]
fn closing_while_a_caller_waits_on_its_own_post_ends_the_call_at_once() {
    let tag = Tag::new();
    let server = HttpFixture::start(&tag, &["--session", "--delete"]);
    let client = Arc::new(connect(&server, HttpKind::Streamable));
    let caller = Arc::clone(&client);
    let call = thread::spawn(move || {
        let started = Instant::now();
        let outcome = caller.call_tool("sleep", json!({"ms": 5000}), &CallOptions::default());
        (outcome.map(|result| result.to_text()), started.elapsed())
    });
    thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    client.close().unwrap();
    assert_quick(started, Duration::from_secs(3), "closing with a caller's POST in flight");
    let (outcome, took) = call.join().unwrap();
    assert!(matches!(outcome, Err(Error::Disconnected(_))), "{outcome:?}");
    assert!(took < Duration::from_secs(3), "the call ended with the close: {took:?}");
    // The server was told the call is cancelled (it may refuse to end the
    // session), before the session ended.
    let other = connect(&server, HttpKind::Streamable);
    let log = http_log(&other);
    let cancelled = posts_of(&log, "notifications/cancelled");
    assert_eq!(cancelled.len(), 1, "{log:?}");
    let at = |entry: &Value| entry["at_ms"].as_u64().unwrap();
    let deleted = log.iter().find(|entry| entry["method"] == "DELETE").map(at);
    assert!(deleted.is_some_and(|deleted| at(cancelled[0]) <= deleted), "{log:?}");
    other.close().unwrap();
}

// A JSON answer slower than the caller's timeout: the caller gives up at its
// timeout (its own thread was reading), and the next call is answered.
#[test]
fn a_json_answer_slower_than_the_timeout_times_out_and_the_next_call_works() {
    let tag = Tag::new();
    let server = HttpFixture::start(&tag, &[]);
    let client = connect(&server, HttpKind::Streamable);
    let options = CallOptions::default().with_timeout(Duration::from_millis(300));
    let started = Instant::now();
    let err = client.call_tool("sleep", json!({"ms": 2000}), &options).unwrap_err();
    assert!(matches!(err, Error::Timeout(_)), "{err:?}");
    assert!(started.elapsed() >= Duration::from_millis(300), "{:?}", started.elapsed());
    assert_quick(started, Duration::from_millis(1000), "a timeout on the caller's own POST");
    assert_eq!(echo(&client, "after").unwrap(), "after");
    // The notification travels on a worker, beside the calls.
    let told = Instant::now();
    loop {
        let log = http_log(&client);
        if posts_of(&log, "notifications/cancelled").len() == 1 {
            break;
        }
        assert!(told.elapsed() < Duration::from_secs(3), "the server is told: {log:?}");
        thread::sleep(Duration::from_millis(20));
    }
    client.close().unwrap();
}

#[test]
fn a_200_body_on_a_notification_is_ignored() {
    let tag = Tag::new();
    let server = HttpFixture::start(&tag, &["--notification-body"]);
    let client = connect(&server, HttpKind::Streamable);
    assert_eq!(echo(&client, "still fine").unwrap(), "still fine");
    client.close().unwrap();
}

#[test]
fn the_session_id_is_echoed_and_deleted_at_close() {
    let tag = Tag::new();
    let server = HttpFixture::start(&tag, &["--session", "--delete"]);
    let client = connect(&server, HttpKind::Streamable);
    let log = http_log(&client);
    let session = log
        .iter()
        .find_map(|entry| entry["headers"]["mcp-session-id"].as_str())
        .unwrap()
        .to_owned();
    // The era probe and initialize go before there is a session.
    let in_session = |entry: &&Value| {
        !["initialize", "server/discover"].contains(&entry["rpc_method"].as_str().unwrap_or(""))
    };
    for entry in log.iter().filter(in_session) {
        assert_eq!(entry["headers"]["mcp-session-id"], session.as_str(), "{entry}");
    }
    client.close().unwrap();
    // A second client reads the log: the first session was ended with DELETE.
    let observer = connect(&server, HttpKind::Streamable);
    let deleted = http_log(&observer).into_iter().any(|entry| {
        entry["method"] == "DELETE" && entry["headers"]["mcp-session-id"] == session.as_str()
    });
    assert!(deleted, "no DELETE for session {session}");
    observer.close().unwrap();
}

#[test]
fn an_expired_session_is_renewed_and_the_request_retried_once() {
    let tag = Tag::new();
    let server = HttpFixture::start(&tag, &["--expire-session-after", "3"]);
    let client = connect(&server, HttpKind::Streamable);
    for i in 0..6 {
        assert_eq!(echo(&client, &format!("call {i}")).unwrap(), format!("call {i}"));
    }
    let log = http_log(&client);
    assert!(posts_of(&log, "initialize").len() >= 2, "the session was never renewed");
    assert!(log.iter().any(|entry| entry["status"] == 404));
    client.close().unwrap();
}

#[test]
fn a_dropped_response_stream_is_resumed_after_the_servers_retry_delay() {
    let tag = Tag::new();
    let server = HttpFixture::start(&tag, &["--drop-stream-after", "2", "--retry", "400"]);
    let client = connect(&server, HttpKind::Streamable);
    let started = Instant::now();
    assert_eq!(echo(&client, "resumed").unwrap(), "resumed");
    assert_quick(started, Duration::from_secs(3), "a resumed call");
    let log = http_log(&client);
    let dropped =
        log.iter().find(|entry| entry["dropped_at_ms"].is_number()).expect("a stream was dropped");
    let resume = log
        .iter()
        .find(|entry| entry["method"] == "GET" && entry["headers"]["last-event-id"].is_string())
        .expect("a GET with Last-Event-ID");
    let waited = resume["at_ms"].as_f64().unwrap() - dropped["dropped_at_ms"].as_f64().unwrap();
    // The server's retry (400 ms), not a delay of our own.
    assert!((390.0..900.0).contains(&waited), "resumed after {waited} ms");
    client.close().unwrap();
}

// A cold trial: a local server killed while a call's stream was resumed
// cost ten more pauses of its retry (1 s each here) before the call failed.
// A resume that this machine refuses fails the call at once.
#[test]
fn a_call_whose_local_server_stopped_fails_at_the_first_refused_resume() {
    let tag = Tag::new();
    let server = HttpFixture::start(&tag, &["--drop-stream-after", "1", "--retry", "1000"]);
    let client = connect(&server, HttpKind::Streamable);
    let pid = server.child.id() as i32;
    let killed = thread::spawn(move || {
        // The stream drops at once; its resume (after 1 s) waits for the
        // answer, and breaks here.
        thread::sleep(Duration::from_millis(1500));
        unsafe { libc::kill(pid, libc::SIGKILL) };
        Instant::now()
    });
    let err = client
        .call_tool("sleep", json!({"ms": 8000}), &CallOptions::default())
        .expect_err("the server is gone");
    let killed_at = killed.join().unwrap();
    assert!(
        killed_at.elapsed() < Duration::from_millis(2500),
        "failed only after {:?}",
        killed_at.elapsed()
    );
    assert!(err.chain().contains("connection refused"), "{}", err.chain());
    client.close().unwrap();
    drop(server);
    tag.assert_gone();
}

#[derive(Default)]
struct RecordingHost {
    notifications: Mutex<Vec<Notification>>,
}

impl Host for RecordingHost {
    fn notification(&self, _server: &str, notification: &Notification) {
        self.notifications.lock().unwrap().push(notification.clone());
    }
}

#[test]
fn the_get_stream_delivers_server_requests_and_notifications() {
    let tag = Tag::new();
    let server = HttpFixture::start(&tag, &["--get-stream", "--session"]);
    let host = Arc::new(RecordingHost::default());
    let client_options = options(10_000).with_host(host.clone());
    let client =
        Client::connect("web", &server.target(HttpKind::Streamable), client_options).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let replies = crate::support::client_replies(&client, 2, Duration::from_secs(5));
    let by_id =
        |id: &str| replies.iter().find(|reply| reply["id"] == id).cloned().unwrap_or(Value::Null);
    assert_eq!(by_id("g-ping")["result"], json!({}));
    assert_eq!(by_id("g-roots")["result"], json!({"roots": []}));
    // Notifications reach the host on the events thread, on their own time.
    let notified =
        || host.notifications.lock().unwrap().iter().any(|n| n.method == "notifications/message");
    while !notified() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    assert!(notified(), "the GET stream's notification did not reach the host");
    client.close().unwrap();
}

#[test]
fn a_405_on_get_is_not_fatal() {
    let tag = Tag::new();
    let server = HttpFixture::start(&tag, &[]);
    let client = connect(&server, HttpKind::Streamable);
    thread::sleep(Duration::from_millis(200));
    assert_eq!(echo(&client, "no GET stream").unwrap(), "no GET stream");
    assert!(http_log(&client)
        .iter()
        .any(|entry| entry["method"] == "GET" && entry["status"] == 405));
    client.close().unwrap();
}

#[test]
fn server_errors_are_retried_for_safe_requests_only() {
    let tag = Tag::new();
    let server = HttpFixture::start(
        &tag,
        &["--fail-status", "503", "--fail-count", "2", "--fail-method", "tools/list"],
    );
    let client = connect(&server, HttpKind::Streamable);
    let started = Instant::now();
    assert!(!client.list_tools(&CallOptions::default()).unwrap().is_empty());
    assert_quick(started, Duration::from_secs(3), "two retries");
    assert_eq!(posts_of(&http_log(&client), "tools/list").len(), 3);
    client.close().unwrap();

    let server = HttpFixture::start(
        &tag,
        &["--fail-status", "503", "--fail-count", "all", "--fail-method", "tools/list"],
    );
    let client = connect(&server, HttpKind::Streamable);
    let started = Instant::now();
    let err = client.list_tools(&CallOptions::default()).unwrap_err();
    assert!(matches!(err, Error::Http { status: Some(503), .. }), "{err:?}");
    // The first try, then one after each pause (250 ms, then 1 s): no try
    // without its pause, whichever thread made the first.
    assert!(started.elapsed() >= Duration::from_millis(1200), "{:?}", started.elapsed());
    assert_eq!(posts_of(&http_log(&client), "tools/list").len(), 3);
    client.close().unwrap();

    let server = HttpFixture::start(
        &tag,
        &["--fail-status", "500", "--fail-count", "1", "--fail-method", "tools/call"],
    );
    let client = connect(&server, HttpKind::Streamable);
    let err = echo(&client, "once").unwrap_err();
    assert!(matches!(err, Error::Http { status: Some(500), .. }), "{err:?}");
    assert_eq!(
        posts_of(&http_log(&client), "tools/call").len(),
        2,
        "the failed call was not repeated"
    );
    client.close().unwrap();
}

#[test]
fn a_401_says_what_to_configure_and_a_bearer_token_opens_the_door() {
    let tag = Tag::new();
    let server = HttpFixture::start(&tag, &["--auth-required"]);
    let started = Instant::now();
    let err = Client::connect("web", &server.target(HttpKind::Streamable), options(10_000))
        .err()
        .unwrap();
    assert_quick(started, Duration::from_secs(2), "a refused initialize");
    // OAuth is on offer, and no one here can sign in: a login is required.
    assert!(matches!(err.root(), Error::LoginRequired { .. }), "{err:?}");
    assert!(err.to_string().contains("needs a sign-in"), "{err}");
    let mut target = HttpTarget::new(&server.url, HttpKind::Streamable);
    target.bearer_token = Some("secret-token".into());
    let client = Client::connect("web", &Transport::Http(target), options(10_000)).unwrap();
    assert_eq!(echo(&client, "authorized").unwrap(), "authorized");
    client.close().unwrap();
    // A token the server refuses: the advice is to check it, not to set one.
    let mut target = HttpTarget::new(&server.url, HttpKind::Streamable);
    target.bearer_token = Some("wrong-token".into());
    let err = Client::connect("web", &Transport::Http(target), options(10_000)).err().unwrap();
    let message = err.to_string();
    assert!(message.contains("refused the credentials"), "{message}");
    assert!(!message.contains("set \"bearerTokenEnv\""), "{message}");
}

// https:// to a server that answers in plain HTTP: a TLS failure at once,
// not retried, and said as such.
#[test]
fn an_https_url_to_a_plain_http_server_says_so_at_once() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let over = Arc::clone(&done);
    listener.set_nonblocking(true).unwrap();
    let answering = thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until && !over.load(Ordering::SeqCst) {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    count.fetch_add(1, Ordering::SeqCst);
                    use std::io::{Read, Write};
                    stream.set_nonblocking(false).unwrap();
                    stream.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                    let _ = stream.read(&mut [0; 512]);
                    let _ =
                        stream.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
                }
                Err(_) => thread::sleep(Duration::from_millis(10)),
            }
        }
    });
    let url = format!("https://127.0.0.1:{port}/mcp");
    let started = Instant::now();
    let target = HttpTarget::new(&url, HttpKind::Streamable);
    let err = Client::connect("web", &Transport::Http(target), options(10_000)).err().unwrap();
    assert_quick(started, Duration::from_millis(1000), "a TLS failure");
    let message = err.to_string();
    assert!(message.contains("TLS handshake failed"), "{message}");
    assert!(message.contains("plain http://"), "{message}");
    done.store(true, Ordering::SeqCst);
    answering.join().unwrap();
    // The era probe and initialize: one connection each, no retries.
    assert!(accepted.load(Ordering::SeqCst) <= 2, "{}", accepted.load(Ordering::SeqCst));
}

#[test]
fn headers_go_on_every_request_the_get_stream_included() {
    let tag = Tag::new();
    let server = HttpFixture::start(&tag, &["--require-header", "X-Test:yes", "--get-stream"]);
    let mut target = HttpTarget::new(&server.url, HttpKind::Streamable);
    target.headers.push(("X-Test".into(), "yes".into()));
    let client = Client::connect("web", &Transport::Http(target), options(10_000)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let log = http_log(&client);
        if log.iter().any(|entry| entry["method"] == "GET" && entry["status"] == 200) {
            assert!(log.iter().all(|entry| entry["headers"]["x-test"] == "yes"), "{log:?}");
            break;
        }
        assert!(Instant::now() < deadline, "the GET stream never opened: {log:?}");
        thread::sleep(Duration::from_millis(20));
    }
    client.close().unwrap();
}

#[test]
fn a_legacy_server_that_never_names_its_endpoint_fails_within_the_start_timeout() {
    let tag = Tag::new();
    let server = HttpFixture::start(&tag, &["--mode", "sse", "--never-endpoint"]);
    let mut target = HttpTarget::new(&server.url, HttpKind::Sse);
    target.endpoint_wait = Duration::from_millis(800);
    let started = Instant::now();
    let err = Client::connect("web", &Transport::Http(target), options(10_000)).err().unwrap();
    assert_quick(started, Duration::from_secs(3), "giving up on the endpoint event");
    assert!(err.to_string().contains("never sent its endpoint event"), "{err}");
    // As configured, the endpoint's wait is the start timeout itself: the
    // reason still comes before the start's own timeout (a cold trial saw
    // only "timed out … waiting for initialize").
    let dir = crate::support::config_dir(json!({"web": {"url": server.url, "startTimeout": 2}}));
    let (output, _) = crate::support::run_tether(dir.path(), &["list"], Duration::from_secs(20));
    let out = crate::support::stdout_of(&output);
    assert!(out.contains("never sent its endpoint event"), "{out}");
}

#[test]
fn legacy_sse_and_the_fallback_from_streamable_http() {
    let tag = Tag::new();
    let server = HttpFixture::start(&tag, &["--mode", "sse", "--get-stream"]);
    let client = connect(&server, HttpKind::Sse);
    assert_eq!(echo(&client, "legacy").unwrap(), "legacy");
    client.close().unwrap();
    for flag in ["--405-on-post", "--404-on-post", "--400-on-post"] {
        let server = HttpFixture::start(&tag, &[flag]);
        let client = connect(&server, HttpKind::Auto);
        assert_eq!(client.transport_name(), "sse", "{flag}");
        assert_eq!(echo(&client, flag).unwrap(), flag);
        client.close().unwrap();
    }
}

#[test]
fn an_oversized_event_is_refused() {
    let tag = Tag::new();
    let server = HttpFixture::start(&tag, &["--huge-event", "17000000"]);
    let client = connect(&server, HttpKind::Streamable);
    let started = Instant::now();
    let err = echo(&client, "big").unwrap_err();
    assert_quick(started, Duration::from_secs(10), "refusing an oversized event");
    assert!(err.to_string().contains("over 16777216 bytes"), "{err}");
    client.close().unwrap();
}

#[test]
fn a_slow_drip_body_hits_the_timeout_and_close_is_not_held_up() {
    let tag = Tag::new();
    // One byte every 5 ms: initialize's answer takes about a second, and an
    // echo of 1000 characters five.
    let server = HttpFixture::start(&tag, &["--slow-drip", "5"]);
    let client = connect(&server, HttpKind::Streamable);
    let options = CallOptions::default().with_timeout(Duration::from_millis(500));
    let started = Instant::now();
    let err = client.call_tool("echo", json!({"text": "drip".repeat(250)}), &options).unwrap_err();
    assert!(matches!(err, Error::Timeout(_)), "{err:?}");
    assert_quick(started, Duration::from_millis(1500), "a timeout over HTTP");
    let started = Instant::now();
    client.close().unwrap();
    assert_quick(started, Duration::from_secs(3), "closing with a read in flight");
}

#[test]
fn the_cli_lists_and_calls_remote_servers() {
    let tag = Tag::new();
    let streamable = HttpFixture::start(&tag, &["--session"]);
    let legacy = HttpFixture::start(&tag, &["--405-on-post"]);
    let dir = config_dir(json!({
        "web": {"url": streamable.url},
        "old": {"url": legacy.url},
        "locked": {"url": streamable.url, "type": "http", "bearerTokenEnv": "TETHER_TEST_UNSET_TOKEN"},
    }));
    let (output, _) = run_tether(dir.path(), &["list"], Duration::from_secs(20));
    let out = stdout_of(&output);
    assert!(out.contains("web     connected  http"), "{out}");
    assert!(out.contains("old     connected  sse "), "{out}");
    assert!(
        out.contains("locked  failed") && out.contains("TETHER_TEST_UNSET_TOKEN, which is not set"),
        "{out}"
    );
    let (output, _) = run_tether(
        dir.path(),
        &["call", "web", "echo", r#"{"text":"via cli"}"#],
        Duration::from_secs(20),
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(stdout_of(&output), "via cli\n");
}

/// Accepts every elicitation with the name "tether".
struct NamingHost;

impl Host for NamingHost {
    fn handles_elicitation(&self) -> bool {
        true
    }

    fn elicit(&self, _server: &str, _params: &Value) -> Result<Value, tether::RpcError> {
        Ok(json!({"action": "accept", "content": {"name": "tether"}}))
    }
}

fn index_of(log: &[Value], found: impl Fn(&Value) -> bool) -> Option<usize> {
    log.iter().position(found)
}

// Issue 8: `notifications/initialized` must be on the wire before any other
// request, and the GET stream open before `connect` returns.
#[test]
fn issue_8_the_session_starts_in_order() {
    let tag = Tag::new();
    let server = HttpFixture::start(&tag, &["--get-stream", "--session"]);
    for round in 0..20 {
        let client = connect(&server, HttpKind::Streamable);
        client.list_tools(&CallOptions::default()).unwrap();
        let log = http_log(&client);
        client.close().unwrap();
        // This client's requests: from its (last) initialize on.
        let start = log.iter().rposition(|entry| entry["rpc_method"] == "initialize").unwrap();
        let log = &log[start..];
        let initialized = index_of(log, |e| e["rpc_method"] == "notifications/initialized");
        let tools_list = index_of(log, |e| e["rpc_method"] == "tools/list");
        let get = index_of(log, |e| e["method"] == "GET");
        let first_call = index_of(log, |e| e["rpc_method"] == "tools/call");
        assert!(initialized < tools_list, "round {round}: {log:?}");
        assert!(get.is_some() && get < tools_list && get < first_call, "round {round}: {log:?}");
    }
}

// Issue 8: a server that asks on the GET stream while a tool runs (the
// TypeScript SDK's servers do, for requests not tied to a POST) is answered.
#[test]
fn issue_8_an_elicitation_on_the_get_stream_during_a_call_is_answered() {
    let tag = Tag::new();
    let server = HttpFixture::start(&tag, &["--get-stream", "--session"]);
    for round in 0..20 {
        let client_options = options(10_000).with_host(Arc::new(NamingHost));
        let client =
            Client::connect("web", &server.target(HttpKind::Streamable), client_options).unwrap();
        let started = Instant::now();
        let result = client.call_tool("elicit_on_get", json!({}), &CallOptions::default()).unwrap();
        assert!(!result.is_error(), "round {round}: {}", result.to_text());
        assert!(result.to_text().contains("tether"), "round {round}: {}", result.to_text());
        assert_quick(started, Duration::from_secs(3), "an elicitation on the GET stream");
        client.close().unwrap();
    }
}

// Issue 8: with the GET stream open from the start, the only GET after a
// dropped response stream is the resumption with `Last-Event-ID`.
#[test]
fn issue_8_a_dropped_stream_is_resumed_with_last_event_id_every_time() {
    let tag = Tag::new();
    let server = HttpFixture::start(
        &tag,
        &["--get-stream", "--session", "--drop-stream-after", "2", "--retry", "50"],
    );
    for round in 0..20 {
        let client = connect(&server, HttpKind::Streamable);
        assert_eq!(echo(&client, "resumed").unwrap(), "resumed", "round {round}");
        let log = http_log(&client);
        client.close().unwrap();
        let start = log.iter().rposition(|entry| entry["rpc_method"] == "initialize").unwrap();
        let log = &log[start..];
        let echo_post = index_of(log, |e| e["rpc_method"] == "tools/call").unwrap();
        let after: Vec<&Value> = log[echo_post..].iter().filter(|e| e["method"] == "GET").collect();
        assert!(!after.is_empty(), "round {round}: no resumption: {log:?}");
        for get in after {
            assert!(get["headers"]["last-event-id"].is_string(), "round {round}: {get}");
        }
    }
}

// Issue 8: a session that expires under many calls at once is renewed once;
// the other workers wait for that renewal (no lock is held while it runs)
// and retry on the new session.
#[test]
fn issue_8_an_expired_session_is_renewed_once_for_many_calls_in_flight() {
    let tag = Tag::new();
    let server = HttpFixture::start(&tag, &["--expire-session-after", "20"]);
    let client = connect(&server, HttpKind::Streamable);
    let answers: Vec<Result<String, Error>> = thread::scope(|scope| {
        let calls: Vec<_> = (0..30)
            .map(|i| {
                let client = &client;
                scope.spawn(move || echo(client, &format!("call {i}")))
            })
            .collect();
        calls.into_iter().map(|call| call.join().unwrap()).collect()
    });
    for (i, answer) in answers.into_iter().enumerate() {
        assert_eq!(answer.unwrap(), format!("call {i}"));
    }
    let log = http_log(&client);
    assert_eq!(posts_of(&log, "initialize").len(), 2, "one renewal for every expired call");
    let expired: Vec<&Value> = posts_of(&log, "tools/call")
        .into_iter()
        .filter(|post| post["status"] == 404)
        .map(|post| &post["rpc_id"])
        .collect();
    let mut once = expired.clone();
    once.sort_by_key(|id| id.as_i64());
    once.dedup();
    assert_eq!(once.len(), expired.len(), "a call met the expired session twice: {expired:?}");
    client.close().unwrap();
}

/// Gives the token the `--auth-required` fixture takes, and counts asks.
struct Vault(AtomicUsize);

impl tether::TokenProvider for Vault {
    fn token(&self, server: &str) -> Result<String, Error> {
        assert_eq!(server, "web");
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok("secret-token".into())
    }
}

// Issue 9: a host's token provider, named by an entry's "auth".
#[test]
fn a_token_provider_the_host_registered_authorizes_every_request() {
    let tag = Tag::new();
    let server = HttpFixture::start(&tag, &["--auth-required"]);
    let config = tether::Config::from_json(
        &json!({"mcpServers": {
            "web": {"url": server.url, "auth": {"provider": "vault"}},
            "other": {"url": server.url, "auth": {"provider": "nobody"}},
        }})
        .to_string(),
    );
    let vault = Arc::new(Vault(AtomicUsize::new(0)));
    let hub = tether::Hub::start(
        config,
        tether::HubOptions::default().with_token_provider("vault", vault.clone()),
    );
    let result = hub.call(
        "mcp__web__echo",
        json!({"text": "with a provided token"}),
        &CallOptions::default(),
    );
    assert_eq!(result.unwrap().to_text(), "with a provided token");
    assert!(vault.0.load(Ordering::SeqCst) >= 3, "asked before every request");
    let other = hub.status().into_iter().find(|status| status.name == "other").unwrap();
    let error = other.error.unwrap().to_string();
    assert!(error.contains("did not register"), "{error}");
    hub.shutdown();
}

// Issue 12 (item 4): credentials never follow a redirect to another origin;
// a 307/308 on the same origin is followed.
#[test]
fn redirects_are_followed_on_the_same_origin_only() {
    let tag = Tag::new();
    let same = HttpFixture::start(&tag, &["--moved-to", "/moved"]);
    let mut target = HttpTarget::new(&same.url, HttpKind::Streamable);
    target.headers.push(("X-Api-Key".into(), "k-same".into()));
    let client = Client::connect("web", &Transport::Http(target), options(10_000)).unwrap();
    assert_eq!(echo(&client, "moved").unwrap(), "moved");
    assert!(http_log(&client).iter().any(|entry| entry["path"] == "/moved"));
    client.close().unwrap();

    let elsewhere = HttpFixture::start(&tag, &[]);
    let moved = elsewhere.url.replace("/mcp", "/moved");
    let away = HttpFixture::start(&tag, &["--moved-to", &moved]);
    let mut target = HttpTarget::new(&away.url, HttpKind::Streamable);
    target.headers.push(("X-Test".into(), "planted-key".into()));
    let err = Client::connect("web", &Transport::Http(target), options(10_000)).err().unwrap();
    assert!(err.to_string().contains("another origin"), "{err}");
    // Where to: the user may move the entry there.
    assert!(err.to_string().contains(&format!("the server moved to {moved}")), "{err}");
    let observer = connect(&elsewhere, HttpKind::Streamable);
    let seen = http_log(&observer);
    assert!(seen.iter().all(|entry| entry["headers"].get("x-test").is_none()), "{seen:?}");
    observer.close().unwrap();
}

// Issue 12 (item 2): a server that sends requests on its GET stream faster
// than it takes the answers makes tether drop answers, not grow.
#[test]
fn a_request_flood_with_slow_answers_keeps_memory_bounded() {
    let tag = Tag::new();
    let server =
        HttpFixture::start(&tag, &["--get-stream", "--flood-requests", "--slow-replies", "200"]);
    let dir = config_dir(json!({"web": {"url": server.url, "type": "http"}}));
    let mut child = Command::new(crate::support::tether_bin())
        .arg("--config-dir")
        .arg(dir.path())
        .args(["call", "web", "sleep", r#"{"ms": 5000}"#])
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut samples = Vec::new();
    for _ in 0..5 {
        thread::sleep(Duration::from_secs(1));
        samples.extend(crate::support::rss_kib(child.id()));
    }
    let _ = crate::support::wait_within(&mut child, Duration::from_secs(20));
    eprintln!("tether's RSS during the flood, KiB, one a second: {samples:?}");
    let peak = samples.iter().copied().max().unwrap_or(0);
    assert!(peak < 64 * 1024, "tether grew to {peak} KiB: {samples:?}");
    let growth = samples.last().unwrap_or(&0).saturating_sub(samples[0]);
    assert!(growth < 8 * 1024, "tether kept growing: {samples:?} KiB");
}

// Issue 12 (item 5): at RUST_LOG=trace and -vvv, nothing secret about a
// remote server reaches the terminal: not a header value from ${VAR} or a
// !command, not the bearer token, not a key in the URL's query.
#[test]
fn trace_logs_of_remote_servers_show_no_secret() {
    let tag = Tag::new();
    let server = HttpFixture::start(&tag, &[]);
    let url = format!("{}?key=planted-query-33", server.url);
    let dir = config_dir(json!({
        "web": {
            "url": url,
            "type": "http",
            "headers": {"X-Api-Key": "${TETHER_TEST_SECRET}", "X-Helper": "!echo planted-helper-22"},
            "bearerTokenEnv": "TETHER_TEST_TOKEN",
        },
    }));
    let mut everything = String::new();
    for (verbosity, args) in [
        (Some("trace"), &["list"][..]),
        (None, &["-vvv", "call", "web", "echo", r#"{"text":"hi"}"#][..]),
    ] {
        let mut command = Command::new(crate::support::tether_bin());
        command
            .arg("--config-dir")
            .arg(dir.path())
            .args(args)
            .env("TETHER_TEST_SECRET", "planted-header-11")
            .env("TETHER_TEST_TOKEN", "planted-token-44")
            .env_remove("RUST_LOG");
        if let Some(level) = verbosity {
            command.env("RUST_LOG", level);
        }
        let (output, _) = crate::support::run_command(command, None, Duration::from_secs(20));
        everything.push_str(&stdout_of(&output));
        everything.push_str(&stderr_of(&output));
    }
    assert!(everything.contains("TRACE"), "trace logging was on: {everything}");
    assert!(everything.contains("hi"), "the call went through: {everything}");
    assert!(!everything.contains("planted"), "a secret leaked:\n{everything}");
}

// Issue 13 (item 10): a Streamable HTTP server configured as SSE is said so,
// with the fix, in the server's terms (its HTTP status).
#[test]
fn a_streamable_server_configured_as_sse_gets_a_hint() {
    let tag = Tag::new();
    let server = HttpFixture::start(&tag, &[]);
    let dir = config_dir(json!({"web": {"url": server.url, "type": "sse"}}));
    let (output, _) = run_tether(dir.path(), &["list"], Duration::from_secs(20));
    let out = stdout_of(&output);
    assert!(out.contains("error: HTTP 405"), "{out}");
    assert!(out.contains("set \"type\": \"http\""), "{out}");
}

// A cold trial of the API: with a 1 s timeout, nothing listening at the URL
// was "timed out … waiting for server/discover": the retry's 1 s pause
// outlasted the caller. A pause that cannot end in time is not taken, and
// the refusal is what the caller hears.
#[test]
fn a_refused_connection_is_said_even_with_a_short_timeout() {
    let options = ClientOptions::default().with_request_timeout(Duration::from_secs(1));
    let started = Instant::now();
    let target = HttpTarget::new("http://127.0.0.1:9/mcp", HttpKind::Streamable);
    let err = Client::connect("web", &Transport::Http(target), options).err().unwrap();
    assert!(err.to_string().contains("connection refused"), "{err}");
    assert!(!matches!(err.root(), Error::Timeout(_)), "{err:?}");
    assert_quick(started, Duration::from_secs(1), "a refused connection");
}

// Found reading the change back: the hand-off's pause (for a first try made
// on the caller's thread) was taken from the pauses of every request, so a
// request a worker sent first had one retry fewer. The legacy transport's
// requests always go through a worker: two failures, then the answer.
#[test]
fn a_worker_retries_after_each_pause() {
    let tag = Tag::new();
    let server = HttpFixture::start(
        &tag,
        &[
            "--mode",
            "sse",
            "--fail-status",
            "503",
            "--fail-count",
            "2",
            "--fail-method",
            "tools/list",
        ],
    );
    let client = connect(&server, HttpKind::Sse);
    assert!(!client.list_tools(&CallOptions::default()).unwrap().is_empty());
    assert_eq!(posts_of(&http_log(&client), "tools/list").len(), 3);
    client.close().unwrap();
}

// Issue 26 (item 2): a URL on this machine where nothing listens fails at
// once: a refused connection is not retried (nothing there changes in the
// time a retry waits). Before: 1.28 s of retry pauses.
#[test]
fn a_refused_loopback_url_fails_at_once() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let dir = crate::support::config_dir(json!({"gone": {"url": url}}));
    let began = Instant::now();
    let (output, _) = crate::support::run_tether(dir.path(), &["list"], Duration::from_secs(20));
    let took = began.elapsed();
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(out.contains("connection refused"), "{out}");
    eprintln!("a refused loopback URL: `tether list` took {took:?}");
    assert!(took < Duration::from_millis(500), "took {took:?}");
    let client = Client::connect(
        "gone",
        &Transport::Http(HttpTarget::new(&url, HttpKind::Streamable)),
        ClientOptions::default(),
    );
    assert!(client.is_err());
    // Most of it, in a debug build, is reading the system's CA bundle;
    // a retry would pause 250 ms first.
    let library = began.elapsed() - took;
    assert!(library < Duration::from_millis(250), "the library too: {library:?}");
}

// Issue 26 (item 10): a header from a `!command` (a short-lived token, as
// Claude Code's headersHelper gives) is taken again once when the server
// refuses it, with 401 or 403; a value refused twice fails with the refusal.
#[test]
fn a_header_command_runs_again_once_when_the_server_refuses_its_value() {
    let cases: [(&[&str], &str, &str, &str); 2] = [
        (&["--auth-required"], "Authorization", "Bearer stale", "Bearer secret-token"),
        (&["--require-header", "X-Api-Key:k1"], "X-Api-Key", "k0", "k1"),
    ];
    for (flags, header, stale, fresh) in cases {
        let tag = Tag::new();
        let server = HttpFixture::start(&tag, flags);
        let dir = crate::support::TempDir::new();
        // Stale the first time it runs, fresh after.
        let script = dir.write(
            "token.sh",
            &format!(
                "n=$(cat \"$0.n\" 2>/dev/null || echo 0)\necho $((n + 1)) > \"$0.n\"\n\
                 if [ \"$n\" = 0 ]; then echo '{stale}'; else echo '{fresh}'; fi\n"
            ),
        );
        let runs = || std::fs::read_to_string(script.with_extension("sh.n")).unwrap_or_default();
        let entry = json!({"url": server.url, "type": "http",
            "headers": {header: format!("!sh {}", script.display())}});
        dir.write("mcp.json", &json!({"mcpServers": {"web": entry}}).to_string());
        let (output, _) = crate::support::run_tether(
            dir.path(),
            &["call", "web", "echo", "text=hi"],
            Duration::from_secs(20),
        );
        let said = crate::support::stderr_of(&output);
        assert_eq!(output.status.code(), Some(0), "{header}: {said}");
        assert_eq!(crate::support::stdout_of(&output).trim(), "hi");
        assert_eq!(runs().trim(), "2", "{header}: once at load, once after the refusal");

        // Refused again after the second run: the refusal is said, and the
        // command ran once more only.
        std::fs::write(script.with_extension("sh.n"), "0").unwrap();
        let wrong = dir.write("wrong.sh", "echo nope\n");
        let entry = json!({"url": server.url, "type": "http",
            "headers": {header: format!("!sh {}", wrong.display())}});
        dir.write("mcp.json", &json!({"mcpServers": {"web": entry}}).to_string());
        let (output, _) = crate::support::run_tether(
            dir.path(),
            &["call", "web", "echo", "text=hi"],
            Duration::from_secs(20),
        );
        assert_ne!(output.status.code(), Some(0), "{header}");
        let said = crate::support::stderr_of(&output);
        assert!(said.contains("401") || said.contains("403"), "{header}: {said}");
    }
}

// Issue 25 (item 3): a long call run as a task outlives its session: while
// it is polled, the server forgets the session again and again (every 3
// requests); each time the session is renewed and the polling goes on with
// the same task, to its result.
#[test]
fn a_task_call_outlives_its_session() {
    let tag = Tag::new();
    let server = HttpFixture::start(&tag, &["--tasks", "--expire-session-after", "3"]);
    let client = connect(&server, HttpKind::Streamable);
    client.list_tools(&CallOptions::default()).unwrap();
    let result = client.call_tool("task_job", json!({"ms": 700}), &CallOptions::default()).unwrap();
    assert_eq!(result.to_text(), "job done after 700 ms");
    let log = http_log(&client);
    assert!(posts_of(&log, "initialize").len() >= 3, "the session was not renewed mid-task");
    assert!(posts_of(&log, "tasks/get").len() >= 3);
    // The job's call, and this log's (taken, not refused by an expired
    // session): the job was not called again.
    let taken = posts_of(&log, "tools/call").iter().filter(|post| post["status"] == 200).count();
    assert!(taken <= 2, "{log:?}");
    client.close().unwrap();
}
