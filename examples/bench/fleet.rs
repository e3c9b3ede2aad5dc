//! Many servers at once: how fast a hub connects them (`many`), what an
//! idle one costs (`idle`), and many calls in flight over them (`flight`).

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::json;
use tether::{CallOptions, Config, Hub, HubOptions, ServerConfig, ServerState};

use crate::raw::{RawServer, INITIALIZE};

/// `BENCH_ERA=legacy` (or `modern`) pins the servers' era, to see the probe's share.
fn config(count: usize, server: &[String]) -> Config {
    let args: Vec<&str> = server[1..].iter().map(String::as_str).collect();
    let era = std::env::var("BENCH_ERA").ok().and_then(|word| word.parse().ok());
    (0..count).fold(Config::new(), |config, k| {
        let mut entry = ServerConfig::stdio(&format!("s{k}"), &server[0], &args);
        entry.protocol = era.unwrap_or_default();
        config.with_server(entry)
    })
}

/// Starts a hub of `count` servers; the time until every one is ready.
fn hub_start(count: usize, server: &[String]) -> (Hub, Duration) {
    let started = Instant::now();
    let hub = Hub::start(config(count, server), HubOptions::default());
    let elapsed = started.elapsed();
    let ready = hub.status().iter().filter(|s| s.state == ServerState::Ready).count();
    assert_eq!(ready, count, "every server connects");
    (hub, elapsed)
}

/// A plain loop: spawn every server, send each `initialize`, read each
/// answer. What any client must at least do.
fn plain_loop(count: usize, server: &[String]) -> Duration {
    let started = Instant::now();
    let mut servers: Vec<RawServer> = (0..count)
        .map(|_| {
            let mut raw = RawServer::spawn(server);
            raw.send(INITIALIZE);
            raw
        })
        .collect();
    for raw in &mut servers {
        assert!(raw.receive().contains("protocolVersion"));
    }
    let elapsed = started.elapsed();
    for raw in servers {
        raw.finish();
    }
    elapsed
}

/// `many N`: one server, N servers through a hub, N by the plain loop.
pub fn many(count: usize, server: &[String]) {
    let (hub, one) = hub_start(1, server);
    hub.shutdown();
    let (hub, all) = hub_start(count, server);
    hub.shutdown();
    let plain = plain_loop(count, server);
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("tether, 1 server:    {:.1} ms", ms(one));
    println!("tether, {count} servers: {:.1} ms ({:.2}× one)", ms(all), ms(all) / ms(one));
    println!("plain loop, {count}:     {:.1} ms ({:.2}× one)", ms(plain), ms(plain) / ms(one));
    println!("tether / plain loop: {:.2}", ms(all) / ms(plain));
}

/// This process's resident set (KiB) and thread count.
fn rss_and_threads() -> (u64, u64) {
    (status_field("VmRSS:"), status_field("Threads:"))
}

/// A number from this process's `/proc/self/status` (`VmRSS:`, `VmHWM:`,
/// `Threads:`, …), 0 when missing.
pub fn status_field(name: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|value| value.parse().ok())
        .unwrap_or(0)
}

/// Resident KiB of the mappings shaped like thread stacks (2 MiB, or a stdio
/// reader's 448 KiB), and how many.
fn stack_rss() -> (u64, u64) {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    let (mut total, mut count, mut in_stack) = (0, 0, false);
    for line in smaps.lines() {
        if let Some(size) = line.strip_prefix("Size:") {
            // std's default, and a stdio reader's (see `transport::stdio`).
            in_stack = matches!(size.trim(), "2048 kB" | "448 kB");
            count += u64::from(in_stack);
        } else if let Some(rss) = line.strip_prefix("Rss:").filter(|_| in_stack) {
            total += rss.trim().trim_end_matches(" kB").parse::<u64>().unwrap_or(0);
        }
    }
    (total, count)
}

/// Bytes malloc has handed out and not had back (glibc's count).
fn heap_in_use() -> usize {
    // SAFETY: mallinfo2 only reads the allocator's counters.
    let info = unsafe { libc::mallinfo2() };
    info.uordblks + info.hblkhd
}

/// `idle N`: what N connected, idle servers add to this process.
pub fn idle(count: usize, server: &[String]) {
    // One server first, so that what every process pays once (the spawner,
    // the TLS roots, code pages) is not counted per server.
    let (warm, _) = hub_start(1, server);
    thread::sleep(Duration::from_millis(500));
    if std::env::var_os("BENCH_TRIM").is_some() {
        // SAFETY: as below.
        unsafe { libc::malloc_trim(0) };
    }
    let (rss_before, threads_before) = rss_and_threads();
    let heap_before = heap_in_use();
    let (hub, _) = hub_start(count, server);
    thread::sleep(Duration::from_secs(1));
    if std::env::var_os("BENCH_TRIM").is_some() {
        // SAFETY: returns free heap pages to the system; no other effect.
        unsafe { libc::malloc_trim(0) };
    }
    let (rss_after, threads_after) = rss_and_threads();
    let heap = heap_in_use().saturating_sub(heap_before) as f64 / count as f64 / 1024.0;
    println!("per idle server: {heap:.1} KiB of it allocated on the heap (malloc's count)");
    let rss = rss_after.saturating_sub(rss_before) as f64 / count as f64;
    let threads = threads_after.saturating_sub(threads_before) as f64 / count as f64;
    println!(
        "{count} idle servers: +{} KiB RSS, +{} threads",
        rss_after - rss_before,
        threads_after - threads_before
    );
    println!("per idle server: {rss:.1} KiB RSS, {threads:.2} threads");
    let (stacks, count) = stack_rss();
    println!(
        "thread stacks resident: {stacks} KiB over {count} stacks ({:.1} KiB each)",
        stacks as f64 / count.max(1) as f64
    );
    // `BENCH_HOLD=S`: stay S seconds, so that /proc/<pid>/smaps can be read.
    if let Some(hold) = std::env::var("BENCH_HOLD").ok().and_then(|s| s.parse().ok()) {
        println!("holding {hold} s (pid {})", std::process::id());
        thread::sleep(Duration::from_secs(hold));
    }
    hub.shutdown();
    warm.shutdown();
}

/// `flight SERVERS CALLS`: CALLS checked echo calls spread over SERVERS
/// servers, from up to 256 threads at once.
pub fn flight(servers: usize, calls: usize, server: &[String]) {
    let (hub, _) = hub_start(servers, server);
    let hub = Arc::new(hub);
    let threads = calls.clamp(1, 256);
    let started = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|worker| {
            let hub = Arc::clone(&hub);
            thread::spawn(move || {
                let mut errors = 0;
                for i in (worker..calls).step_by(threads) {
                    let text = format!("hello-{i}");
                    let tool = format!("mcp__s{}__echo", i % servers);
                    match hub.call(&tool, json!({"text": text}), &CallOptions::default()) {
                        Ok(result) if result.to_text() == text => {}
                        _ => errors += 1,
                    }
                }
                errors
            })
        })
        .collect();
    let errors: usize = workers.into_iter().map(|worker| worker.join().unwrap()).sum();
    let elapsed = started.elapsed();
    println!(
        "{calls} calls over {servers} servers, {threads} threads: {:.1} ms, {errors} wrong or failed",
        elapsed.as_secs_f64() * 1000.0
    );
    if let Ok(hub) = Arc::try_unwrap(hub) {
        hub.shutdown();
    }
}
