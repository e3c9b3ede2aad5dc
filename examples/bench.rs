//! Benchmarks tether against a raw pipe on the same server, in one run.
//!
//! ```text
//! cargo run --release --example bench -- <cold|seq|conc> <N> <server-cmd> [args…]
//! ```
//!
//! - `cold`: N times spawn + the session start + tools/list (then close,
//!   timed apart), alternating tether's default (the `server/discover`
//!   probe first) with the era pinned to the handshake (no probe, as before
//!   the probe existed), so that the probe's cost is measured in one run.
//! - `http-seq`, `http-conc`: as `seq` and `conc` over Streamable HTTP; the
//!   server command must print its URL as its first stdout line (as
//!   `http-server` does). The raw baseline is hand-written HTTP/1.1 POSTs
//!   on kept-alive connections, one per thread in flight.
//! - `seq`: N sequential `echo` calls with `{"text":"hello-<i>"}`, each checked.
//! - `conc`: N `echo` calls with 16 in flight (16 threads for tether; one
//!   thread keeping 16 requests pipelined for the raw pipe).
//!
//! The raw pipe baseline does the same line exchange with the same server
//! with no library: one thread, pre-formatted lines, a substring check. The
//! ratio is the figure to compare across machines; absolute times are not.
//! The last stdout line is one JSON object for scripts.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::json;
use tether::{CallOptions, Client, ClientOptions, EraChoice, StdioCommand, Transport};

const IN_FLIGHT: usize = 16;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const TOOLS_LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
const DISCOVER: &str = r#"{"jsonrpc":"2.0","id":-1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        eprintln!("usage: bench <cold|seq|conc|http-seq|http-conc> <N> <server-cmd> [args…]");
        std::process::exit(2);
    }
    let mode = args[0].as_str();
    let n: usize = args[1].parse().expect("N is a number");
    let server: Vec<String> = args[2..].to_vec();
    let (raw, tether, errors, inflight) = match mode {
        "cold" => {
            // Alternated, so that the two medians see the same machine.
            let (raw, raw_probe) = raw_pair(n, &server);
            println!(
                "raw pipe cold start with a probe first: {:.3} ms (one round trip {:+.3} ms)",
                ms(raw_probe),
                ms(raw_probe) - ms(raw)
            );
            let (tether, pinned, close) = tether_cold(n, &server);
            println!("tether close (stdin EOF, wait, reap, join): {:.3} ms median", ms(close));
            println!(
                "tether   cold start, handshake pinned (no probe): {:.3} ms (median of {n})",
                ms(pinned)
            );
            println!("probe cost (default − pinned): {:+.3} ms", ms(tether) - ms(pinned));
            (raw, tether, 0, 1)
        }
        "seq" => {
            let raw = raw_seq(n, &server);
            let (tether, errors) = tether_calls(n, 1, &server);
            (raw, tether, errors, 1)
        }
        "conc" => {
            let raw = raw_pipelined(n, &server);
            let (tether, errors) = tether_calls(n, IN_FLIGHT, &server);
            (raw, tether, errors, IN_FLIGHT)
        }
        "http-seq" | "http-conc" => {
            let threads = if mode == "http-seq" { 1 } else { IN_FLIGHT };
            let (mut child, url) = start_http_server(&server);
            let raw = raw_http(n, threads, &url);
            let (tether, errors) = tether_http_calls(n, threads, &url);
            let _ = child.kill();
            let _ = child.wait();
            (raw, tether, errors, threads)
        }
        other => {
            eprintln!("unknown mode {other:?}: cold, seq or conc");
            std::process::exit(2);
        }
    };
    if mode == "cold" {
        println!("raw pipe cold start: {:.3} ms (median of {n})", ms(raw));
        println!("tether   cold start: {:.3} ms (median of {n})", ms(tether));
        println!("difference: {:+.3} ms", ms(tether) - ms(raw));
    } else {
        let raw_rate = n as f64 / raw.as_secs_f64();
        let tether_rate = n as f64 / tether.as_secs_f64();
        println!("raw pipe: {n} calls in {:.1} ms = {raw_rate:.0} calls/s", ms(raw));
        println!("tether:   {n} calls in {:.1} ms = {tether_rate:.0} calls/s", ms(tether));
        println!("ratio tether/raw: {:.3}", tether_rate / raw_rate);
    }
    println!(
        "{}",
        json!({"client": "tether", "mode": mode, "n": n, "inflight": inflight, "ms": ms(tether), "errors": errors})
    );
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn transport(server: &[String]) -> Transport {
    let args: Vec<&str> = server[1..].iter().map(String::as_str).collect();
    Transport::Stdio(StdioCommand::new(&server[0], &args))
}

/// The median of `n` runs of `run`.
/// Raw cold starts without and with a probe, alternated; their medians.
fn raw_pair(n: usize, server: &[String]) -> (Duration, Duration) {
    let mut plain = Vec::new();
    let mut probed = Vec::new();
    for _ in 0..n {
        plain.push(raw_cold(server, false));
        probed.push(raw_cold(server, true));
    }
    plain.sort();
    probed.sort();
    (plain[n / 2], probed[n / 2])
}

struct RawServer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
}

impl RawServer {
    fn spawn(server: &[String]) -> RawServer {
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

    fn send(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    fn receive(&mut self) -> &str {
        self.line.clear();
        self.stdout.read_line(&mut self.line).unwrap();
        &self.line
    }

    fn handshake(&mut self) {
        self.send(INITIALIZE);
        assert!(self.receive().contains("protocolVersion"));
        self.send(INITIALIZED);
        self.send(TOOLS_LIST);
        assert!(self.receive().contains("echo"));
    }

    fn finish(self) {
        let RawServer { mut child, stdin, .. } = self;
        drop(stdin);
        child.wait().unwrap();
    }
}

fn call_line(id: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"hello-{id}"}}}}}}"#,
        id + 2
    )
}

/// A raw cold start; with `probe`, a `server/discover` line and its
/// answer first (the tight measure of one round trip in a fresh process).
fn raw_cold(server: &[String], probe: bool) -> Duration {
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

fn tether_cold(n: usize, server: &[String]) -> (Duration, Duration, Duration) {
    let transport = transport(server);
    let mut ready = Vec::new();
    let mut pinned = Vec::new();
    let mut closing = Vec::new();
    for round in 0..2 * n {
        let (era, times) = if round % 2 == 0 {
            (EraChoice::Auto, &mut ready)
        } else {
            (EraChoice::Legacy, &mut pinned)
        };
        let started = Instant::now();
        let options = ClientOptions::default().with_era(era);
        let client = Client::connect("bench", &transport, options).expect("connects");
        let tools = client.list_tools(&CallOptions::default()).expect("lists tools");
        assert!(tools.iter().any(|tool| tool.name == "echo"));
        times.push(started.elapsed());
        let started = Instant::now();
        client.close().expect("closes");
        closing.push(started.elapsed());
    }
    ready.sort();
    pinned.sort();
    closing.sort();
    (ready[n / 2], pinned[n / 2], closing[n])
}

fn raw_seq(n: usize, server: &[String]) -> Duration {
    let mut raw = RawServer::spawn(server);
    raw.handshake();
    let lines: Vec<String> = (0..n).map(call_line).collect();
    let started = Instant::now();
    for (i, line) in lines.iter().enumerate() {
        raw.send(line);
        let expected = format!("hello-{i}\"");
        assert!(raw.receive().contains(&expected));
    }
    let elapsed = started.elapsed();
    raw.finish();
    elapsed
}

fn raw_pipelined(n: usize, server: &[String]) -> Duration {
    let mut raw = RawServer::spawn(server);
    raw.handshake();
    let lines: Vec<String> = (0..n).map(call_line).collect();
    let started = Instant::now();
    let mut sent = 0;
    while sent < n.min(IN_FLIGHT) {
        raw.send(&lines[sent]);
        sent += 1;
    }
    for _ in 0..n {
        assert!(raw.receive().contains("hello-"));
        if sent < n {
            raw.send(&lines[sent]);
            sent += 1;
        }
    }
    let elapsed = started.elapsed();
    raw.finish();
    elapsed
}

/// `n` echo calls spread over `threads` threads; returns the time and the
/// number of wrong or failed answers.
fn tether_calls(n: usize, threads: usize, server: &[String]) -> (Duration, usize) {
    let client = Arc::new(
        Client::connect("bench", &transport(server), ClientOptions::default()).expect("connects"),
    );
    run_calls(client, n, threads)
}

/// `n` checked echo calls over `threads` threads; the time and the errors.
fn run_calls(client: Arc<Client>, n: usize, threads: usize) -> (Duration, usize) {
    client.list_tools(&CallOptions::default()).expect("lists tools");
    let started = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|worker| {
            let client = Arc::clone(&client);
            thread::spawn(move || {
                let options = CallOptions::default();
                let mut errors = 0;
                for i in (worker..n).step_by(threads) {
                    let text = format!("hello-{i}");
                    match client.call_tool("echo", json!({"text": text}), &options) {
                        Ok(result) if result.to_text() == text => {}
                        _ => errors += 1,
                    }
                }
                errors
            })
        })
        .collect();
    let errors = workers.into_iter().map(|worker| worker.join().unwrap()).sum();
    let elapsed = started.elapsed();
    client.close().expect("closes");
    (elapsed, errors)
}

/// Starts an HTTP server command and reads its URL from its first stdout line.
fn start_http_server(server: &[String]) -> (Child, String) {
    let mut child = Command::new(&server[0])
        .args(&server[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("server starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("the server prints its URL");
    (child, line.trim().to_owned())
}

/// `n` echo calls as raw HTTP/1.1 POSTs on kept-alive connections, spread
/// over `threads` threads (one connection each), after one initialize.
fn raw_http(n: usize, threads: usize, url: &str) -> Duration {
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
                    assert!(exchange(&mut stream, &call_line(i)).contains(&format!("hello-{i}\"")));
                }
            });
        }
    });
    started.elapsed()
}

/// `n` echo calls through tether over Streamable HTTP, `threads` in flight.
fn tether_http_calls(n: usize, threads: usize, url: &str) -> (Duration, usize) {
    let transport = Transport::Http(tether::HttpTarget::new(url, tether::HttpKind::Streamable));
    let client =
        Arc::new(Client::connect("bench", &transport, ClientOptions::default()).expect("connects"));
    run_calls(client, n, threads)
}
