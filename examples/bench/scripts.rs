//! `codemode N`: what a codemode script costs over direct calls, on the echo
//! server: the start of a script (fresh runtime, globals, compile, run), a
//! nested call against the same `hub.call` made directly (alternated
//! rounds, medians), calls in parallel, how far past its deadline a stuck
//! loop runs, and the peak memory a memory bomb reaches against its cap.

use std::time::{Duration, Instant};

use serde_json::json;
use tether::{
    CallOptions, Config, Exposure, Hub, HubOptions, ScriptLimits, ScriptOptions, ServerConfig,
};

use super::fleet::status_field;
use super::ms;

/// Rounds of direct calls and scripts, alternated.
const ROUNDS: usize = 7;

pub fn codemode(n: usize, server: &[String]) {
    let args: Vec<&str> = server[1..].iter().map(String::as_str).collect();
    let mut entry = ServerConfig::stdio("echo", &server[0], &args);
    entry.exposure = Exposure::Codemode;
    let hub = Hub::start(Config::new().with_server(entry), HubOptions::default());
    assert!(hub.tools().iter().any(|tool| tool.qualified_name == "mcp__echo__echo"));

    // The memory bomb first, while the process's peak is still low.
    bomb(&hub, 64);

    let limits =
        ScriptLimits::default().with_max_calls(n + 1).with_timeout(Duration::from_secs(600));
    let options = ScriptOptions::default().with_limits(limits);
    let run = |code: &str| {
        let started = Instant::now();
        let ran = hub.run_script(code, &options).expect("the engine runs");
        let took = started.elapsed();
        assert!(ran.error.is_none(), "{code}: {:?}", ran.error);
        took
    };
    for _ in 0..50 {
        run("return 1");
    }
    let starts: Vec<Duration> = (0..n.clamp(200, 2000)).map(|_| run("return 1")).collect();
    let start = median(&starts);
    println!(
        "script start (`return 1`): median {:.3} ms, p90 {:.3} ms, of {}",
        ms(start),
        ms(percentile(&starts, 0.9)),
        starts.len()
    );

    let sequential = format!(
        "for (let i = 0; i < {n}; i++) {{\n\
           const r = await tools.mcp__echo__echo({{ text: 'hello-' + i }});\n\
           if (r.content[0].text !== 'hello-' + i) throw new Error('wrong answer ' + i);\n\
         }}\n\
         return {n};"
    );
    let (mut direct, mut scripted) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let started = Instant::now();
        for i in 0..n {
            let text = format!("hello-{i}");
            let result = hub
                .call("mcp__echo__echo", json!({ "text": text }), &CallOptions::default())
                .expect("the call answers");
            assert_eq!(result.to_text(), text);
        }
        direct.push(started.elapsed() / n as u32);
        let took = run(&sequential);
        scripted.push(took.saturating_sub(start) / n as u32);
    }
    let (direct, scripted) = (median(&direct), median(&scripted));
    println!("direct hub.call: {:.2} µs per call (median of {ROUNDS} rounds of {n})", us(direct));
    println!("from a script:   {:.2} µs per call (the script's start taken off)", us(scripted));
    let overhead = us(scripted) - us(direct);
    println!("nested call over a direct one: {overhead:+.2} µs");

    let parallel = format!(
        "for (let i = 0; i < {n}; i += 8) {{\n\
           await Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map(j => tools.mcp__echo__echo({{ text: 'p' + (i + j) }})));\n\
         }}\n\
         return {n};"
    );
    let limits = limits.with_max_calls(n + 8);
    let parallel_options = ScriptOptions::default().with_limits(limits);
    let mut in_parallel = Vec::new();
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let ran = hub.run_script(&parallel, &parallel_options).expect("the engine runs");
        assert!(ran.error.is_none(), "{:?}", ran.error);
        in_parallel.push(started.elapsed() / n as u32);
    }
    let in_parallel = median(&in_parallel);
    println!("Promise.all, 8 at a time: {:.2} µs per call", us(in_parallel));

    let deadline = Duration::from_millis(100);
    let stuck_options =
        ScriptOptions::default().with_limits(ScriptLimits::default().with_timeout(deadline));
    let mut overshoots = Vec::new();
    for _ in 0..20 {
        let started = Instant::now();
        let ran = hub.run_script("while (true) {}", &stuck_options).expect("the engine runs");
        assert!(ran.error.is_some());
        overshoots.push(started.elapsed().saturating_sub(deadline));
    }
    let worst = overshoots.iter().max().copied().unwrap_or_default();
    println!(
        "stuck loop past a {} ms deadline: median {:.3} ms, worst {:.3} ms, of 20",
        deadline.as_millis(),
        ms(median(&overshoots)),
        ms(worst)
    );
    println!(
        "{}",
        json!({
            "mode": "codemode", "n": n,
            "startMs": ms(start), "directUs": us(direct), "scriptUs": us(scripted),
            "overheadUs": overhead, "parallelUs": us(in_parallel),
            "stuckOvershootMs": ms(median(&overshoots)), "stuckWorstMs": ms(worst),
        })
    );
    hub.shutdown();
}

/// A script that grows its heap until the cap stops it; the process's peak
/// resident memory against what it was before.
fn bomb(hub: &Hub, cap_mib: usize) {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let before = status_field("VmRSS:");
    let limits = ScriptLimits::default().with_memory(cap_mib << 20);
    let ran = hub
        .run_script(
            "const kept = []; while (true) kept.push('x'.repeat(1 << 20) + kept.length);",
            &ScriptOptions::default().with_limits(limits),
        )
        .expect("the engine runs");
    let peak = status_field("VmHWM:");
    let error = ran.error.expect("the bomb fails");
    println!(
        "memory bomb under a {cap_mib} MiB cap: {} ({}); peak RSS {:.1} MiB above the {:.1} MiB before",
        error.kind.as_str(),
        error.message,
        (peak.saturating_sub(before)) as f64 / 1024.0,
        before as f64 / 1024.0
    );
}

fn median(times: &[Duration]) -> Duration {
    percentile(times, 0.5)
}

pub(crate) fn percentile(times: &[Duration], at: f64) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted[((sorted.len() - 1) as f64 * at).round() as usize]
}

pub(crate) fn us(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}
