//! The stdio client against the `misbehave` fixture: one test per failure
//! path, each asserting the outcome, a time bound, and that no process of
//! the test is left behind.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tether::{
    CallOptions, CancelHandle, Client, CloseReason, Error, Host, LogLevel, Notification, Root,
    RpcError, StdioCommand, Transport,
};

use crate::support::{assert_quick, client_replies, fixture, misbehave, quick, Tag};

fn connect(tag: &Tag, flags: &[&str]) -> Client {
    Client::connect("fx", &misbehave(tag, flags), quick(5_000)).expect("connects")
}

fn echo(client: &Client, text: &str) -> Result<String, Error> {
    client
        .call_tool("echo", json!({"text": text}), &CallOptions::default())
        .map(|result| result.to_text())
}

fn close_and_check(client: Client, tag: &Tag) {
    let started = Instant::now();
    client.close().unwrap();
    assert_quick(started, Duration::from_secs(1), "closing a well-behaved server");
    drop(client);
    tag.assert_gone();
}

#[test]
fn handshake_lists_tools_and_calls() {
    let tag = Tag::new();
    let client = connect(&tag, &[]);
    let info = client.server_info().unwrap();
    assert_eq!(info.protocol_version, "2025-11-25");
    let tools = client.list_tools(&CallOptions::default()).unwrap();
    assert!(tools.iter().any(|tool| tool.name == "echo"));
    assert_eq!(echo(&client, "hello").unwrap(), "hello");
    close_and_check(client, &tag);
}

#[test]
fn crash_mid_call_fails_the_pending_call_at_once() {
    let tag = Tag::new();
    let client =
        Client::connect("fx", &misbehave(&tag, &["--crash-on-call", "2"]), quick(30_000)).unwrap();
    assert_eq!(echo(&client, "one").unwrap(), "one");
    let started = Instant::now();
    let err = echo(&client, "two").unwrap_err();
    assert_quick(started, Duration::from_secs(2), "a crash to fail the call (timeout is 30 s)");
    // In the server's terms: how it ended (misbehave exits with 3).
    let exited = CloseReason::Exited { code: Some(3), signal: None };
    assert!(matches!(err, Error::Disconnected(ref reason) if *reason == exited), "{err:?}");
    assert_eq!(err.to_string(), "the server exited with status 3");
    // Later calls fail at once, without being sent.
    assert!(matches!(echo(&client, "three"), Err(Error::Disconnected(_))));
    assert!(client.stderr_tail().unwrap().contains("crashing now"));
    // The crashed server is reaped at once, not left a zombie until close.
    let deadline = Instant::now() + Duration::from_secs(2);
    while !tag.all_processes().is_empty() {
        assert!(Instant::now() < deadline, "still there: {:?}", tag.all_processes());
        thread::sleep(Duration::from_millis(10));
    }
    close_and_check(client, &tag);
}

#[test]
fn exit_during_initialize_is_reported_with_stderr() {
    let tag = Tag::new();
    let started = Instant::now();
    let client =
        Client::start("fx", &misbehave(&tag, &["--exit-during-initialize"]), quick(30_000))
            .unwrap();
    let err = client.initialize(Duration::from_secs(30)).unwrap_err();
    assert_quick(started, Duration::from_secs(2), "an exit during initialize to be noticed");
    let exited = CloseReason::Exited { code: Some(2), signal: None };
    assert!(matches!(err, Error::Disconnected(ref reason) if *reason == exited), "{err:?}");
    assert!(client.stderr_tail().unwrap().contains("fatal: cannot start"));
    close_and_check(client, &tag);
}

#[test]
fn a_call_that_is_never_answered_times_out_and_later_calls_still_work() {
    let tag = Tag::new();
    let client = connect(&tag, &["--never-answer"]);
    let started = Instant::now();
    let options = CallOptions::default().with_timeout(Duration::from_millis(300));
    let err = client.call_tool("echo", json!({"text": "x"}), &options).unwrap_err();
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(300) && elapsed < Duration::from_secs(2),
        "{elapsed:?}"
    );
    match err {
        Error::Timeout(timeout) => assert_eq!(timeout.method, "tools/call"),
        other => panic!("expected a timeout, got {other:?}"),
    }
    // The connection survives a timeout: other requests still work.
    assert!(client.request("ping", None, &CallOptions::default()).is_ok());
    close_and_check(client, &tag);
}

#[test]
fn a_late_answer_is_dropped_and_does_not_confuse_the_next_call() {
    let tag = Tag::new();
    let client = connect(&tag, &["--slow", "400"]);
    let options = CallOptions::default().with_timeout(Duration::from_millis(100));
    assert!(matches!(
        client.call_tool("echo", json!({"text": "late"}), &options),
        Err(Error::Timeout(_))
    ));
    // The late answer to "late" arrives while this call waits; it must not be taken for it.
    assert_eq!(echo(&client, "fresh").unwrap(), "fresh");
    // The server was told that the first call was given up.
    let cancelled = notifications_named(&client, "notifications/cancelled");
    assert_eq!(cancelled.len(), 1, "{cancelled:?}");
    assert_eq!(cancelled[0]["params"]["reason"], "timed out");
    assert!(cancelled[0]["params"]["requestId"].is_i64());
    close_and_check(client, &tag);
}

#[test]
fn slow_answers_are_multiplexed_not_serialised() {
    let tag = Tag::new();
    let client = Arc::new(connect(&tag, &["--slow", "300"]));
    let started = Instant::now();
    let callers: Vec<_> = (0..16)
        .map(|i| {
            let client = Arc::clone(&client);
            thread::spawn(move || echo(&client, &format!("call {i}")).unwrap())
        })
        .collect();
    for (i, caller) in callers.into_iter().enumerate() {
        assert_eq!(caller.join().unwrap(), format!("call {i}"));
    }
    // Sixteen 300 ms answers in flight at once take about 300 ms, not 4.8 s.
    assert_quick(started, Duration::from_millis(2500), "16 slow calls in flight");
    let client = Arc::into_inner(client).unwrap();
    close_and_check(client, &tag);
}

#[test]
fn sixteen_threads_calling_at_once_each_get_their_own_answer() {
    let tag = Tag::new();
    let client = Arc::new(connect(&tag, &[]));
    let callers: Vec<_> = (0..16)
        .map(|thread_index| {
            let client = Arc::clone(&client);
            thread::spawn(move || {
                for call_index in 0..200 {
                    let text = format!("{thread_index}-{call_index}");
                    assert_eq!(echo(&client, &text).unwrap(), text);
                }
            })
        })
        .collect();
    for caller in callers {
        caller.join().unwrap();
    }
    let client = Arc::into_inner(client).unwrap();
    close_and_check(client, &tag);
}

#[test]
fn garbage_and_invalid_utf8_lines_are_skipped() {
    let tag = Tag::new();
    let client = connect(&tag, &["--garbage"]);
    for i in 0..5 {
        assert_eq!(echo(&client, &format!("x{i}")).unwrap(), format!("x{i}"));
    }
    close_and_check(client, &tag);
}

// A cold trial: an answer whose text was Latin-1, not UTF-8, was skipped as
// "not JSON-RPC", and its call waited for its whole timeout. Its bad bytes
// now read as U+FFFD, and the answer arrives.
#[test]
fn an_answer_that_is_not_utf8_still_reaches_its_caller() {
    let tag = Tag::new();
    let client = connect(&tag, &["--latin1"]);
    let started = Instant::now();
    let options = CallOptions::default().with_timeout(Duration::from_secs(10));
    let result = client.call_tool("echo", json!({"text": "café"}), &options).unwrap();
    assert_eq!(result.to_text(), "caf\u{fffd}");
    assert_quick(started, Duration::from_secs(2), "an answer in Latin-1");
    client.close().unwrap();
}

#[test]
fn a_server_that_sends_only_garbage_fails_initialize_with_a_reason() {
    let tag = Tag::new();
    let started = Instant::now();
    let err =
        Client::connect("fx", &misbehave(&tag, &["--garbage-only"]), quick(500)).err().unwrap();
    assert_quick(started, Duration::from_secs(2), "initialize against garbage");
    assert!(err.to_string().contains("not JSON-RPC"), "{err}");
    // How long it waited, which is all the start timeout (a cold trial).
    assert!(err.to_string().contains("before its time ran out"), "{err}");
    tag.assert_gone();
}

#[test]
fn responses_with_wrong_ids_are_ignored() {
    let tag = Tag::new();
    let client = connect(&tag, &["--wrong-ids"]);
    assert_eq!(echo(&client, "a").unwrap(), "a");
    assert_eq!(echo(&client, "b").unwrap(), "b");
    close_and_check(client, &tag);
}

#[derive(Default)]
struct RecordingHost {
    notifications: Mutex<Vec<String>>,
    roots: Vec<Root>,
}

impl Host for RecordingHost {
    fn roots(&self) -> Vec<Root> {
        self.roots.clone()
    }

    fn notification(&self, _server: &str, notification: &Notification) {
        self.notifications.lock().unwrap().push(notification.method.clone());
    }
}

#[test]
fn interleaved_notifications_reach_the_host_and_calls_still_answer() {
    let tag = Tag::new();
    let host = Arc::new(RecordingHost::default());
    let options = quick(5_000).with_host(host.clone());
    let client = Client::connect("fx", &misbehave(&tag, &["--notify", "6"]), options).unwrap();
    for i in 0..3 {
        assert_eq!(echo(&client, &i.to_string()).unwrap(), i.to_string());
    }
    close_and_check(client, &tag);
    let seen = host.notifications.lock().unwrap().clone();
    assert_eq!(seen.len(), 18, "{seen:?}");
    assert!(seen.contains(&"notifications/message".to_owned()));
    assert!(seen.contains(&"notifications/tools/list_changed".to_owned()));
    assert!(seen.contains(&"notifications/whatever".to_owned()));
}

#[test]
fn a_15_mib_frame_is_read() {
    let tag = Tag::new();
    let client = connect(&tag, &[]);
    let bytes = 15 * 1024 * 1024;
    let result =
        client.call_tool("huge", json!({"bytes": bytes}), &CallOptions::default()).unwrap();
    assert_eq!(result.to_text().len(), bytes);
    close_and_check(client, &tag);
}

#[test]
fn a_20_mib_frame_is_refused_and_fails_the_connection() {
    let tag = Tag::new();
    let client = Client::connect("fx", &misbehave(&tag, &[]), quick(30_000)).unwrap();
    let started = Instant::now();
    let err = client
        .call_tool("huge", json!({"bytes": 20 * 1024 * 1024}), &CallOptions::default())
        .unwrap_err();
    assert_quick(started, Duration::from_secs(5), "refusing a 20 MiB frame");
    assert!(matches!(err, Error::Disconnected(CloseReason::FrameTooLarge { .. })), "{err:?}");
    assert!(err.to_string().contains("frame too large"), "{err}");
    close_and_check(client, &tag);
}

#[test]
fn content_length_framing_is_understood() {
    let tag = Tag::new();
    let client = connect(&tag, &["--content-length"]);
    assert_eq!(echo(&client, "framed").unwrap(), "framed");
    close_and_check(client, &tag);
}

#[test]
fn a_stderr_flood_never_blocks_the_server_and_only_the_tail_is_kept() {
    let tag = Tag::new();
    let started = Instant::now();
    let client = connect(&tag, &["--stderr-flood", "8"]);
    assert_quick(started, Duration::from_secs(5), "starting a server that floods stderr");
    assert_eq!(echo(&client, "after flood").unwrap(), "after flood");
    let tail = client.stderr_tail().unwrap();
    assert!(tail.len() <= 64 * 1024, "{}", tail.len());
    assert!(tail.contains("flood done"));
    close_and_check(client, &tag);
}

/// Sees stderr lines, slowly.
#[derive(Default)]
struct SlowStderrHost {
    lines: Mutex<Vec<(String, String)>>,
}

impl Host for SlowStderrHost {
    fn stderr(&self, server: &str, line: &str) {
        self.lines.lock().unwrap().push((server.to_owned(), line.to_owned()));
        thread::sleep(Duration::from_millis(100));
    }
}

/// Every server's stderr is drained by one shared thread: several servers
/// flooding it at once each keep their own tail, and a host that takes
/// 100 ms per line holds up none of them (nor a quiet one beside them);
/// their lines reach the host, each under its server's name.
#[test]
fn stderr_floods_of_many_servers_at_once_are_drained_past_a_slow_host() {
    let tag = Tag::new();
    let host = Arc::new(SlowStderrHost::default());
    let started = Instant::now();
    let command = misbehave(&tag, &["--stderr-flood", "4"]);
    let starts: Vec<_> = (0..3)
        .map(|n| {
            let (command, options) = (command.clone(), quick(10_000).with_host(host.clone()));
            thread::spawn(move || Client::connect(&format!("flood{n}"), &command, options))
        })
        .collect();
    let flooders: Vec<Client> =
        starts.into_iter().map(|start| start.join().unwrap().unwrap()).collect();
    let quiet =
        Client::connect("quiet", &misbehave(&tag, &[]), quick(5_000).with_host(host.clone()))
            .unwrap();
    assert_quick(started, Duration::from_secs(8), "starting three servers that flood stderr");
    assert_eq!(echo(&quiet, "quiet").unwrap(), "quiet");
    for client in &flooders {
        assert_eq!(echo(client, "after flood").unwrap(), "after flood");
        let tail = client.stderr_tail().unwrap();
        assert!(tail.len() <= 64 * 1024 && tail.contains("flood done"), "{}", tail.len());
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let lines = host.lines.lock().unwrap().clone();
        let seen = |server: &str| {
            lines.iter().any(|(from, line)| from == server && line.starts_with("flood line"))
        };
        if seen("flood0") && seen("flood1") && seen("flood2") {
            break;
        }
        assert!(Instant::now() < deadline, "not every server's lines reached the host");
        thread::sleep(Duration::from_millis(20));
    }
    let closing = Instant::now();
    for client in flooders {
        client.close().unwrap();
    }
    quiet.close().unwrap();
    // Each close gives the events thread, busy in the slow handler, 1 s.
    assert_quick(closing, Duration::from_secs(6), "closing past a slow stderr handler");
    tag.assert_gone();
}

/// Holds every stderr line until opened; records notifications.
#[derive(Default)]
struct GatedStderrHost {
    open: Mutex<bool>,
    opened: Condvar,
    notifications: Mutex<Vec<String>>,
}

impl Host for GatedStderrHost {
    fn stderr(&self, _server: &str, _line: &str) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
    }

    fn notification(&self, _server: &str, notification: &Notification) {
        self.notifications.lock().unwrap().push(notification.method.clone());
    }
}

/// Stderr lines wait apart from the server's requests and notifications:
/// with the host's stderr handler stuck for 7 s while the server writes a
/// line every millisecond (200 a second are handed on), more lines pile up
/// than the 1024 requests and notifications the queue holds, yet the
/// server's notification gets through once the handler moves again.
#[test]
fn stderr_lines_never_crowd_out_a_servers_notifications() {
    /// Opens the gate however the test ends, so no thread stays stuck in it.
    struct Opener(Arc<GatedStderrHost>);
    impl Drop for Opener {
        fn drop(&mut self) {
            *self.0.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = true;
            self.0.opened.notify_all();
        }
    }
    let tag = Tag::new();
    let host = Arc::new(GatedStderrHost::default());
    let opener = Opener(host.clone());
    let options = quick(10_000).with_host(host.clone());
    let client =
        Client::connect("fx", &misbehave(&tag, &["--stderr-every", "1"]), options).unwrap();
    // 200 lines a second: past 1024 after about 5 s.
    thread::sleep(Duration::from_secs(7));
    client.call_tool("notify_later", json!({"ms": 0}), &CallOptions::default()).unwrap();
    thread::sleep(Duration::from_millis(200));
    drop(opener);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !host.notifications.lock().unwrap().iter().any(|m| m == "notifications/message") {
        assert!(Instant::now() < deadline, "the notification never reached the host");
        thread::sleep(Duration::from_millis(10));
    }
    close_and_check(client, &tag);
}

#[test]
fn a_server_ignoring_stdin_eof_and_sigterm_is_killed() {
    let tag = Tag::new();
    let client = connect(&tag, &["--ignore-eof", "--ignore-sigterm"]);
    let started = Instant::now();
    client.close().unwrap();
    let elapsed = started.elapsed();
    // 2 s after stdin closes, SIGTERM; 1.4 s later (the supervisor's
    // grace; tether's own is 2 s), SIGKILL.
    assert!(
        elapsed >= Duration::from_millis(3300) && elapsed < Duration::from_secs(6),
        "{elapsed:?}"
    );
    tag.assert_gone();
}

#[test]
fn a_server_ignoring_eof_but_not_sigterm_ends_after_the_first_grace() {
    let tag = Tag::new();
    let client = connect(&tag, &["--ignore-eof"]);
    let started = Instant::now();
    client.close().unwrap();
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(1900) && elapsed < Duration::from_secs(3),
        "{elapsed:?}"
    );
    tag.assert_gone();
}

#[test]
fn grandchildren_are_ended_with_the_server() {
    let tag = Tag::new();
    let client = connect(&tag, &["--grandchild"]);
    tag.wait_for_processes(2, Duration::from_secs(2));
    close_and_check(client, &tag);
}

#[test]
fn grandchildren_that_ignore_sigterm_are_killed() {
    let tag = Tag::new();
    let client = connect(&tag, &["--grandchild", "--ignore-sigterm"]);
    tag.wait_for_processes(2, Duration::from_secs(2));
    let started = Instant::now();
    client.close().unwrap();
    // The server exits on EOF; its grandchild ignores SIGTERM, so SIGKILL follows the grace.
    assert_quick(started, Duration::from_secs(4), "ending a stubborn grandchild");
    tag.assert_gone();
}

#[test]
fn is_error_results_are_results_not_errors() {
    let tag = Tag::new();
    let client = connect(&tag, &[]);
    let result = client.call_tool("fail", json!({}), &CallOptions::default()).unwrap();
    assert!(result.is_error());
    assert_eq!(result.to_text(), "something went wrong");
    close_and_check(client, &tag);
}

#[test]
fn image_content_is_described() {
    let tag = Tag::new();
    let client = connect(&tag, &[]);
    let result = client.call_tool("image", json!({}), &CallOptions::default()).unwrap();
    assert_eq!(result.content().len(), 2);
    assert!(result.to_text().contains("[image: image/png"), "{}", result.to_text());
    close_and_check(client, &tag);
}

#[test]
fn a_thousand_tools_over_ten_pages() {
    let tag = Tag::new();
    let client = connect(&tag, &["--many-tools", "1000", "--page-size", "101"]);
    let tools = client.list_tools(&CallOptions::default()).unwrap();
    assert!(tools.iter().filter(|tool| tool.name.starts_with("tool_")).count() == 1000);
    assert_eq!(tools.last().unwrap().name, "tool_0999");
    close_and_check(client, &tag);
}

#[test]
fn a_repeated_cursor_is_an_error_not_a_loop() {
    let tag = Tag::new();
    let client = connect(&tag, &["--endless-cursor", "same"]);
    let started = Instant::now();
    let err = client.list_tools(&CallOptions::default()).unwrap_err();
    assert_quick(started, Duration::from_secs(1), "detecting a repeated cursor");
    assert!(err.to_string().contains("repeated the cursor"), "{err}");
    close_and_check(client, &tag);
}

#[test]
fn an_endless_stream_of_new_cursors_is_cut_off() {
    let tag = Tag::new();
    let client = connect(&tag, &["--endless-cursor", "new"]);
    let started = Instant::now();
    let err = client.list_tools(&CallOptions::default()).unwrap_err();
    assert_quick(started, Duration::from_secs(10), "giving up on endless pages");
    assert!(err.to_string().contains("more than 1000 pages"), "{err}");
    close_and_check(client, &tag);
}

#[test]
fn server_requests_are_answered() {
    let tag = Tag::new();
    let host = Arc::new(RecordingHost {
        roots: vec![Root::new("file:///work").with_name("work")],
        ..RecordingHost::default()
    });
    let options = quick(5_000).with_host(host);
    let client = Client::connect("fx", &misbehave(&tag, &["--server-requests"]), options).unwrap();
    let replies = client_replies(&client, 4, Duration::from_secs(3));
    let by_id =
        |id: &str| replies.iter().find(|reply| reply["id"] == id).cloned().unwrap_or(Value::Null);
    assert_eq!(by_id("s-ping")["result"], json!({}));
    assert_eq!(
        by_id("s-roots")["result"],
        json!({"roots": [{"uri": "file:///work", "name": "work"}]})
    );
    assert_eq!(by_id("s-sampling")["error"]["code"], -32601);
    assert_eq!(by_id("s-unknown")["error"]["code"], -32601);
    close_and_check(client, &tag);
}

/// Roots that wait for the sampling asked after them (at most 5 s), and
/// note whether it came meanwhile.
#[derive(Default)]
struct SlowRoots {
    sampled: Mutex<bool>,
    asked: Condvar,
    saw_sampling: AtomicBool,
}

impl Host for SlowRoots {
    fn roots(&self) -> Vec<Root> {
        let sampled = self.sampled.lock().unwrap();
        let waited = self.asked.wait_timeout_while(sampled, Duration::from_secs(5), |s| !*s);
        self.saw_sampling.store(*waited.unwrap().0, Ordering::SeqCst);
        Vec::new()
    }

    fn handles_sampling(&self) -> bool {
        true
    }

    fn create_message(&self, _server: &str, _params: &Value) -> Result<Value, RpcError> {
        *self.sampled.lock().unwrap() = true;
        self.asked.notify_all();
        Ok(json!({"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}))
    }
}

// A cold trial: a request the host took long over (a person's form) held up
// the same server's next one, which waited behind it on the events thread.
// Each is asked on a thread of its own: the sampling is asked while the
// roots still wait.
#[test]
fn a_slow_answer_holds_up_no_other_server_request() {
    let tag = Tag::new();
    let host = Arc::new(SlowRoots::default());
    let options = quick(5_000).with_host(host.clone());
    let client = Client::connect("fx", &misbehave(&tag, &["--server-requests"]), options).unwrap();
    let replies = client_replies(&client, 4, Duration::from_secs(8));
    assert_eq!(replies.len(), 4, "{replies:?}");
    assert!(host.saw_sampling.load(Ordering::SeqCst), "the sampling waited behind the roots");
    let sampled = replies.iter().find(|reply| reply["id"] == "s-sampling").unwrap();
    assert_eq!(sampled["result"]["content"]["text"], "hi", "{sampled}");
    close_and_check(client, &tag);
}

#[test]
fn default_roots_are_an_empty_list() {
    let tag = Tag::new();
    let client = connect(&tag, &["--server-requests"]);
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let text = client
            .call_tool("client_replies", json!({}), &CallOptions::default())
            .unwrap()
            .to_text();
        let replies: Vec<Value> = serde_json::from_str(&text).unwrap();
        if let Some(roots) = replies.iter().find(|reply| reply["id"] == "s-roots") {
            assert_eq!(roots["result"], json!({"roots": []}));
            break;
        }
        assert!(Instant::now() < deadline, "no roots/list answer recorded");
        thread::sleep(Duration::from_millis(20));
    }
    close_and_check(client, &tag);
}

#[test]
fn an_unsupported_protocol_revision_is_refused() {
    let tag = Tag::new();
    let err = Client::connect("fx", &misbehave(&tag, &["--protocol", "2099-01-01"]), quick(5_000))
        .err()
        .unwrap();
    assert!(
        matches!(&err, Error::UnsupportedProtocol(version) if version == "2099-01-01"),
        "{err:?}"
    );
    // What tether does speak, so the user knows what to ask of the server.
    assert!(err.to_string().contains("(it speaks 2026-07-28, 2025-11-25, 2025-06-18"), "{err}");
    tag.assert_gone();
}

#[test]
fn older_revisions_are_accepted() {
    for version in ["2025-06-18", "2025-03-26", "2024-11-05"] {
        let tag = Tag::new();
        let client = connect(&tag, &["--protocol", version]);
        assert_eq!(client.server_info().unwrap().protocol_version, version);
        close_and_check(client, &tag);
    }
}

#[test]
fn progress_resets_the_timer_and_reaches_the_callback() {
    let tag = Tag::new();
    let client = connect(&tag, &[]);
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&seen);
    let options = CallOptions::default()
        .with_timeout(Duration::from_millis(500))
        .with_max_total_timeout(Duration::from_secs(10))
        .with_progress(move |progress| {
            assert!(progress.total == Some(6.0));
            counter.fetch_add(1, Ordering::SeqCst);
        });
    // Six steps 250 ms apart: 1.5 s in all, three times the timeout.
    let result =
        client.call_tool("progress", json!({"steps": 6, "interval_ms": 250}), &options).unwrap();
    assert_eq!(result.to_text(), "done");
    assert_eq!(seen.load(Ordering::SeqCst), 6);
    close_and_check(client, &tag);
}

#[test]
fn progress_cannot_extend_a_call_past_its_ceiling() {
    let tag = Tag::new();
    let client = connect(&tag, &[]);
    let options = CallOptions::default()
        .with_timeout(Duration::from_millis(500))
        .with_max_total_timeout(Duration::from_millis(800));
    let started = Instant::now();
    let err = client
        .call_tool("progress", json!({"steps": 20, "interval_ms": 100}), &options)
        .unwrap_err();
    let elapsed = started.elapsed();
    // Said as the ceiling, not the timeout (whose hint would mislead).
    let ceiling = tether::Step::Ceiling { limit: Duration::from_millis(800) };
    assert!(matches!(err, Error::Timeout(ref t) if t.step == ceiling), "{err:?}");
    assert!(err.to_string().contains("its progress went on until the ceiling"), "{err}");
    assert!(
        elapsed >= Duration::from_millis(800) && elapsed < Duration::from_millis(1500),
        "{elapsed:?}"
    );
    // Without progress, the timeout itself.
    let err = client.call_tool("sleep", json!({"ms": 2000}), &options).unwrap_err();
    assert!(matches!(err, Error::Timeout(ref t) if t.step == tether::Step::Request), "{err:?}");
    close_and_check(client, &tag);
}

#[test]
fn a_cancel_handle_ends_the_call_at_once() {
    let tag = Tag::new();
    let client = connect(&tag, &[]);
    let cancel = CancelHandle::new();
    let canceller = {
        let cancel = cancel.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(100));
            cancel.cancel();
        })
    };
    let options = CallOptions::default().with_cancel(cancel.clone());
    let started = Instant::now();
    let err = client.call_tool("sleep", json!({"ms": 3000}), &options).unwrap_err();
    assert!(matches!(err, Error::Cancelled), "{err:?}");
    assert_quick(started, Duration::from_millis(1000), "cancelling");
    canceller.join().unwrap();
    assert!(cancel.is_cancelled());
    let cancelled = notifications_named(&client, "notifications/cancelled");
    assert_eq!(cancelled[0]["params"]["reason"], "cancelled by the client", "{cancelled:?}");
    // A handle cancelled before the call: the call is not even sent.
    let started = Instant::now();
    assert!(matches!(
        client.call_tool("sleep", json!({"ms": 3000}), &options),
        Err(Error::Cancelled)
    ));
    assert_quick(started, Duration::from_millis(50), "a call with a cancelled handle");
    close_and_check(client, &tag);
}

/// The notifications the fixture received with this method.
fn notifications_named(client: &Client, method: &str) -> Vec<Value> {
    let text = client
        .call_tool("client_notifications", json!({}), &CallOptions::default())
        .unwrap()
        .to_text();
    let all: Vec<Value> = serde_json::from_str(&text).unwrap();
    all.into_iter().filter(|n| n["method"] == method).collect()
}

#[test]
fn a_missing_program_is_a_spawn_error() {
    let transport = Transport::Stdio(StdioCommand::new("/nonexistent/tether-test-server", &[]));
    let err = Client::connect("fx", &transport, quick(1_000)).err().unwrap();
    assert!(
        matches!(&err, Error::Spawn { command, .. } if command == "/nonexistent/tether-test-server"),
        "{err:?}"
    );
}

#[test]
fn the_server_gets_only_the_environment_it_is_given_and_its_cwd() {
    let tag = Tag::new();
    let dir = crate::support::TempDir::new();
    let program = fixture("misbehave").display().to_string();
    let mut command = StdioCommand::new(&program, &["--tag", &tag.0]);
    command.env.push(("FIXTURE_ONLY".into(), "yes".into()));
    command.cwd = Some(dir.path().to_owned());
    let given: Vec<String> = command.env.iter().map(|(name, _)| name.clone()).collect();
    let transport = Transport::Stdio(command);
    let client = Client::connect("fx", &transport, quick(5_000)).unwrap();
    let text = client.call_tool("env", json!({}), &CallOptions::default()).unwrap().to_text();
    let seen: serde_json::Map<String, Value> = serde_json::from_str(&text).unwrap();
    assert_eq!(seen["FIXTURE_ONLY"], "yes");
    for name in seen.keys() {
        assert!(given.contains(name), "leaked variable {name}");
    }
    let cwd = client.call_tool("cwd", json!({}), &CallOptions::default()).unwrap().to_text();
    assert_eq!(std::fs::canonicalize(cwd).unwrap(), std::fs::canonicalize(dir.path()).unwrap());
    close_and_check(client, &tag);
}

/// What a server sees of how it was started: tether ignores SIGPIPE and its
/// supervisor blocks signals, but a server starts as std starts a child:
/// SIGPIPE at its default, nothing blocked, named by the program as given.
#[test]
fn the_server_starts_with_default_signals_and_the_program_name_it_was_given() {
    let tag = Tag::new();
    let dir = crate::support::TempDir::new();
    let report = dir.path().join("report");
    let script = format!(
        // A builtin loop: a shell blocks every signal around its forks,
        // so its status is read before it forks anything.
        "while IFS= read -r line; do case $line in Sig*) echo \"$line\";; esac; \
         done < /proc/$$/status > '{report}'; \
         tr '\\0' '\\n' < /proc/$$/cmdline | head -n 1 >> '{report}'; \
         exec '{program}' --tag {tag}",
        report = report.display(),
        program = fixture("misbehave").display(),
        tag = tag.0,
    );
    // "sh", found in the server's PATH.
    let command = StdioCommand::new("sh", &["-c", &script]);
    let client = Client::connect("fx", &Transport::Stdio(command), quick(5_000)).unwrap();
    assert_eq!(echo(&client, "up").unwrap(), "up");
    let seen = std::fs::read_to_string(&report).unwrap();
    let field = |name: &str| {
        let line = seen.lines().find(|line| line.starts_with(name)).unwrap();
        u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
    };
    assert_eq!(field("SigBlk:"), 0, "{seen}");
    assert_eq!(field("SigIgn:") & (1 << (libc::SIGPIPE - 1)), 0, "SIGPIPE ignored: {seen}");
    assert_eq!(seen.lines().last(), Some("sh"), "{seen}");
    close_and_check(client, &tag);
}

#[test]
fn a_program_that_cannot_be_executed_fails_the_start_with_the_systems_reason() {
    let dir = crate::support::TempDir::new();
    // A file, but not executable: found, and refused by exec itself.
    let plain = dir.path().join("not-a-program");
    std::fs::write(&plain, "#!/bin/sh\n").unwrap();
    let command = StdioCommand::new(&plain.display().to_string(), &[]);
    let started = Instant::now();
    let err = Client::connect("fx", &Transport::Stdio(command), quick(5_000)).err().unwrap();
    assert_quick(started, Duration::from_secs(1), "a refused exec to fail the start");
    match &err {
        Error::Spawn { source, .. } => {
            assert_eq!(source.raw_os_error(), Some(libc::EACCES), "{err:?}")
        }
        other => panic!("{other:?}"),
    }
    // A name not on the server's PATH is not found, whatever tether's PATH.
    let mut command = StdioCommand::new("sh", &["-c", "exit 0"]);
    command.env.retain(|(name, _)| name != "PATH");
    command.env.push(("PATH".into(), dir.path().display().to_string()));
    let err = Client::connect("fx", &Transport::Stdio(command), quick(5_000)).err().unwrap();
    assert!(
        matches!(&err, Error::Spawn { source, .. } if source.raw_os_error() == Some(libc::ENOENT)),
        "{err:?}"
    );
}

/// A server killed by a signal that dumps core (an aborting Node or Rust
/// server): its supervisor, which shares tether's memory, must not dump
/// core itself (before Linux 5.16 that killed every process sharing the
/// memory: tether). It reports the shell's status instead, and tether and
/// its other servers live on.
#[test]
fn a_server_that_aborts_leaves_tether_and_its_other_servers_running() {
    let tag = Tag::new();
    let aborting =
        Client::connect("fx", &misbehave(&tag, &["--abort-on-call", "1"]), quick(5_000)).unwrap();
    let other = connect(&tag, &[]);
    let err = echo(&aborting, "boom").unwrap_err();
    let aborted = CloseReason::Exited { code: Some(128 + libc::SIGABRT), signal: None };
    assert!(matches!(err, Error::Disconnected(ref reason) if *reason == aborted), "{err:?}");
    // Said as a person knows it, not as a bare number.
    assert!(err.to_string().contains("status 134 (128 + 6: likely killed by SIGABRT)"), "{err}");
    assert_eq!(echo(&other, "still here").unwrap(), "still here");
    drop(aborting);
    close_and_check(other, &tag);
}

/// A variable given twice has its last value, and a script without `#!`
/// runs under `sh`, as they did when std started servers.
#[test]
fn a_repeated_variable_has_its_last_value_and_a_bare_script_runs() {
    let tag = Tag::new();
    let dir = crate::support::TempDir::new();
    let script = dir.path().join("server-script");
    std::fs::write(&script, format!("exec '{}' --tag {}\n", fixture("misbehave").display(), tag.0))
        .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut command = StdioCommand::new(&script.display().to_string(), &[]);
    command.env.push(("TWICE".into(), "first".into()));
    command.env.push(("TWICE".into(), "second".into()));
    let client = Client::connect("fx", &Transport::Stdio(command), quick(5_000)).unwrap();
    let text = client.call_tool("env", json!({}), &CallOptions::default()).unwrap().to_text();
    let seen: serde_json::Map<String, Value> = serde_json::from_str(&text).unwrap();
    assert_eq!(seen["TWICE"], "second");
    close_and_check(client, &tag);
}

#[test]
fn dropping_a_client_ends_its_server() {
    let tag = Tag::new();
    let client = connect(&tag, &["--grandchild"]);
    tag.wait_for_processes(2, Duration::from_secs(2));
    drop(client);
    tag.assert_gone();
}

#[test]
fn frames_queue_in_order_while_a_server_stops_reading() {
    let tag = Tag::new();
    let client = Arc::new(connect(&tag, &["--stall-stdin", "700"]));
    // Eight 200 KB requests at once: far more than a pipe holds, so most of
    // them wait in the backlog for the writer thread.
    let callers: Vec<_> = (0..8)
        .map(|i| {
            let client = Arc::clone(&client);
            thread::spawn(move || {
                let text = format!("{i}:{}", "y".repeat(200_000));
                assert_eq!(echo(&client, &text).unwrap(), text);
            })
        })
        .collect();
    for caller in callers {
        caller.join().unwrap();
    }
    let client = Arc::into_inner(client).unwrap();
    close_and_check(client, &tag);
}

#[test]
fn a_server_that_never_reads_cannot_hold_a_call_or_close_past_their_bounds() {
    let tag = Tag::new();
    let client = connect(&tag, &["--stall-stdin", "60000"]);
    let options = CallOptions::default().with_timeout(Duration::from_millis(500));
    let started = Instant::now();
    let err =
        client.call_tool("echo", json!({"text": "z".repeat(1_000_000)}), &options).unwrap_err();
    assert!(matches!(err, Error::Timeout(_)), "{err:?}");
    assert_quick(started, Duration::from_millis(1500), "a call to a server that does not read");
    let started = Instant::now();
    client.close().unwrap();
    // stdin closed, 2 s grace, SIGTERM: the sleeping server dies then.
    assert_quick(started, Duration::from_secs(4), "closing a server that does not read");
    tag.assert_gone();
}

// Issue 25 (item 8): a handshake-era server's `notifications/cancelled`
// names a request of its own. Both sides count from 1, so before, it failed
// tether's unrelated pending request of the same number.
#[test]
fn a_server_giving_up_its_own_requests_leaves_ours_alone() {
    let tag = Tag::new();
    let client = Arc::new(connect(&tag, &["--era", "legacy"]));
    let sleeping = {
        let client = Arc::clone(&client);
        thread::spawn(move || {
            client.call_tool("sleep", json!({"ms": 700}), &CallOptions::default())
        })
    };
    thread::sleep(Duration::from_millis(100));
    let said = client.call_tool("cancel_ids", json!({"up_to": 200}), &CallOptions::default());
    assert_eq!(said.unwrap().to_text(), "cancelled 1 to 200");
    let slept = sleeping.join().unwrap();
    assert_eq!(slept.unwrap().to_text(), "slept 700 ms");
    assert_eq!(echo(&client, "still").unwrap(), "still");
    Arc::try_unwrap(client).ok().unwrap().close().unwrap();
}

/// A host whose elicitation waits until the server withdraws it.
#[derive(Default)]
struct PatientHost {
    withdrawn: Mutex<Vec<(String, String, Option<String>)>>,
    woken: Condvar,
    asked: AtomicUsize,
}

impl Host for PatientHost {
    fn handles_elicitation(&self) -> bool {
        true
    }

    fn elicit(&self, _server: &str, _params: &Value) -> Result<Value, tether::RpcError> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let withdrawn = self.withdrawn.lock().unwrap();
        let (_withdrawn, _) = self
            .woken
            .wait_timeout_while(withdrawn, Duration::from_secs(5), |seen| seen.is_empty())
            .unwrap();
        Ok(json!({"action": "accept", "content": {"name": "too late"}}))
    }

    fn cancelled(&self, server: &str, method: &str, reason: Option<&str>) {
        let seen = (server.to_owned(), method.to_owned(), reason.map(str::to_owned));
        self.withdrawn.lock().unwrap().push(seen);
        self.woken.notify_all();
    }
}

// Issue 25 (item 8): the host answering a request the server gives up is
// told at once, and its answer is not sent.
#[test]
fn a_withdrawn_elicitation_is_told_to_the_host_and_not_answered() {
    let tag = Tag::new();
    let host = Arc::new(PatientHost::default());
    let options = quick(10_000).with_host(host.clone());
    let client = Client::connect("fx", &misbehave(&tag, &["--era", "legacy"]), options).unwrap();
    let started = Instant::now();
    let said = client.call_tool("withdraw", json!({"ms": 300}), &CallOptions::default());
    assert_eq!(said.unwrap().to_text(), "withdrew withdrawn-1");
    assert_quick(started, Duration::from_secs(3), "a withdrawn question");
    assert_eq!(host.asked.load(Ordering::SeqCst), 1);
    let withdrawn = host.withdrawn.lock().unwrap().clone();
    assert_eq!(
        withdrawn,
        [("fx".to_owned(), "elicitation/create".to_owned(), Some("no longer needed".to_owned()))]
    );
    thread::sleep(Duration::from_millis(200));
    let replies =
        client.call_tool("client_replies", json!({}), &CallOptions::default()).unwrap().to_text();
    let replies: Vec<Value> = serde_json::from_str(&replies).unwrap();
    assert!(replies.iter().all(|reply| reply["id"] != "withdrawn-1"), "{replies:?}");
    client.close().unwrap();
}

// Issue 25 (item 7): a call's own `_meta` keys (trace context) reach the
// server beside tether's progress token, in the handshake era.
#[test]
fn a_calls_meta_keys_reach_the_server() {
    let tag = Tag::new();
    let client = connect(&tag, &["--era", "legacy"]);
    let trace = json!({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"});
    let options = CallOptions::default().with_meta(trace.clone()).with_progress(|_| {});
    let seen = client.call_tool("call_meta", json!({}), &options).unwrap().to_text();
    let seen: Value = serde_json::from_str(&seen).unwrap();
    assert_eq!(seen["traceparent"], trace["traceparent"], "{seen}");
    assert!(seen["progressToken"].is_number(), "tether's own key beside it: {seen}");
    // Without meta, only the progress token every call carries.
    let seen = client.call_tool("call_meta", json!({}), &CallOptions::default()).unwrap().to_text();
    let seen: Value = serde_json::from_str(&seen).unwrap();
    assert_eq!(seen.as_object().map(|meta| meta.len()), Some(1), "{seen}");
    client.close().unwrap();
}

/// A host that takes forms only, and sampling with tools.
struct FormsOnly;

impl Host for FormsOnly {
    fn handles_elicitation(&self) -> bool {
        true
    }

    fn elicitation_modes(&self) -> tether::ElicitationModes {
        tether::ElicitationModes::new(true, false)
    }

    fn handles_sampling(&self) -> bool {
        true
    }

    fn sampling_with_tools(&self) -> bool {
        true
    }
}

// Issue 25 (item 4): what a host says of itself: its name, form-only
// elicitation, tool-using sampling, experimental and extensions.
#[test]
fn a_host_names_itself_and_declares_its_capabilities() {
    let tag = Tag::new();
    let info = tether::ClientInfo::new("my-agent", "2.1.0")
        .with_title("My Agent")
        .with_icon(json!({"src": "https://example.com/icon.png", "mimeType": "image/png"}));
    let options = quick(5_000)
        .with_host(Arc::new(FormsOnly))
        .with_client_info(info)
        .with_experimental(json!({"fastLane": {}}))
        .with_extension("io.example/notes", json!({}));
    let client = Client::connect("fx", &misbehave(&tag, &["--era", "legacy"]), options).unwrap();
    let hello = client.call_tool("client_hello", json!({}), &CallOptions::default()).unwrap();
    let hello: Value = serde_json::from_str(&hello.to_text()).unwrap();
    assert_eq!(hello["clientInfo"]["name"], "my-agent", "{hello}");
    assert_eq!(hello["clientInfo"]["title"], "My Agent");
    assert_eq!(hello["clientInfo"]["icons"][0]["mimeType"], "image/png");
    let capabilities = &hello["capabilities"];
    assert_eq!(capabilities["elicitation"], json!({"form": {}}), "{capabilities}");
    assert_eq!(capabilities["sampling"], json!({"tools": {}}));
    assert_eq!(capabilities["experimental"], json!({"fastLane": {}}));
    assert_eq!(capabilities["extensions"], json!({"io.example/notes": {}}));
    client.close().unwrap();
}

// Issue 25 (item 9): every call's structuredContent is checked against the
// outputSchema the tool was listed with, `$ref` and `pattern` included, in
// both eras; a mismatch is a flag on the result, which is kept whole.
#[test]
fn each_call_is_checked_against_the_tools_output_schema() {
    let tag = Tag::new();
    for era in ["legacy", "modern"] {
        let client =
            Client::connect("fx", &misbehave(&tag, &["--era", era, "--structured"]), quick(5_000))
                .unwrap();
        let call = |value: Option<Value>| {
            let arguments = match value {
                Some(value) => json!({"value": value}),
                None => json!({}),
            };
            client.call_tool("structured", arguments, &CallOptions::default()).unwrap()
        };
        // Before the tool is listed, nothing is judged.
        assert_eq!(call(Some(json!({"point": 3}))).schema_mismatch, None, "{era}");
        client.list_tools(&CallOptions::default()).unwrap();
        let good = call(Some(json!({"point": {"x": 1, "label": "ab"}})));
        assert_eq!(good.schema_mismatch, None, "{era}");
        let result = call(Some(json!({"point": {"x": 1.5, "label": "ab"}})));
        assert_eq!(
            result.schema_mismatch.as_deref(),
            Some("structuredContent does not match the outputSchema of structured: $.point.x: expected an integer"),
            "{era}"
        );
        assert_eq!(result.structured_content(), Some(&json!({"point": {"x": 1.5, "label": "ab"}})));
        let result = call(Some(json!({"point": {"x": 1, "label": "Ab"}})));
        assert!(
            result
                .schema_mismatch
                .as_deref()
                .unwrap()
                .ends_with(r#"$.point.label: does not match the pattern "^[a-z]+$""#),
            "{era}: {:?}",
            result.schema_mismatch
        );
        assert_eq!(
            call(None).schema_mismatch.as_deref(),
            Some("structured has an outputSchema but its result has no structuredContent")
        );
        client.close().unwrap();
    }
    tag.assert_gone();
}

/// Opens every page it is asked to (URL-mode elicitation), and records the
/// elicitation ids it was asked and the completions it heard.
#[derive(Default)]
struct PageHost {
    asked: Mutex<Vec<String>>,
    completed: Mutex<Vec<String>>,
}

impl Host for PageHost {
    fn handles_elicitation(&self) -> bool {
        true
    }

    fn elicit(&self, _server: &str, params: &Value) -> Result<Value, tether::RpcError> {
        let asked = tether::Elicitation::of(params);
        self.asked.lock().unwrap().push(format!("{}:{:?}", asked.mode, asked.elicitation_id));
        Ok(json!({"action": "accept"}))
    }

    fn notification(&self, _server: &str, notification: &Notification) {
        if notification.method == "notifications/elicitation/complete" {
            let id = notification.params.as_ref().unwrap()["elicitationId"].as_str().unwrap();
            self.completed.lock().unwrap().push(id.to_owned());
        }
    }
}

// Issue 25 (item 6): a -32042 refusal is a typed error listing the pages to
// open; the client waits for the server to say they are done, and hands the
// host only completions of ids it saw opened, once each.
#[test]
fn a_page_to_open_first_is_a_typed_error_and_its_completion_is_awaited() {
    let tag = Tag::new();
    let host = Arc::new(PageHost::default());
    let options = quick(5_000).with_host(host.clone());
    let client = Client::connect("fx", &misbehave(&tag, &[]), options).unwrap();
    let gate = |arguments: Value| client.call_tool("page_gate", arguments, &CallOptions::default());

    // Never done: the wait gives up at its timeout.
    let refused = gate(json!({})).unwrap_err();
    let Error::UrlElicitationRequired { message, elicitations } = &refused else {
        panic!("{refused:?}")
    };
    assert_eq!(message, "This request needs a page opened first.");
    assert_eq!(elicitations.len(), 1);
    assert_eq!(elicitations[0].elicitation_id, "page-1");
    assert_eq!(elicitations[0].url, "https://pages.example/open?id=page-1");
    assert_eq!(elicitations[0].message, "Open this page to connect your account.");
    let started = Instant::now();
    assert!(!client.wait_elicitations(elicitations, Duration::from_millis(300)));
    assert!(started.elapsed() >= Duration::from_millis(300));

    // Done 200 ms later: the wait ends then, and the call goes through.
    let refused = gate(json!({"complete_ms": 200})).unwrap_err();
    let Error::UrlElicitationRequired { elicitations, .. } = &refused else { panic!() };
    let started = Instant::now();
    assert!(client.wait_elicitations(elicitations, Duration::from_secs(5)));
    assert_quick(started, Duration::from_secs(2), "waiting for the page's completion");
    assert_eq!(gate(json!({})).unwrap().to_text(), "the page was opened; 2 asked");
    // The server's completion of an id it never gave out, and its repeat,
    // never reach the host.
    thread::sleep(Duration::from_millis(200));
    assert_eq!(*host.completed.lock().unwrap(), ["page-2"]);

    // A page the server asks the host to open (elicitation/create, URL
    // mode): its id reaches the host, and so does its completion, alone.
    let said = client.call_tool("ask_page", json!({"ms": 100}), &CallOptions::default());
    assert_eq!(said.unwrap().to_text(), "asked for a page");
    thread::sleep(Duration::from_millis(200));
    assert_eq!(*host.asked.lock().unwrap(), [r#"url:Some("asked-page-1")"#]);
    assert_eq!(*host.completed.lock().unwrap(), ["page-2", "asked-page-1"]);
    close_and_check(client, &tag);

    // A stateless server's refusal is the same typed error.
    let client = connect(&tag, &["--era", "modern"]);
    let refused = client.call_tool("page_gate", json!({}), &CallOptions::default()).unwrap_err();
    assert!(matches!(refused, Error::UrlElicitationRequired { .. }), "{refused:?}");
    close_and_check(client, &tag);
}

/// Answers every form with the name Ada.
struct AdaHost;

impl Host for AdaHost {
    fn handles_elicitation(&self) -> bool {
        true
    }

    fn elicit(&self, _server: &str, _params: &Value) -> Result<Value, tether::RpcError> {
        Ok(json!({"action": "accept", "content": {"name": "Ada"}}))
    }
}

// Issue 25 (item 3): tasks in the handshake era. A tool that requires a
// task is called as one and waited out (tasks/get, then tasks/result); a
// failed task is its error; a host can start one, look at it, list and
// cancel it; a call that times out cancels its task.
#[test]
fn a_tool_that_runs_as_a_task_is_waited_out_and_can_be_managed() {
    let tag = Tag::new();
    let client = connect(&tag, &["--tasks"]);
    client.list_tools(&CallOptions::default()).unwrap();
    let plain = CallOptions::default();
    let result = client.call_tool("task_job", json!({"ms": 300}), &plain).unwrap();
    assert_eq!(result.to_text(), "job done after 300 ms");
    let counts = client.call_tool("request_counts", json!({}), &plain).unwrap().to_text();
    let counts: Value = serde_json::from_str(&counts).unwrap();
    assert!(counts["tasks/get"].as_u64().unwrap() >= 2, "{counts}");
    assert_eq!(counts["tasks/result"], 1, "{counts}");

    let failed = client.call_tool("task_job", json!({"ms": 50, "fail": true}), &plain).unwrap_err();
    assert!(matches!(&failed, Error::Rpc(rpc) if rpc.message == "the job failed"), "{failed:?}");

    let started = client.start_tool_task("task_job", json!({"ms": 5000}), &plain).unwrap();
    let tether::TaskStart::Task(task) = started else { panic!("{started:?}") };
    assert_eq!(task.task_id, "task-3");
    assert_eq!(task.status, tether::TaskStatus::Working);
    assert_eq!(task.poll_interval, Some(Duration::from_millis(50)));
    let listed = client.list_tasks(&plain).unwrap();
    assert_eq!(listed.len(), 3);
    assert_eq!(listed[0].status, tether::TaskStatus::Completed);
    client.cancel_task(&task.task_id, &plain).unwrap();
    assert_eq!(
        client.get_task(&task.task_id, &plain).unwrap().status,
        tether::TaskStatus::Cancelled
    );
    let again = client.cancel_task(&task.task_id, &plain).unwrap_err();
    assert!(matches!(&again, Error::Rpc(rpc) if rpc.code == -32602), "{again:?}");

    // A call whose task outlasts its timeout: a timeout, and the task cancelled.
    let started = Instant::now();
    let short = CallOptions::default().with_timeout(Duration::from_millis(300));
    let late = client.call_tool("task_job", json!({"ms": 5000}), &short).unwrap_err();
    assert!(matches!(late, Error::Timeout(_)), "{late:?}");
    assert_quick(started, Duration::from_secs(2), "a task call's timeout");
    let listed = client.list_tasks(&plain).unwrap();
    assert_eq!(listed[3].status, tether::TaskStatus::Cancelled, "{listed:?}");
    close_and_check(client, &tag);
}

// Issue 25 (item 3): tasks in 2026-07-28 (the tasks extension, declared in
// every request): a call the server makes a task is waited out through
// tasks/get; one that needs input has it asked of the host and sent with
// tasks/update; a failed task is its error.
#[test]
fn a_stateless_servers_task_is_waited_out_with_its_input_answered() {
    let tag = Tag::new();
    let options = quick(5_000).with_host(Arc::new(AdaHost));
    let command = misbehave(&tag, &["--era", "modern", "--tasks"]);
    let client = Client::connect("fx", &command, options).unwrap();
    let plain = CallOptions::default();
    let result = client.call_tool("task_job", json!({"ms": 200}), &plain).unwrap();
    assert_eq!(result.to_text(), "job done after 200 ms");
    let asked = client.call_tool("task_job", json!({"ms": 200, "ask": true}), &plain).unwrap();
    assert_eq!(asked.to_text(), "job done after 200 ms for Ada");
    let failed = client.call_tool("task_job", json!({"ms": 50, "fail": true}), &plain).unwrap_err();
    assert!(matches!(&failed, Error::Rpc(rpc) if rpc.message == "the job failed"), "{failed:?}");
    // A task found waiting for input when the host asks for its result:
    // its questions answered (tasks/update), never a tasks/result.
    let started = client.start_tool_task("task_job", json!({"ms": 300, "ask": true}), &plain);
    let tether::TaskStart::Task(task) = started.unwrap() else { panic!("not a task") };
    thread::sleep(Duration::from_millis(250));
    assert_eq!(
        client.get_task(&task.task_id, &plain).unwrap().status,
        tether::TaskStatus::InputRequired
    );
    let result = client.task_result(&task.task_id, &plain).unwrap();
    assert_eq!(result.to_text(), "job done after 300 ms for Ada");
    close_and_check(client, &tag);
}

// A call that asks for its log messages (`CallOptions::with_log`) has them
// on its own thread before it returns, at its level or above; the host
// sees every message too. A handshake-era server logs for the session (all
// levels here, none set); a 2026-07-28 one is asked with the call, and
// sends nothing for a call that does not ask.
#[test]
fn a_call_hears_its_own_log_messages_before_it_returns() {
    for (era, flags) in [("handshake", vec!["--logging"]), ("2026-07-28", vec!["--era", "modern"])]
    {
        let tag = Tag::new();
        let host = Arc::new(RecordingHost::default());
        let options = quick(5_000).with_host(host.clone());
        let client = Client::connect("fx", &misbehave(&tag, &flags), options).unwrap();
        let heard = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&heard);
        let asking = CallOptions::default().with_log(LogLevel::Info, move |message| {
            kept.lock().unwrap().push(format!("{} {}", message.level, message.text()));
        });
        let arguments = json!({"tag": "a", "interval_ms": 20});
        let result = client.call_tool("logs", arguments, &asking).unwrap();
        assert_eq!(result.to_text(), "logged");
        let heard_then = heard.lock().unwrap().clone();
        assert_eq!(heard_then, ["info a info", "warning a warning"], "{era}");
        // The host saw them too (on its events thread, a moment later); a
        // 2026-07-28 server sent only what the call asked for.
        let wanted = if era == "handshake" { 3 } else { 2 };
        let deadline = Instant::now() + Duration::from_secs(5);
        let logged = || {
            let seen = host.notifications.lock().unwrap();
            seen.iter().filter(|method| *method == "notifications/message").count()
        };
        while logged() < wanted && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(logged(), wanted, "{era}");
        // A call that does not ask hears nothing; a stateless server says
        // nothing of it.
        let quiet = client.call_tool("logs", json!({"tag": "b"}), &CallOptions::default());
        assert_eq!(quiet.unwrap().to_text(), "logged");
        assert_eq!(heard.lock().unwrap().len(), 2, "{era}");
        thread::sleep(Duration::from_millis(100));
        let wanted = if era == "handshake" { 6 } else { 2 };
        assert_eq!(logged(), wanted, "{era}");
        close_and_check(client, &tag);
    }
}
