//! The baselines: the same exchanges with the same server and no library.
//!
//! - The tight pipe is the limit: one thread, each request line written with
//!   one `write` (newline included), one line read per answer into a reused
//!   buffer, a substring check against a prepared expectation, no
//!   allocation per call.
//! - The threaded pipe is the same exchange shaped like a thread-based
//!   client: callers write under a lock, one reader thread reads every
//!   answer and hands it to its caller over a channel. Its cost over the
//!   tight pipe is the hand-off, which tether's design also pays.
//! - The threaded pipe with JSON does, on top, the JSON work that any client
//!   returning results as `serde_json::Value` must do, and no more: the
//!   caller writes its arguments (a `Value`, as a host hands them over) into
//!   the request line, the reader parses each answer into its id and its
//!   result as a `Value`, and the caller checks the result's text.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use serde::Deserialize;
use serde_json::Value;
use tether::StdioCommand;

pub const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const TOOLS_LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
const DISCOVER: &str = r#"{"jsonrpc":"2.0","id":-1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

/// The request line of echo call `id` (JSON-RPC id `id + 2`), no newline.
pub fn call_line(id: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"hello-{id}"}}}}}}"#,
        id + 2
    )
}

/// What answer `id` must contain.
fn expected(id: usize) -> String {
    format!("hello-{id}\"")
}

pub struct RawServer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
}

impl RawServer {
    pub fn spawn(server: &[String]) -> RawServer {
        let mut child = Command::new(&server[0])
            .args(&server[1..])
            .env_clear()
            .envs(StdioCommand::new(&server[0], &[]).env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("server starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        RawServer { child, stdin, stdout, line: String::new() }
    }

    pub fn send(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    pub fn receive(&mut self) -> &str {
        self.line.clear();
        self.stdout.read_line(&mut self.line).unwrap();
        &self.line
    }

    pub fn handshake(&mut self) {
        self.send(INITIALIZE);
        assert!(self.receive().contains("protocolVersion"));
        self.send(INITIALIZED);
        self.send(TOOLS_LIST);
        assert!(self.receive().contains("echo"));
    }

    pub fn finish(self) {
        let RawServer { mut child, stdin, .. } = self;
        drop(stdin);
        child.wait().unwrap();
    }
}

/// A raw cold start; with `probe`, a `server/discover` line and its
/// answer first (the tight measure of one round trip in a fresh process).
fn cold(server: &[String], probe: bool) -> Duration {
    let started = Instant::now();
    let mut raw = RawServer::spawn(server);
    if probe {
        raw.send(DISCOVER);
        assert!(raw.receive().contains("\"id\":-1"));
    }
    raw.handshake();
    let elapsed = started.elapsed();
    raw.finish();
    elapsed
}

/// Raw cold starts without and with a probe, alternated; their medians.
pub fn cold_pair(n: usize, server: &[String]) -> (Duration, Duration) {
    let mut plain = Vec::new();
    let mut probed = Vec::new();
    for _ in 0..n {
        plain.push(cold(server, false));
        probed.push(cold(server, true));
    }
    plain.sort();
    probed.sort();
    (plain[n / 2], probed[n / 2])
}

/// The tight pipe: `n` sequential calls.
pub fn seq(n: usize, server: &[String]) -> Duration {
    let mut raw = RawServer::spawn(server);
    raw.handshake();
    let lines: Vec<String> = (0..n).map(|id| call_line(id) + "\n").collect();
    let expected: Vec<String> = (0..n).map(expected).collect();
    let started = Instant::now();
    for (line, expected) in lines.iter().zip(&expected) {
        raw.stdin.write_all(line.as_bytes()).unwrap();
        assert!(raw.receive().contains(expected.as_str()));
    }
    let elapsed = started.elapsed();
    raw.finish();
    elapsed
}

/// The tight pipe: `n` calls, `IN_FLIGHT` kept pipelined from one thread.
pub fn pipelined(n: usize, in_flight: usize, server: &[String]) -> Duration {
    let mut raw = RawServer::spawn(server);
    raw.handshake();
    let lines: Vec<String> = (0..n).map(|id| call_line(id) + "\n").collect();
    let started = Instant::now();
    let mut sent = 0;
    while sent < n.min(in_flight) {
        raw.stdin.write_all(lines[sent].as_bytes()).unwrap();
        sent += 1;
    }
    for _ in 0..n {
        assert!(raw.receive().contains("hello-"));
        if sent < n {
            raw.stdin.write_all(lines[sent].as_bytes()).unwrap();
            sent += 1;
        }
    }
    let elapsed = started.elapsed();
    raw.finish();
    elapsed
}

/// What the reader of the threaded pipe with JSON keeps of an answer.
#[derive(Deserialize)]
struct Answer {
    id: u64,
    result: Value,
}

/// What a threaded caller gets back: the line, or (with JSON) the result.
enum Got {
    Line(String),
    Result(Value),
}

/// The threaded pipe: `n` calls from `callers` threads; each caller writes
/// its line under the stdin lock and waits on its own channel, and one
/// reader thread reads each answer, finds its caller by id and sends it.
/// With `json`, the JSON work of a client with `Value` results is done too.
pub fn threaded(n: usize, callers: usize, server: &[String], json: bool) -> Duration {
    let mut raw = RawServer::spawn(server);
    raw.handshake();
    let RawServer { child, stdin, mut stdout, .. } = raw;
    let waiting: Arc<Mutex<HashMap<u64, Sender<Got>>>> = Arc::default();
    let reader = {
        let waiting = Arc::clone(&waiting);
        thread::spawn(move || {
            let mut line = String::new();
            loop {
                line.clear();
                if stdout.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                let (id, got) = if json {
                    let answer: Answer = serde_json::from_str(&line).unwrap();
                    (Some(answer.id), Got::Result(answer.result))
                } else {
                    let id = line
                        .split("\"id\":")
                        .nth(1)
                        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
                        .and_then(|digits| digits.parse::<u64>().ok());
                    (id, Got::Line(std::mem::take(&mut line)))
                };
                if let Some(caller) = id.and_then(|id| waiting.lock().unwrap().remove(&id)) {
                    let _ = caller.send(got);
                }
            }
        })
    };
    let stdin = Arc::new(Mutex::new(stdin));
    let lines: Arc<Vec<String>> = Arc::new((0..n).map(|id| call_line(id) + "\n").collect());
    let started = Instant::now();
    let workers: Vec<_> = (0..callers)
        .map(|worker| {
            let (stdin, waiting, lines) =
                (Arc::clone(&stdin), Arc::clone(&waiting), Arc::clone(&lines));
            thread::spawn(move || {
                let mut frame = Vec::with_capacity(256);
                for id in (worker..n).step_by(callers) {
                    let (sender, answer) = crossbeam_channel::bounded(1);
                    waiting.lock().unwrap().insert(id as u64 + 2, sender);
                    if json {
                        let text = format!("hello-{id}");
                        let arguments = serde_json::json!({ "text": text });
                        frame.clear();
                        write!(
                            frame,
                            r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"echo","arguments":"#,
                            id + 2
                        )
                        .unwrap();
                        serde_json::to_writer(&mut frame, &arguments).unwrap();
                        frame.extend_from_slice(b"}}\n");
                        stdin.lock().unwrap().write_all(&frame).unwrap();
                        let Ok(Got::Result(result)) = answer.recv() else { panic!("no result") };
                        assert_eq!(result["content"][0]["text"].as_str(), Some(text.as_str()));
                    } else {
                        stdin.lock().unwrap().write_all(lines[id].as_bytes()).unwrap();
                        let Ok(Got::Line(line)) = answer.recv() else { panic!("no line") };
                        assert!(line.contains(&expected(id)));
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let elapsed = started.elapsed();
    drop(stdin);
    let mut child = child;
    child.wait().unwrap();
    reader.join().unwrap();
    elapsed
}

/// `n` echo calls as raw HTTP/1.1 POSTs on kept-alive connections, spread
/// over `threads` threads (one connection each), after one initialize.
pub fn http(n: usize, threads: usize, url: &str) -> Duration {
    let rest = url.strip_prefix("http://").expect("an http:// URL");
    let (authority, path) =
        rest.split_once('/').map(|(a, p)| (a.to_owned(), format!("/{p}"))).unwrap();
    let exchange = |stream: &mut BufReader<std::net::TcpStream>, body: &str| -> String {
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.get_mut().write_all(request.as_bytes()).unwrap();
        let mut length = 0;
        loop {
            let mut header = String::new();
            stream.read_line(&mut header).unwrap();
            if header.trim().is_empty() {
                break;
            }
            if let Some(value) = header.to_ascii_lowercase().strip_prefix("content-length:") {
                length = value.trim().parse().unwrap();
            }
        }
        let mut answer = vec![0u8; length];
        std::io::Read::read_exact(stream, &mut answer).unwrap();
        String::from_utf8(answer).unwrap()
    };
    let connect = || BufReader::new(std::net::TcpStream::connect(&authority).unwrap());
    let mut first = connect();
    exchange(&mut first, INITIALIZE);
    let started = Instant::now();
    thread::scope(|scope| {
        for worker in 0..threads {
            let (exchange, connect) = (&exchange, &connect);
            scope.spawn(move || {
                let mut stream = connect();
                for i in (worker..n).step_by(threads) {
                    assert!(exchange(&mut stream, &call_line(i)).contains(&expected(i)));
                }
            });
        }
    });
    started.elapsed()
}
