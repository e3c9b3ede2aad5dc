//! `bench kept N TETHER <server-cmd> [args…]`: a one-shot `tether call` (a
//! whole process, timed from outside) of the server's `echo` tool, N times
//! through a kept-alive session against N times started afresh, in one
//! run. Use a server slow to start (`misbehave --start-delay 1000`): the
//! session's first call pays the start once, each later call none. The
//! runtime folder is one of the run's own, and its session is ended at the
//! end.

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::scripts::percentile;

pub(crate) fn kept(n: usize, args: &[String]) {
    let (tether, server) = args.split_first().expect("bench kept N TETHER SERVER...");
    let base = std::env::temp_dir().join(format!("tether-bench-kept-{}", std::process::id()));
    let runtime = base.join("run");
    std::fs::create_dir_all(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    let entry = |keep: bool| {
        let mut entry = json!({"command": server[0], "args": &server[1..]});
        if keep {
            entry["keepAlive"] = json!(60);
        }
        entry
    };
    let servers = json!({"mcpServers": {"kept": entry(true), "fresh": entry(false)}});
    std::fs::write(base.join("mcp.json"), servers.to_string()).unwrap();
    let call = |name: &str, i: usize| {
        let started = Instant::now();
        let output = Command::new(tether)
            .arg("--config-dir")
            .arg(&base)
            .args(["call", name, "echo", &format!("text=hello-{i}")])
            .env("XDG_RUNTIME_DIR", &runtime)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let took = started.elapsed();
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success() && text.trim() == format!("hello-{i}"), "{output:?}");
        took
    };
    let first = call("kept", 0);
    let mut kept = Vec::with_capacity(n);
    let mut fresh = Vec::with_capacity(n);
    for i in 1..=n {
        kept.push(call("kept", i));
        fresh.push(call("fresh", i));
    }
    let _ = Command::new(tether)
        .args(["sessions", "end", "--all"])
        .env("XDG_RUNTIME_DIR", &runtime)
        .output();
    let _ = std::fs::remove_dir_all(&base);
    let ms = |duration: Duration| duration.as_secs_f64() * 1e3;
    println!("one-shot `tether call`, whole process, {n} each:");
    println!("  the session's first (starts it):  {:8.1} ms", ms(first));
    println!(
        "  through the session:  p50 {:6.1} ms  p90 {:6.1} ms  max {:6.1} ms",
        ms(percentile(&kept, 0.5)),
        ms(percentile(&kept, 0.9)),
        ms(*kept.iter().max().unwrap())
    );
    println!(
        "  started afresh:       p50 {:6.1} ms  p90 {:6.1} ms  max {:6.1} ms",
        ms(percentile(&fresh, 0.5)),
        ms(percentile(&fresh, 0.9)),
        ms(*fresh.iter().max().unwrap())
    );
    println!(
        "{}",
        json!({
            "mode": "kept", "n": n,
            "first_ms": ms(first),
            "kept_p50_ms": ms(percentile(&kept, 0.5)), "kept_p90_ms": ms(percentile(&kept, 0.9)),
            "fresh_p50_ms": ms(percentile(&fresh, 0.5)),
        })
    );
}
