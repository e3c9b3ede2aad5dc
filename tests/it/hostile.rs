//! Hostile files, servers and neighbours, round two (issue 27): each test
//! here failed before its fix.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{
    config_dir, misbehave_entry, run_measured, tether_bin, tether_in, Tag, TempDir,
};

/// The memory any attack here may cost tether.
const MEMORY_LIMIT_KIB: i64 = 64 * 1024;

fn mkfifo(path: &Path) {
    let name = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo reads a NUL-terminated path that lives for the call.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
}

// Item 1: a cloned repository's `.mcp.json` that is a link to a device, a
// FIFO, or merely huge is refused before any trust check, at once and in
// little memory; `tether list` says why and goes on. Before: /dev/zero grew
// to 8.5 GB in 15 s, a FIFO hung for ever, 200 MB peaked at 1.37 GB.
#[test]
fn a_project_file_that_is_a_device_a_fifo_or_huge_is_refused_in_little_memory() {
    let config = TempDir::new();
    type Make = fn(&Path);
    let cases: [(&str, Make); 4] = [
        ("/dev/zero", |path| std::os::unix::fs::symlink("/dev/zero", path).unwrap()),
        ("/dev/urandom", |path| std::os::unix::fs::symlink("/dev/urandom", path).unwrap()),
        ("a FIFO", mkfifo),
        ("200 MB", |path| {
            let file = std::fs::File::create(path).unwrap();
            file.set_len(200 * 1024 * 1024).unwrap();
        }),
    ];
    for (what, make) in cases {
        let project = TempDir::new();
        make(&project.path().join(".mcp.json"));
        let mut command = tether_in(config.path(), project.path());
        command.arg("list");
        let seen = run_measured(command, Duration::from_secs(10));
        assert!(seen.code == 0 || seen.code == 1, "{what}: exit {} {}", seen.code, seen.stderr);
        let said = format!("{}{}", seen.stdout, seen.stderr);
        assert!(said.contains(".mcp.json"), "{what}: {said}");
        assert!(
            said.contains("not a regular file") || said.contains("larger than the 1 MiB"),
            "{what}: {said}"
        );
        assert!(seen.peak_kib < MEMORY_LIMIT_KIB, "{what}: peak {} KiB", seen.peak_kib);
        assert!(seen.took < Duration::from_secs(3), "{what}: took {:?}", seen.took);
        eprintln!("{what}: refused in {:?}, peak {} KiB", seen.took, seen.peak_kib);
    }
}

// Item 1: the user's own files and the stores are read the same way: a
// user `mcp.json` that is a FIFO, and a token store that is a link to
// /dev/zero, cost nothing.
#[test]
fn the_user_file_and_the_stores_are_never_read_past_their_limit() {
    let config = TempDir::new();
    mkfifo(&config.path().join("mcp.json"));
    std::os::unix::fs::symlink("/dev/zero", config.path().join("mcp-auth.json")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", config.path().join("trusted-projects.json")).unwrap();
    let project = TempDir::new();
    let mut command = tether_in(config.path(), project.path());
    command.arg("list");
    let seen = run_measured(command, Duration::from_secs(10));
    let said = format!("{}{}", seen.stdout, seen.stderr);
    assert!(said.contains("not a regular file"), "{said}");
    assert!(seen.peak_kib < MEMORY_LIMIT_KIB, "peak {} KiB", seen.peak_kib);
    assert!(seen.took < Duration::from_secs(3), "took {:?}", seen.took);
    // An import of a device is refused the same way.
    if cfg!(feature = "desktop") {
        let mut command = tether_in(config.path(), project.path());
        command.args(["import", "/dev/zero"]);
        let seen = run_measured(command, Duration::from_secs(10));
        assert_ne!(seen.code, 0);
        assert!(seen.stderr.contains("not a regular file"), "{}", seen.stderr);
        assert!(seen.peak_kib < MEMORY_LIMIT_KIB, "peak {} KiB", seen.peak_kib);
    }
}

// Item 8: a planted project file of 40,000 entries (0.9 MB, under the
// size limit) is loaded in linear time and capped at 1,000 entries, said;
// and one entry of 400,000 arguments stays in little memory.
// Before: 200,000 entries took `list` past 60 s, about quadratically.
#[test]
fn a_project_file_of_many_entries_is_capped_and_loads_quickly() {
    let config = TempDir::new();
    let project = TempDir::new();
    let entries: Vec<String> =
        (0..40_000).map(|n| format!("\"s{n}\":{{\"command\":\"x\"}}")).collect();
    let text = format!("{{\"mcpServers\":{{{}}}}}", entries.join(","));
    std::fs::write(project.path().join(".mcp.json"), text).unwrap();
    let mut command = tether_in(config.path(), project.path());
    command.args(["list", "--json"]);
    let seen = run_measured(command, Duration::from_secs(30));
    assert!(seen.took < Duration::from_secs(5), "took {:?}", seen.took);
    assert!(
        seen.stderr.contains("has 40000 servers; tether reads the first 1000"),
        "{}",
        &seen.stderr[..seen.stderr.len().min(2000)]
    );
    let listed: serde_json::Value = serde_json::from_str(&seen.stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1000);
    assert!(seen.peak_kib < MEMORY_LIMIT_KIB, "peak {} KiB", seen.peak_kib);
    eprintln!("40,000 entries: {:?}, peak {} KiB", seen.took, seen.peak_kib);

    let args = vec!["0"; 400_000].join(",");
    let text = format!("{{\"mcpServers\":{{\"s\":{{\"command\":\"x\",\"args\":[{args}]}}}}}}");
    std::fs::write(project.path().join(".mcp.json"), text).unwrap();
    let mut command = tether_in(config.path(), project.path());
    command.args(["list", "--json"]);
    let seen = run_measured(command, Duration::from_secs(30));
    assert!(seen.peak_kib < MEMORY_LIMIT_KIB, "peak {} KiB", seen.peak_kib);
    eprintln!("400,000 arguments: {:?}, peak {} KiB", seen.took, seen.peak_kib);
}

/// `tether call fx sleep` on a server started with `flags`, once `count`
/// processes carry the tag.
fn slow_call_with_tree(tag: &Tag, flags: &[&str], count: usize) -> (Child, TempDir) {
    let dir = config_dir(json!({"fx": misbehave_entry(tag, flags)}));
    let child = Command::new(tether_bin())
        .arg("--config-dir")
        .arg(dir.path())
        .args(["call", "fx", "sleep", r#"{"ms": 3000}"#])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    tag.wait_for_processes(count, Duration::from_secs(20));
    (child, dir)
}

// Item 3: killed outright, tether still takes a server's whole tree with it:
// here a chain of 120 processes, each in a session of its own, each
// ignoring SIGTERM and starting its child again as soon as it dies. Before:
// 93 of 121 survived.
#[test]
fn sigkill_of_tether_ends_a_chain_of_120_detached_processes_within_a_second() {
    let tag = Tag::new();
    let flags = ["--ignore-eof", "--ignore-sigterm", "--setsid-chain", "120"];
    let (mut child, _dir) = slow_call_with_tree(&tag, &flags, 121);
    let killed = Instant::now();
    child.kill().unwrap();
    child.wait().unwrap();
    tag.assert_gone_within(Duration::from_secs(1));
    eprintln!("121 processes gone {:?} after tether was killed", killed.elapsed());
}

// Item 3: on a normal exit (the call ends, the server leaves on its stdin's
// end), what the server left behind ends too: a chain of 120 that ignores
// SIGTERM. Before: 92 of 121 survived.
#[test]
fn a_normal_exit_ends_the_chain_a_server_left_behind() {
    let tag = Tag::new();
    let flags = ["--ignore-sigterm", "--setsid-chain", "120"];
    let (mut child, _dir) = slow_call_with_tree(&tag, &flags, 121);
    let status = crate::support::wait_exit(&mut child, Duration::from_secs(20));
    assert_eq!(status, Some(0));
    let exited = Instant::now();
    tag.assert_gone_within(Duration::from_secs(1));
    eprintln!("the chain was gone {:?} after tether exited", exited.elapsed());
}

// Item 3: a `!command` that hits its 10 s timeout ends with the process it
// started in a session of its own. Before: that process lived on.
#[test]
fn a_timed_out_helper_leaves_no_detached_child() {
    let tag = Tag::new();
    let helper = format!(
        "!{} --tag {} --setsid-grandchild --ignore-eof",
        crate::support::fixture("misbehave").display(),
        tag.0
    );
    let dir = config_dir(json!({
        "web": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": helper}},
    }));
    let mut command = Command::new(tether_bin());
    command.arg("--config-dir").arg(dir.path()).arg("list");
    let seen = run_measured(command, Duration::from_secs(30));
    assert!(seen.stdout.contains("did not finish within 10 s"), "{}", seen.stdout);
    tag.assert_gone_within(Duration::from_secs(1));
}

// Item 2: a server whose pages never end, each of 5,000 new tools: the list
// is cut at 10,000 tools, said, in little memory. Before: 100k tools a page
// drove `tether list` to 3.05 GB in 10.9 s.
#[test]
fn endless_pages_of_many_tools_are_cut_and_said() {
    let tag = Tag::new();
    let flags = ["--endless-cursor", "new", "--page-size", "5000"];
    let dir = config_dir(json!({"fx": misbehave_entry(&tag, &flags)}));
    let mut command = Command::new(tether_bin());
    command.arg("--config-dir").arg(dir.path()).args(["tools", "--json"]);
    let seen = run_measured(command, Duration::from_secs(60));
    assert_eq!(seen.code, 0, "{}", seen.stderr);
    assert!(seen.stderr.contains("tools/list: the list is cut at 10000 items"), "{}", seen.stderr);
    let tools: Vec<serde_json::Value> = serde_json::from_str(&seen.stdout).unwrap();
    assert_eq!(tools.len(), 10_000);
    assert!(seen.peak_kib < MEMORY_LIMIT_KIB, "peak {} KiB", seen.peak_kib);
    eprintln!("endless pages: cut in {:?}, peak {} KiB", seen.took, seen.peak_kib);
    tag.assert_gone();
}

// Item 2: one page of 100,000 tools (a 10 MB frame) is not parsed whole:
// the list fails with the reason, in little memory. Before: `tools --json`
// peaked at 650 MB on such a page.
#[test]
fn one_huge_page_is_refused_before_it_is_parsed() {
    let tag = Tag::new();
    let dir = config_dir(json!({"fx": misbehave_entry(&tag, &["--many-tools", "100000"])}));
    let mut command = Command::new(tether_bin());
    command.arg("--config-dir").arg(dir.path()).args(["tools", "--json"]);
    let seen = run_measured(command, Duration::from_secs(60));
    let said = format!("{}{}", seen.stdout, seen.stderr);
    assert!(said.contains("more than 500000 JSON values"), "{said}");
    assert!(seen.peak_kib < MEMORY_LIMIT_KIB, "peak {} KiB", seen.peak_kib);
    eprintln!("one huge page: refused in {:?}, peak {} KiB", seen.took, seen.peak_kib);
    tag.assert_gone();
}

// Item 9: bidirectional controls and zero-width characters a server sends
// never reach the terminal raw: not in `tools --json`, not in `logs`.
#[test]
fn bidi_and_zero_width_characters_are_escaped_in_json_and_logs() {
    let tag = Tag::new();
    let dir = config_dir(json!({"fx": misbehave_entry(&tag, &["--hostile-text"])}));
    let (output, _) =
        crate::support::run_tether(dir.path(), &["tools", "fx", "--json"], Duration::from_secs(20));
    let out = crate::support::stdout_of(&output);
    assert!(out.contains("evil\\u202egpj.exe\\u200b"), "{out}");
    assert!(!out.contains(['\u{202e}', '\u{200b}', '\u{1b}', '\u{9b}']), "{out:?}");
    serde_json::from_str::<serde_json::Value>(&out).expect("still JSON");
    // The server's stderr line went to the log; `logs` shows it escaped.
    let (output, _) =
        crate::support::run_tether(dir.path(), &["logs", "fx"], Duration::from_secs(20));
    let out = crate::support::stdout_of(&output);
    assert!(out.contains("evil\\u{202e}gpj.exe\\u{200b}"), "{out}");
    assert!(!out.contains(['\u{202e}', '\u{200b}', '\u{1b}', '\u{9b}']), "{out:?}");
    tag.assert_gone();
}

// Item 10: the trust review shows every invisible character of a project's
// command (U+034F in `np͏x`), and a literal `\e[2K` is told apart from an
// escaped real escape sequence.
#[test]
fn the_trust_review_shows_invisible_characters_unambiguously() {
    let config = TempDir::new();
    let project = TempDir::new();
    project.write(
        ".mcp.json",
        &json!({"mcpServers": {"ev": {
            "command": "np\u{34f}x",
            "args": ["\\e[2K", "\u{1b}[2K", "a\u{3164}b"],
        }}})
        .to_string(),
    );
    let mut command = tether_in(config.path(), project.path());
    command.arg("trust");
    let (output, _) = crate::support::run_command(command, None, Duration::from_secs(20));
    let out = crate::support::stdout_of(&output);
    assert!(out.contains("np\\u{34f}x"), "{out}");
    assert!(out.contains("a\\u{3164}b"), "{out}");
    assert!(out.contains("\\\\e[2K"), "the literal backslash is doubled: {out}");
    assert!(out.contains("'\\e[2K'"), "the real escape: {out}");
    assert!(!out.contains(['\u{34f}', '\u{3164}', '\u{1b}']), "{out:?}");
}

// Item 12: a dangling link planted where a lock file goes is refused, never
// followed: no file appears where it points. Before: `.mcp-auth.json.lock`
// linked to a missing file created that file.
#[test]
fn a_planted_lock_file_link_is_never_followed() {
    let config = TempDir::new();
    let planted = TempDir::new();
    std::fs::write(
        config.path().join("mcp-auth.json"),
        r#"{"servers": {"web": {"url": "http://127.0.0.1:9/mcp", "accessToken": "t"}}}"#,
    )
    .unwrap();
    let target = planted.path().join("created-by-tether");
    std::os::unix::fs::symlink(&target, config.path().join(".mcp-auth.json.lock")).unwrap();
    let (output, _) =
        crate::support::run_tether(config.path(), &["logout", "web"], Duration::from_secs(20));
    assert_ne!(output.status.code(), Some(0));
    assert!(!target.exists(), "the link was followed");
    // The user file's lock the same way (`tether add`).
    let user_target = planted.path().join("created-by-add");
    std::os::unix::fs::symlink(&user_target, config.path().join(".mcp.json.lock")).unwrap();
    let (output, _) = crate::support::run_tether(
        config.path(),
        &["add", "demo", "--", "/bin/true"],
        Duration::from_secs(20),
    );
    assert_ne!(output.status.code(), Some(0));
    assert!(
        crate::support::stderr_of(&output).contains("cannot open the lock file"),
        "{}",
        crate::support::stderr_of(&output)
    );
    assert!(!user_target.exists(), "the link was followed");
}
