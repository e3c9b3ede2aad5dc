//! Benchmarks tether against raw baselines on the same server, in one run.
//!
//! ```text
//! cargo run --release --example bench -- <mode> <N> <server-cmd> [args…]
//! cargo run --release --example bench -- flight <SERVERS> <CALLS> <server-cmd> [args…]
//! ```
//!
//! - `seq`: N sequential `echo` calls with `{"text":"hello-<i>"}`, each
//!   checked, against the tight raw pipe (the limit), the threaded raw
//!   pipe (the same exchange with a reader thread handing answers over),
//!   and the threaded pipe with JSON (which also does the JSON work a
//!   client returning `serde_json::Value` results cannot avoid).
//! - `conc`: N calls with 16 in flight: 16 threads for tether and the
//!   threaded pipe, one thread keeping 16 requests pipelined for the tight
//!   pipe.
//! - `cold`: N times spawn + the session start + tools/list (then close,
//!   timed apart), alternating tether's default (the `server/discover`
//!   probe first) with the era pinned to the handshake, and the raw pipe
//!   with and without a probe line, so that the probe's cost is measured in
//!   one run. `cold 1` is one tether start and nothing else, for timing a
//!   whole process from outside.
//! - `http-seq`, `http-conc`: as `seq` and `conc` over Streamable HTTP; the
//!   server command must print its URL as its first stdout line (as
//!   `http-server` does). The raw baseline is hand-written HTTP/1.1 POSTs
//!   on kept-alive connections, one per thread in flight.
//! - `many`: a hub connecting one server, then N, against a plain loop that
//!   spawns N and sends each `initialize` (use a server that takes a while
//!   to start, e.g. `sh -c 'sleep 0.3; exec echo-server'`).
//! - `idle`: the RSS and threads N idle connected servers add to the process.
//! - `flight`: CALLS checked calls over SERVERS servers, up to 256 at once.
//! - `frame`: one N MiB answer (the `huge` tool of `misbehave`), and the
//!   peak resident memory it took against its size.
//! - `codemode`: a script's start, a nested call against the same direct
//!   `hub.call` (N calls a round), calls in parallel, a stuck loop's
//!   overshoot past its deadline, and a memory bomb's peak against its cap.
//! - `serve`: `bench serve N TETHER <server-cmd> [args…]`: N echo calls
//!   directly and through a `tether serve` process in front of the same
//!   server (see `serve.rs`).
//! - `serve-huge`: `bench serve-huge N BYTES TETHER <server-cmd> [args…]`:
//!   N calls of `misbehave`'s `huge` tool (a result of BYTES characters)
//!   directly and through `tether serve`, alternating (see `serve.rs`).
//! - `kept`: `bench kept N TETHER <server-cmd> [args…]`: a one-shot
//!   `tether call` through a kept-alive session against one that starts
//!   the server afresh (see `kept.rs`).
//! - `schema`: `bench schema N <server-cmd>`: calls whose results are
//!   checked against their tool's `outputSchema` against calls unchecked,
//!   on `misbehave --structured` (see `schema.rs`).
//! - `ledger`: `bench ledger 0 CONFIG_DIR`: the bytes a model would read
//!   for eight multi-step tasks, with codemode against direct exposure, on
//!   the servers `demo`, `everything` and `wordcount` of that folder's
//!   `mcp.json`.
//!
//! `BENCH_ONLY=1` runs tether alone in `seq`, `conc` and the HTTP modes,
//! for profiling (the ratios it prints are then meaningless).
//!
//! The ratio is the figure to compare across machines; absolute times are
//! not. The last stdout line of the call modes is one JSON object.

mod fleet;
mod kept;
mod ledger;
mod raw;
mod schema;
mod scripts;
mod serve;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

/// Counts allocations, so that the call modes can say how many a call
/// makes: a figure that, unlike a time, does not move with the machine's
/// load. (One relaxed increment per allocation; the raw baselines make
/// almost none, so if anything this slows tether alone.)
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call goes to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::json;
use tether::{CallOptions, Client, ClientOptions, EraChoice, StdioCommand, Transport};

const IN_FLIGHT: usize = 16;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        eprintln!(
            "usage: bench <seq|conc|cold|http-seq|http-conc|many|idle|frame|codemode> <N> <server-cmd> [args…]\n       bench flight <SERVERS> <CALLS> <server-cmd> [args…]\n       bench ledger 0 <config-dir>"
        );
        std::process::exit(2);
    }
    let mode = args[0].as_str();
    let n: usize = args[1].parse().expect("N is a number");
    let server: Vec<String> = args[2..].to_vec();
    match mode {
        "many" => return fleet::many(n, &server),
        "idle" => return fleet::idle(n, &server),
        "flight" => {
            let calls: usize = server[0].parse().expect("CALLS is a number");
            return fleet::flight(n, calls, &server[1..]);
        }
        "cold" if n == 1 => {
            let started = Instant::now();
            let client = Client::connect("bench", &transport(&server), ClientOptions::default())
                .expect("connects");
            client.list_tools(&CallOptions::default()).expect("lists tools");
            println!("tether cold start: {:.3} ms", ms(started.elapsed()));
            return;
        }
        "cold" => return cold(n, &server),
        "frame" => return frame(n, &server),
        "codemode" => return scripts::codemode(n, &server),
        "ledger" => return ledger::ledger(&server),
        "serve" => return serve::serve(n, &server),
        "relay" => return serve::relay(&server),
        "serve-huge" => return serve::serve_huge(n, &server),
        "kept" => return kept::kept(n, &server),
        "schema" => return schema::schema(n, &server),
        _ => {}
    }
    // `BENCH_ONLY`: tether alone; its time stands in for the baselines'.
    let only = std::env::var_os("BENCH_ONLY").is_some();
    let (raw, threaded, tether, errors, inflight) = match mode {
        "seq" | "conc" => {
            let inflight = if mode == "seq" { 1 } else { IN_FLIGHT };
            let baselines = (!only).then(|| {
                let raw = match inflight {
                    1 => raw::seq(n, &server),
                    _ => raw::pipelined(n, inflight, &server),
                };
                let threaded = raw::threaded(n, inflight, &server, false);
                (raw, (threaded, raw::threaded(n, inflight, &server, true)))
            });
            let (tether, errors) = tether_calls(n, inflight, &server);
            let (raw, threaded) =
                baselines.map_or((tether, None), |(raw, threaded)| (raw, Some(threaded)));
            (raw, threaded, tether, errors, inflight)
        }
        "http-seq" | "http-conc" => {
            let threads = if mode == "http-seq" { 1 } else { IN_FLIGHT };
            let (mut child, url) = start_http_server(&server);
            let raw = (!only).then(|| raw::http(n, threads, &url));
            let (tether, errors) = tether_http_calls(n, threads, &url);
            let _ = child.kill();
            let _ = child.wait();
            (raw.unwrap_or(tether), None, tether, errors, threads)
        }
        other => {
            eprintln!("unknown mode {other:?}");
            std::process::exit(2);
        }
    };
    let rate = |time: Duration| n as f64 / time.as_secs_f64();
    println!("raw pipe: {n} calls in {:.1} ms = {:.0} calls/s", ms(raw), rate(raw));
    if let Some((threaded, with_json)) = threaded {
        println!("threaded: {n} calls in {:.1} ms = {:.0} calls/s", ms(threaded), rate(threaded));
        println!(
            "threaded with JSON: {n} calls in {:.1} ms = {:.0} calls/s",
            ms(with_json),
            rate(with_json)
        );
    }
    println!("tether:   {n} calls in {:.1} ms = {:.0} calls/s", ms(tether), rate(tether));
    println!("ratio tether/raw: {:.3}", rate(tether) / rate(raw));
    if let Some((threaded, with_json)) = threaded {
        println!("ratio tether/threaded: {:.3}", rate(tether) / rate(threaded));
        println!("ratio tether/threaded with JSON: {:.3}", rate(tether) / rate(with_json));
    }
    println!(
        "{}",
        json!({"client": "tether", "mode": mode, "n": n, "inflight": inflight, "ms": ms(tether), "errors": errors})
    );
}

/// `frame MIB`: one answer of MIB MiB (the `huge` tool of `misbehave`),
/// and the peak resident memory it took, against its size.
fn frame(mib: usize, server: &[String]) {
    let client =
        Client::connect("bench", &transport(server), ClientOptions::default()).expect("connects");
    // Resets the peak to what is resident now (Linux: write 5 to clear_refs).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let before = fleet::status_field("VmRSS:");
    let bytes = mib * 1024 * 1024;
    let result = client
        .call_tool("huge", json!({"bytes": bytes}), &CallOptions::default())
        .expect("the call answers");
    let text = result.to_text();
    assert_eq!(text.len(), bytes);
    let peak = fleet::status_field("VmHWM:");
    let size_kib = bytes as f64 / 1024.0;
    println!(
        "{mib} MiB answer, read and turned into text: peak RSS {:.1} MiB above the {:.1} MiB before = {:.2}× its size",
        (peak - before) as f64 / 1024.0,
        before as f64 / 1024.0,
        (peak - before) as f64 / size_kib
    );
    drop(text);
    drop(result);
    client.close().expect("closes");
}

/// `cold N`: the alternated starts, and their medians.
fn cold(n: usize, server: &[String]) {
    // Alternated, so that the two medians see the same machine.
    let (raw, raw_probe) = raw::cold_pair(n, server);
    println!(
        "raw pipe cold start with a probe first: {:.3} ms (one round trip {:+.3} ms)",
        ms(raw_probe),
        ms(raw_probe) - ms(raw)
    );
    let (tether, pinned, close) = tether_cold(n, server);
    println!("tether close (stdin EOF, wait, reap, join): {:.3} ms median", ms(close));
    println!(
        "tether   cold start, handshake pinned (no probe): {:.3} ms (median of {n})",
        ms(pinned)
    );
    println!("probe cost (default − pinned): {:+.3} ms", ms(tether) - ms(pinned));
    println!("raw pipe cold start: {:.3} ms (median of {n})", ms(raw));
    println!("tether   cold start: {:.3} ms (median of {n})", ms(tether));
    println!("difference: {:+.3} ms", ms(tether) - ms(raw));
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn transport(server: &[String]) -> Transport {
    let args: Vec<&str> = server[1..].iter().map(String::as_str).collect();
    Transport::Stdio(StdioCommand::new(&server[0], &args))
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
    let allocations = ALLOCATIONS.load(Ordering::Relaxed);
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
    let made = ALLOCATIONS.load(Ordering::Relaxed) - allocations;
    // The caller's own share (its `format!` and `json!`) is in it too.
    println!("tether allocations per call: {:.1}", made as f64 / n as f64);
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

/// `n` echo calls through tether over Streamable HTTP, `threads` in flight.
fn tether_http_calls(n: usize, threads: usize, url: &str) -> (Duration, usize) {
    let transport = Transport::Http(tether::HttpTarget::new(url, tether::HttpKind::Streamable));
    let client =
        Arc::new(Client::connect("bench", &transport, ClientOptions::default()).expect("connects"));
    run_calls(client, n, threads)
}
