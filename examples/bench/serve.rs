//! `bench serve N TETHER [--arg NAME] <server-cmd> [args…]`: the same echo
//! calls (the `echo` tool, its text in argument NAME, `text` by default) made
//! directly with tether's `Client` and through `tether serve` (another
//! `Client` in front of a `tether serve` process serving that server), in
//! one run: the latency `serve` adds per call (p50 and p99), throughput at 1
//! and 16 in flight, the serving process's CPU time per call (user and
//! system, from `/proc`), spawn to `initialize` answered, its idle memory,
//! and how long it takes to exit once its stdin closes. With
//! `BENCH_CONC_ONLY=1`, only a warm-up of 100 sequential calls each way
//! before the calls in flight (to profile or count those alone).

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::scripts::{percentile, us};
use serde_json::json;
use tether::{CallOptions, Client, ClientOptions, EraChoice, StdioCommand, Transport};

const IN_FLIGHT: usize = 16;
/// The echo tool's argument that holds the text.
static ARGUMENT: std::sync::OnceLock<String> = std::sync::OnceLock::new();

pub(crate) fn serve(n: usize, args: &[String]) {
    let (tether, mut server) = args.split_first().expect("bench serve N TETHER SERVER...");
    let mut argument = "text".to_owned();
    if server.first().map(String::as_str) == Some("--arg") {
        argument.clone_from(&server[1]);
        server = &server[2..];
    }
    ARGUMENT.set(argument).unwrap();
    let (direct, front, spawn_to_initialize, config) = connect_both(tether, server, "echo");
    let direct = Arc::new(direct);
    let front = Arc::new(front);
    let relay = Arc::new(connect_relay(server));
    // Warm up all three.
    sequential(&direct, "echo", 200);
    sequential(&relay, "echo", 200);
    sequential(&front, "echo__echo", 200);
    let mut direct_times = Vec::new();
    let mut relay_times = Vec::new();
    let mut front_times = Vec::new();
    // Alternating rounds, so that the machine's load falls on both alike.
    let rounds = if std::env::var_os("BENCH_CONC_ONLY").is_some() { 0 } else { 4 };
    if rounds == 0 {
        direct_times.extend(sequential(&direct, "echo", 100));
        front_times.extend(sequential(&front, "echo__echo", 100));
        thread::sleep(Duration::from_secs(1));
    }
    let serving = process_pid(tether, "serve");
    let me = std::env::current_exe().unwrap().display().to_string();
    let relaying = process_pid(&me, "relay");
    let (mut serving_ticks, mut relay_ticks) = (0, 0);
    for _ in 0..rounds {
        direct_times.extend(sequential(&direct, "echo", n / 4));
        let before = relaying.map_or(0, cpu_ticks);
        relay_times.extend(sequential(&relay, "echo", n / 4));
        relay_ticks += relaying.map_or(0, cpu_ticks) - before;
        let before = serving.map_or(0, cpu_ticks);
        front_times.extend(sequential(&front, "echo__echo", n / 4));
        serving_ticks += serving.map_or(0, cpu_ticks) - before;
    }
    let direct_seq = throughput(&direct_times);
    let front_seq = throughput(&front_times);
    let relay_seq = throughput(&relay_times);
    let direct_conc = concurrent(&direct, "echo", n);
    let relay_conc = concurrent(&relay, "echo", n);
    let before = serving.map_or(0, cpu_ticks);
    let front_conc = concurrent(&front, "echo__echo", n);
    let conc_ticks = serving.map_or(0, cpu_ticks) - before;
    thread::sleep(Duration::from_millis(300));
    let serving_pid = serving;
    let idle_kib = serving_pid.map_or(0, |pid| status_field(pid, "VmRSS:"));
    let front = Arc::try_unwrap(front).ok().expect("no other handle");
    let closing = Instant::now();
    front.close().unwrap();
    let exit = closing.elapsed();
    let added_p50 = percentile(&front_times, 0.5).saturating_sub(percentile(&direct_times, 0.5));
    let added_p99 = percentile(&front_times, 0.99).saturating_sub(percentile(&direct_times, 0.99));
    println!("calls: {n} sequential (4 alternating rounds), {n} with {IN_FLIGHT} in flight");
    let way = |name: &str, times: &[Duration], seq: f64, conc: f64| {
        println!(
            "{name:<7} p50 {:>7.1} us  p99 {:>7.1} us  {seq:>8.0} calls/s seq  {conc:>8.0} calls/s x{IN_FLIGHT}",
            us(percentile(times, 0.5)),
            us(percentile(times, 0.99)),
        );
    };
    way("direct", &direct_times, direct_seq, direct_conc);
    if rounds > 0 {
        way("relay", &relay_times, relay_seq, relay_conc);
    }
    way("serve", &front_times, front_seq, front_conc);
    println!(
        "added   p50 {:>7.1} us  p99 {:>7.1} us;  throughput ratio {:.2} seq, {:.2} x{IN_FLIGHT}",
        us(added_p50),
        us(added_p99),
        front_seq / direct_seq,
        front_conc / direct_conc
    );
    if rounds > 0 {
        let relay_p50 =
            percentile(&relay_times, 0.5).saturating_sub(percentile(&direct_times, 0.5));
        println!(
            "relay adds p50 {:>5.1} us; throughput ratio {:.2} seq, {:.2} x{IN_FLIGHT};  serve / relay {:.2} seq, {:.2} x{IN_FLIGHT}",
            us(relay_p50),
            relay_seq / direct_seq,
            relay_conc / direct_conc,
            front_seq / relay_seq,
            front_conc / relay_conc
        );
    }
    // Clock ticks are 10 ms: over thousands of calls, close enough.
    let per_call = |ticks: u64, calls: usize| ticks as f64 * 1e4 / calls.max(1) as f64;
    println!(
        "the serving process's CPU per call: {:.1} us sequential, {:.1} us x{IN_FLIGHT}; the relay's {:.1} us sequential",
        per_call(serving_ticks, front_times.len().min(n * rounds / 4)),
        per_call(conc_ticks, n),
        per_call(relay_ticks, relay_times.len().min(n * rounds / 4)),
    );
    println!(
        "spawn to initialize answered {:.1} ms; serving process idle RSS {:.1} MB; exit {:.0} ms after stdin closed",
        spawn_to_initialize.as_secs_f64() * 1e3,
        idle_kib as f64 / 1024.0,
        exit.as_secs_f64() * 1e3
    );
    println!(
        "{}",
        json!({"mode": "serve", "calls": n,
               "addedP50Us": us(added_p50), "addedP99Us": us(added_p99),
               "seqRatio": front_seq / direct_seq, "concRatio": front_conc / direct_conc,
               "relaySeqRatio": relay_seq / direct_seq, "relayConcRatio": relay_conc / direct_conc,
               "spawnToInitializeMs": spawn_to_initialize.as_secs_f64() * 1e3,
               "idleRssMb": idle_kib as f64 / 1024.0, "exitMs": exit.as_secs_f64() * 1e3})
    );
    Arc::try_unwrap(direct).ok().expect("no other handle").close().unwrap();
    Arc::try_unwrap(relay).ok().expect("no other handle").close().unwrap();
    let _ = std::fs::remove_dir_all(&config);
}

/// `bench relay 0 SERVER...`: starts the server and copies bytes from this
/// process's stdin to the server's and from the server's stdout to this
/// process's, and nothing else, until stdin ends.
pub(crate) fn relay(server: &[String]) {
    use std::os::fd::AsFd;
    let mut child = std::process::Command::new(&server[0])
        .args(&server[1..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the server starts");
    let mut to_server = child.stdin.take().unwrap();
    let mut from_server = child.stdout.take().unwrap();
    // Plain files on the descriptors: no buffer of std's in the way.
    let mut input = std::fs::File::from(std::io::stdin().as_fd().try_clone_to_owned().unwrap());
    let mut output = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned().unwrap());
    let back = thread::Builder::new()
        .name("relay-back".into())
        .spawn(move || {
            let _ = std::io::copy(&mut from_server, &mut output);
        })
        .unwrap();
    let _ = std::io::copy(&mut input, &mut to_server);
    drop(to_server);
    let _ = back.join();
    let _ = child.wait();
}

/// A `Client` reaching the server through `bench relay`.
fn connect_relay(server: &[String]) -> Client {
    let me = std::env::current_exe().unwrap().display().to_string();
    let mut args = vec!["relay".to_owned(), "0".to_owned()];
    args.extend(server.iter().cloned());
    Client::connect(
        "relay",
        &Transport::Stdio(StdioCommand::new(&me, &strs(&args))),
        ClientOptions::default()
            .with_request_timeout(Duration::from_secs(30))
            .with_era(EraChoice::Legacy),
    )
    .unwrap()
}

/// `bench serve-huge N BYTES TETHER SERVER...`: N calls of `huge` (BYTES
/// characters back) directly and through `tether serve`, alternating; the
/// p50 of each, and their ratio. With `BENCH_VALUES=1`, `structured` with
/// BYTES small objects instead.
pub(crate) fn serve_huge(n: usize, args: &[String]) {
    let bytes: u64 = args[0].parse().expect("BYTES is a number");
    let (tether, server) = args[1..].split_first().expect("bench serve-huge N BYTES TETHER SERVER");
    // `BENCH_VALUES=1`: a result of many small values instead of one long
    // string (`misbehave --structured`'s `structured`, given an array of
    // BYTES objects, which it sends back as text and as structuredContent).
    let values = std::env::var_os("BENCH_VALUES").is_some();
    let tool = if values { "structured" } else { "huge" };
    let arguments = if values {
        let items: Vec<_> = (0..bytes).map(|i| json!({"x": i, "label": "abc"})).collect();
        json!({"value": items})
    } else {
        json!({"bytes": bytes})
    };
    let (direct, front, _, config) = connect_both(tether, server, tool);
    let call = |client: &Client, name: &str| {
        let began = Instant::now();
        let result = client.call_tool(name, arguments.clone(), &CallOptions::default()).unwrap();
        let took = began.elapsed();
        assert!(!result.to_text().is_empty());
        took
    };
    let via = format!("echo__{tool}");
    call(&direct, tool);
    call(&front, &via);
    let (mut direct_times, mut front_times) = (Vec::new(), Vec::new());
    for _ in 0..n {
        direct_times.push(call(&direct, tool));
        front_times.push(call(&front, &via));
    }
    let (direct_p50, front_p50) = (percentile(&direct_times, 0.5), percentile(&front_times, 0.5));
    println!(
        "{n} calls of {tool} ({bytes}): direct p50 {:.2} ms, through serve p50 {:.2} ms, added {:.2} ms ({:.2}x)",
        direct_p50.as_secs_f64() * 1e3,
        front_p50.as_secs_f64() * 1e3,
        front_p50.saturating_sub(direct_p50).as_secs_f64() * 1e3,
        front_p50.as_secs_f64() / direct_p50.as_secs_f64()
    );
    front.close().unwrap();
    direct.close().unwrap();
    let _ = std::fs::remove_dir_all(&config);
}

/// A `Client` straight to the server and one in front of a `tether serve`
/// process serving it (as `echo`), once that one lists `echo__TOOL`; how
/// long `tether serve` took to answer `initialize`, and its config folder.
fn connect_both(
    tether: &str,
    server: &[String],
    tool: &str,
) -> (Client, Client, Duration, std::path::PathBuf) {
    let config = std::env::temp_dir().join(format!("tether-bench-serve-{}", std::process::id()));
    std::fs::create_dir_all(&config).unwrap();
    let entry = json!({"mcpServers": {"echo": {"command": server[0], "args": &server[1..]}}});
    std::fs::write(config.join("mcp.json"), entry.to_string()).unwrap();
    let options = || {
        ClientOptions::default()
            .with_request_timeout(Duration::from_secs(30))
            .with_era(EraChoice::Legacy)
    };
    let direct = Client::connect(
        "direct",
        &Transport::Stdio(StdioCommand::new(&server[0], &strs(&server[1..]))),
        options(),
    )
    .unwrap();
    let front_args =
        vec!["--config-dir".to_owned(), config.display().to_string(), "serve".to_owned()];
    let started = Instant::now();
    let front = Client::connect(
        "front",
        &Transport::Stdio(StdioCommand::new(tether, &strs(&front_args))),
        options(),
    )
    .unwrap();
    let spawn_to_initialize = started.elapsed();
    // The server behind connects in the background: wait for its tool.
    let wanted = format!("echo__{tool}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !front.list_tools(&CallOptions::default()).unwrap().iter().any(|t| t.name == wanted) {
        assert!(Instant::now() < deadline, "{wanted} never appeared");
        thread::sleep(Duration::from_millis(20));
    }
    (direct, front, spawn_to_initialize, config)
}

fn strs(words: &[String]) -> Vec<&str> {
    words.iter().map(String::as_str).collect()
}

fn call(client: &Client, tool: &str, i: usize) {
    let text = format!("hello-{i}");
    let mut arguments = serde_json::Map::new();
    arguments.insert(ARGUMENT.get().unwrap().clone(), json!(text));
    let arguments = serde_json::Value::Object(arguments);
    let result = client.call_tool(tool, arguments, &CallOptions::default()).unwrap();
    assert!(result.to_text().contains(&text), "{:?}", result.raw);
}

fn sequential(client: &Client, tool: &str, n: usize) -> Vec<Duration> {
    (0..n)
        .map(|i| {
            let began = Instant::now();
            call(client, tool, i);
            began.elapsed()
        })
        .collect()
}

/// Calls a second, from per-call times.
fn throughput(times: &[Duration]) -> f64 {
    times.len() as f64 / times.iter().sum::<Duration>().as_secs_f64()
}

fn concurrent(client: &Arc<Client>, tool: &str, n: usize) -> f64 {
    let began = Instant::now();
    thread::scope(|scope| {
        for t in 0..IN_FLIGHT {
            let client = Arc::clone(client);
            scope.spawn(move || {
                for i in (t..n).step_by(IN_FLIGHT) {
                    call(&client, tool, i);
                }
            });
        }
    });
    n as f64 / began.elapsed().as_secs_f64()
}

/// A process this benchmark started (through one of its supervisors) whose
/// command line is `PROGRAM ... WORD` (`TETHER ... serve`, `BENCH relay ...`).
fn process_pid(program: &str, word: &str) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let words: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        let found = words.first().is_some_and(|first| *first == program.as_bytes())
            && words.contains(&word.as_bytes());
        (found && status_field(pid, "VmRSS:") > 0).then_some(pid)
    })
}

/// User and system time of process `pid` so far, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command's closing parenthesis; utime and stime
    // are the 14th and 15th of the whole line.
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    rest.split_whitespace().skip(11).take(2).filter_map(|t| t.parse::<u64>().ok()).sum()
}

fn status_field(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix(field))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|kib| kib.parse().ok())
        })
        .unwrap_or(0)
}
