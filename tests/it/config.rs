//! Configuration through the binary: scopes, trust, expansion, secrets, and
//! the commands that rewrite the files.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use tether::{Config, ConfigLoader, Scope, ServerConfig};

use crate::support::{
    fixture, misbehave_entry, run_command, stderr_of, stdout_of, tether_in, Tag, TempDir,
};

const WITHIN: Duration = Duration::from_secs(20);

/// A config folder and a project folder, each with an optional file.
struct Setup {
    config: TempDir,
    project: TempDir,
}

impl Setup {
    fn new(user: Option<Value>, project: Option<Value>) -> Setup {
        let setup = Setup { config: TempDir::new(), project: TempDir::new() };
        if let Some(servers) = user {
            setup.config.write("mcp.json", &json!({"mcpServers": servers}).to_string());
        }
        if let Some(servers) = project {
            setup.project.write(".mcp.json", &json!({"mcpServers": servers}).to_string());
        }
        setup
    }

    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
        let mut command = tether_in(self.config.path(), self.project.path());
        command.args(args);
        for (name, value) in env {
            command.env(name, value);
        }
        let (output, _) = run_command(command, None, WITHIN);
        (output.status.code().unwrap_or(-1), stdout_of(&output), stderr_of(&output))
    }

    fn user_file(&self) -> Value {
        serde_json::from_str(&fs::read_to_string(self.config.path().join("mcp.json")).unwrap())
            .unwrap()
    }

    fn project_file(&self) -> Value {
        serde_json::from_str(&fs::read_to_string(self.project.path().join(".mcp.json")).unwrap())
            .unwrap()
    }
}

fn list_json(setup: &Setup, env: &[(&str, &str)]) -> Vec<Value> {
    let (_, out, err) = setup.run(&["list", "--json"], env);
    serde_json::from_str(&out).unwrap_or_else(|_| panic!("not JSON: {out}\n{err}"))
}

fn state_of(statuses: &[Value], name: &str) -> String {
    statuses
        .iter()
        .find(|s| s["name"] == name)
        .map(|s| s["state"].as_str().unwrap().to_owned())
        .unwrap_or_default()
}

fn env_seen_by(
    setup: &Setup,
    server: &str,
    env: &[(&str, &str)],
) -> serde_json::Map<String, Value> {
    let (code, out, err) = setup.run(&["call", server, "env"], env);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

#[test]
fn an_untrusted_project_starts_nothing_until_trusted() {
    let tag = Tag::new();
    let setup = Setup::new(
        Some(json!({"mine": misbehave_entry(&tag, &[])})),
        Some(json!({"theirs": misbehave_entry(&tag, &["--odd-names"])})),
    );
    // An untrusted server is not connected: 1, whether asked for by name or
    // listed with the others (one answer for one state).
    let (code, out, _) = setup.run(&["list"], &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("theirs  untrusted"), "{out}");
    assert!(out.contains("tether trust"), "{out}");
    let (code, _, _) = setup.run(&["list", "theirs"], &[]);
    assert_eq!(code, 1);
    let (code, _, _) = setup.run(&["list", "--scope", "project"], &[]);
    assert_eq!(code, 1);
    // …and cannot be called.
    let (code, _, err) = setup.run(&["call", "theirs", "echo"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("not trusted") && err.contains("tether trust"), "{err}");
    assert_eq!(tag.live_processes().len(), 0);

    // Without a terminal to ask on, trust needs --yes: nothing is trusted.
    let (code, _, err) = setup.run(&["trust"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--yes"), "{err}");
    assert_eq!(state_of(&list_json(&setup, &[]), "theirs"), "untrusted");
    // trust prints exactly what would run, then records the canonical path.
    let (code, out, _) = setup.run(&["trust", "--yes"], &[]);
    assert_eq!(code, 0);
    assert!(out.contains("Check with: tether --config-dir "), "{out}");
    assert!(
        out.contains(&format!(
            "theirs  {} --tag {} --odd-names",
            fixture("misbehave").display(),
            tag.0
        )),
        "{out}"
    );
    let statuses = list_json(&setup, &[]);
    assert_eq!(state_of(&statuses, "theirs"), "connected");
    assert_eq!(statuses.iter().find(|s| s["name"] == "theirs").unwrap()["scope"], "project");

    let (code, out, _) = setup.run(&["untrust"], &[]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(state_of(&list_json(&setup, &[]), "theirs"), "untrusted");
    // The variable trusts for one run.
    assert_eq!(
        state_of(&list_json(&setup, &[("TETHER_TRUST_PROJECT", "1")]), "theirs"),
        "connected"
    );
    tag.assert_gone();
}

// Issue 12 (item 7): trust is given to the entries that were reviewed. An
// entry added or changed later waits for approval; the others keep working.
#[test]
fn trust_covers_the_entries_reviewed_not_what_is_added_later() {
    let tag = Tag::new();
    let setup = Setup::new(None, Some(json!({"theirs": misbehave_entry(&tag, &[])})));
    let (code, _, err) = setup.run(&["trust", "--yes"], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(state_of(&list_json(&setup, &[]), "theirs"), "connected");

    // Reformatting the file changes no entry: still approved.
    let pretty = serde_json::to_string_pretty(&setup.project_file()).unwrap();
    setup.project.write(".mcp.json", &pretty);
    assert_eq!(state_of(&list_json(&setup, &[]), "theirs"), "connected");

    // A new entry that would plant a file does not run.
    let planted = setup.project.path().join("PWNED");
    let mut file = setup.project_file();
    file["mcpServers"]["added"] =
        json!({"command": "sh", "args": ["-c", format!("echo x > {}", planted.display())]});
    // And a changed entry waits too.
    file["mcpServers"]["theirs"]["args"].as_array_mut().unwrap().push(json!("--odd-names"));
    setup.project.write(".mcp.json", &file.to_string());
    let statuses = list_json(&setup, &[]);
    assert_eq!(state_of(&statuses, "added"), "untrusted");
    assert_eq!(state_of(&statuses, "theirs"), "untrusted");
    let by_name = |name: &str| statuses.iter().find(|s| s["name"] == name).unwrap().clone();
    assert_eq!(by_name("added")["unapproved"], "added");
    assert_eq!(by_name("theirs")["unapproved"], "changed");
    assert!(by_name("theirs")["hint"].as_str().unwrap().contains("changed since"), "{statuses:?}");
    let (_, out, _) = setup.run(&["list"], &[]);
    assert!(out.contains("this entry was added since the project was trusted"), "{out}");
    assert!(!planted.exists(), "an entry nobody approved ran");
    let (code, _, err) = setup.run(&["call", "theirs", "echo"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("changed since its project was trusted"), "{err}");

    // Approving again covers both.
    let (code, out, _) = setup.run(&["trust", "--yes"], &[]);
    assert_eq!(code, 0);
    assert!(out.contains("added") && out.contains("echo x >"), "{out}");
    let statuses = list_json(&setup, &[]);
    assert_eq!(state_of(&statuses, "theirs"), "connected");
    assert!(planted.exists(), "the approved entry ran");

    // The older whole-folder record grants nothing.
    let canonical = fs::canonicalize(setup.project.path()).unwrap();
    setup.config.write(
        "trusted-projects.json",
        &json!({"trusted": [canonical.display().to_string()]}).to_string(),
    );
    assert_eq!(state_of(&list_json(&setup, &[]), "theirs"), "untrusted");
    tag.assert_gone();
}

#[test]
fn project_entries_replace_user_entries_and_overrides_change_only_what_they_name() {
    let tag = Tag::new();
    let mut project_entry = misbehave_entry(&tag, &[]);
    project_entry["env"] = json!({"WHO": "project"});
    let mut user_entry = misbehave_entry(&tag, &[]);
    user_entry["env"] = json!({"WHO": "user"});
    let setup = Setup::new(
        Some(
            json!({"same": user_entry, "flip": misbehave_entry(&tag, &[]), "solo": misbehave_entry(&tag, &[])}),
        ),
        Some(json!({"same": project_entry, "flip": {"enabled": false}})),
    );
    let trusted = [("TETHER_TRUST_PROJECT", "1")];
    assert_eq!(env_seen_by(&setup, "same", &trusted)["WHO"], "project");
    let statuses = list_json(&setup, &trusted);
    assert_eq!(state_of(&statuses, "flip"), "disabled");
    assert_eq!(state_of(&statuses, "solo"), "connected");
    // The override kept the user entry's command: it is still a user entry, disabled.
    assert_eq!(statuses.iter().find(|s| s["name"] == "flip").unwrap()["scope"], "user");
    tag.assert_gone();
}

#[test]
fn tether_mcp_0_reads_nothing() {
    let setup = Setup::new(Some(json!({"broken": {"comand": "x"}})), None);
    let (code, out, err) = setup.run(&["list"], &[("TETHER_MCP", "0")]);
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    assert!(
        ConfigLoader::new()
            .config_dir(setup.config.path())
            .environment(vec![("TETHER_MCP".into(), "0".into())])
            .load()
            .off
    );
}

#[test]
fn variables_and_commands_expand_into_the_server_environment() {
    let tag = Tag::new();
    let mut entry = misbehave_entry(&tag, &[]);
    entry["env"] = json!({
        "FROM_VAR": "${TETHER_TEST_VALUE}",
        "WITH_DEFAULT": "${TETHER_TEST_UNSET:-fallback}",
        "DOLLARS": "$$literal",
        "FROM_COMMAND": "!echo from-a-command",
    });
    entry["envFrom"] = json!({"RENAMED": "TETHER_TEST_VALUE"});
    let setup = Setup::new(Some(json!({"fx": entry})), None);
    let seen = env_seen_by(&setup, "fx", &[("TETHER_TEST_VALUE", "v1"), ("UNRELATED_SECRET", "x")]);
    assert_eq!(seen["FROM_VAR"], "v1");
    assert_eq!(seen["WITH_DEFAULT"], "fallback");
    assert_eq!(seen["DOLLARS"], "$literal");
    assert_eq!(seen["FROM_COMMAND"], "from-a-command");
    assert_eq!(seen["RENAMED"], "v1");
    assert!(!seen.contains_key("UNRELATED_SECRET"), "the host environment leaked: {seen:?}");
    assert!(!seen.contains_key("TETHER_TEST_VALUE"));
    tag.assert_gone();
}

#[test]
fn bad_entries_get_messages_that_name_file_server_and_field() {
    let tag = Tag::new();
    let setup = Setup::new(
        Some(json!({
            "good": misbehave_entry(&tag, &[]),
            "typo": {"comand": "x"},
            "unset": {"command": "${TETHER_TEST_NOT_SET}"},
            "failing": {"command": "x", "env": {"T": "!false"}},
            "wrong-type": {"command": "x", "args": "not a list"},
            "dup_name": {"command": "x"},
            "dup-name": {"command": "y"},
        })),
        None,
    );
    let (code, out, _) = setup.run(&["list"], &[]);
    assert_eq!(code, 1, "{out}");
    let file = setup.config.path().join("mcp.json").display().to_string();
    assert!(
        out.lines().any(|line| line.starts_with("good ") && line.contains(" connected ")),
        "{out}"
    );
    for expected in [
        format!("{file}: server \"typo\": unknown field \"comand\" (did you mean \"command\"?)"),
        format!("{file}: server \"unset\": field \"command\" uses ${{TETHER_TEST_NOT_SET}}, which is not set"),
        "field \"env\" T: `!false` failed".to_owned(),
        "field \"args\" must be a list of strings, not a string".to_owned(),
        "server \"dup-name\" is the same name as \"dup_name\"".to_owned(),
    ] {
        assert!(out.contains(&expected), "missing {expected:?} in:\n{out}");
    }
    tag.assert_gone();
}

#[test]
fn a_broken_file_is_a_failed_entry_with_line_and_column_and_the_project_still_works() {
    let tag = Tag::new();
    let setup = Setup::new(None, Some(json!({"proj": misbehave_entry(&tag, &[])})));
    setup
        .config
        .write("mcp.json", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n  }\n}");
    let statuses = list_json(&setup, &[("TETHER_TRUST_PROJECT", "1")]);
    assert_eq!(state_of(&statuses, "proj"), "connected");
    let broken = statuses.iter().find(|s| s["name"] == "mcp.json").unwrap();
    assert!(broken["error"].as_str().unwrap().contains("line 3 column"), "{broken}");
    tag.assert_gone();
}

#[test]
fn project_files_may_not_name_host_variables_or_run_commands() {
    let tag = Tag::new();
    let mut named = misbehave_entry(&tag, &[]);
    named["env"] = json!({"K": "${TETHER_TEST_VALUE}"});
    let mut from = misbehave_entry(&tag, &[]);
    from["envFrom"] = json!({"K": "TETHER_TEST_VALUE"});
    let mut command = misbehave_entry(&tag, &[]);
    command["env"] = json!({"K": "!echo pwned"});
    let mut inherit = misbehave_entry(&tag, &[]);
    inherit["inheritEnv"] = json!(true);
    let setup = Setup::new(
        None,
        Some(json!({"named": named, "from": from, "command": command, "inherit": inherit})),
    );
    let env = [("TETHER_TRUST_PROJECT", "1"), ("TETHER_TEST_VALUE", "v")];
    let statuses = list_json(&setup, &env);
    for name in ["named", "from", "command", "inherit"] {
        assert_eq!(state_of(&statuses, name), "failed", "{name}: {statuses:?}");
    }
    // TETHER_MCP_ENV lets a project name a variable, and only that one.
    let listed = [
        ("TETHER_TRUST_PROJECT", "1"),
        ("TETHER_TEST_VALUE", "v"),
        ("TETHER_MCP_ENV", "TETHER_TEST_VALUE"),
    ];
    let statuses = list_json(&setup, &listed);
    assert_eq!(state_of(&statuses, "named"), "connected");
    assert_eq!(state_of(&statuses, "from"), "connected");
    assert_eq!(state_of(&statuses, "command"), "failed");
    tag.assert_gone();
}

#[test]
fn the_allow_list_binds_the_user_file_too() {
    let tag = Tag::new();
    let mut entry = misbehave_entry(&tag, &[]);
    entry["env"] = json!({"K": "${TETHER_TEST_VALUE}"});
    let setup = Setup::new(Some(json!({"fx": entry})), None);
    let statuses =
        list_json(&setup, &[("TETHER_TEST_VALUE", "v"), ("TETHER_MCP_ENV", "SOMETHING_ELSE")]);
    assert_eq!(state_of(&statuses, "fx"), "failed");
    let error = statuses[0]["error"].as_str().unwrap();
    assert!(error.contains("TETHER_TEST_VALUE, which TETHER_MCP_ENV does not list"), "{error}");
}

#[test]
fn secrets_never_appear_in_output_logs_or_errors() {
    let tag = Tag::new();
    let secret = "planted-secret-9f8e7d";
    let mut good = misbehave_entry(&tag, &[]);
    good["env"] =
        json!({"API_TOKEN": "${TETHER_TEST_SECRET}", "OTHER": "!echo planted-secret-9f8e7d"});
    let mut failing = misbehave_entry(&tag, &["--exit-during-initialize"]);
    failing["env"] = json!({"API_TOKEN": "${TETHER_TEST_SECRET}"});
    let unset =
        json!({"command": "x", "env": {"A": "${TETHER_TEST_SECRET} ${TETHER_TEST_MISSING}"}});
    let setup = Setup::new(Some(json!({"good": good, "failing": failing, "unset": unset})), None);
    let env = [("TETHER_TEST_SECRET", secret), ("RUST_LOG", "trace")];
    let mut everything = String::new();
    for args in [
        &["list"][..],
        &["list", "--json"],
        &["tools", "--json"],
        &["call", "good", "echo", r#"{"text":"hi"}"#],
        &["call", "failing", "echo"],
        &["call", "unset", "echo"],
        &["call", "good", "nosuch"],
    ] {
        let (_, out, err) = setup.run(args, &env);
        everything.push_str(&out);
        everything.push_str(&err);
    }
    assert!(everything.contains("TRACE") || everything.contains("trace"), "trace logging was on");
    assert!(!everything.contains(secret), "the secret leaked");
    tag.assert_gone();
}

#[test]
fn add_writes_both_forms_and_refuses_duplicates() {
    let setup = Setup::new(None, None);
    let (code, out, err) = setup.run(
        &[
            "add",
            "local-one",
            "--env",
            "MODE=fast",
            "--description",
            "A test server.",
            "--",
            "node",
            "server.js",
            "--port",
            "3",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    // The hint names the same files (the test passes --config-dir), so
    // that running it shows this entry.
    let hint = format!("Check it with: tether --config-dir {} ", setup.config.path().display());
    assert!(
        out.contains("Added stdio server \"local-one\" to")
            && out.contains(&hint)
            && out.contains(" list local-one\n"),
        "{out}"
    );
    let (code, _, err) = setup.run(
        &[
            "add",
            "remote-one",
            "--url",
            "https://example.test/mcp",
            "--transport",
            "sse",
            "--header",
            "X-Team=a",
            "--header",
            "Authorization: Bearer ${TOKEN}",
            "--bearer-token-env-var",
            "MY_TOKEN",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        setup.user_file(),
        json!({"mcpServers": {
            "local-one": {"command": "node", "args": ["server.js", "--port", "3"], "env": {"MODE": "fast"},
                          "description": "A test server."},
            "remote-one": {"type": "sse", "url": "https://example.test/mcp",
                           "headers": {"X-Team": "a", "Authorization": "Bearer ${TOKEN}"}, "bearerTokenEnv": "MY_TOKEN"}
        }})
    );
    let mode =
        fs::metadata(setup.config.path().join("mcp.json")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let (code, _, err) = setup.run(&["add", "local_one", "--", "x"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("already has a server named \"local-one\""), "{err}");
    let (code, _, err) = setup.run(&["add", "bad.name", "--", "x"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("bad.name"), "{err}");
    let (code, _, err) = setup.run(&["add", "both", "--url", "http://x/mcp", "--", "x"], &[]);
    assert_eq!(code, 2, "{err}");
    // --project writes the project file and says the project needs trust.
    let (code, out, _) = setup.run(&["add", "--project", "proj", "--", "x"], &[]);
    assert_eq!(code, 0);
    assert!(out.contains("tether trust"), "{out}");
    assert_eq!(setup.project_file(), json!({"mcpServers": {"proj": {"command": "x"}}}));
}

#[test]
fn edits_keep_unrelated_keys_entries_and_order() {
    let setup = Setup::new(None, None);
    let original = r#"{
  "someOtherTool": {"keep": [1, 2, 3]},
  "mcpServers": {
    "zeta": {"command": "z", "autoApprove": ["x"], "env": {"A": "${A}"}},
    "alpha": {"command": "a"}
  },
  "trailing": true
}"#;
    setup.config.write("mcp.json", original);
    assert_eq!(setup.run(&["disable", "zeta"], &[]).0, 0);
    assert_eq!(setup.run(&["add", "beta", "--", "b"], &[]).0, 0);
    let (code, out, _) = setup.run(&["remove", "alpha"], &[]);
    assert_eq!(code, 0);
    // The hint to check runs on the same files (a trial: it dropped them).
    assert!(out.contains("Check with: tether --config-dir "), "{out}");
    let text = fs::read_to_string(setup.config.path().join("mcp.json")).unwrap();
    let value: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        value,
        json!({"someOtherTool": {"keep": [1, 2, 3]},
               "mcpServers": {"zeta": {"command": "z", "autoApprove": ["x"], "env": {"A": "${A}"}, "enabled": false},
                              "beta": {"command": "b"}},
               "trailing": true})
    );
    // Key order as it was: the other tool's key first, ours in the middle.
    assert!(text.find("someOtherTool").unwrap() < text.find("mcpServers").unwrap());
    assert!(text.find("\"zeta\"").unwrap() < text.find("\"beta\"").unwrap());
    assert!(text.find("mcpServers").unwrap() < text.find("trailing").unwrap());
    assert_eq!(setup.run(&["enable", "zeta"], &[]).0, 0);
    assert_eq!(setup.user_file()["mcpServers"]["zeta"]["enabled"], true);
}

#[test]
fn a_broken_file_is_never_rewritten() {
    let setup = Setup::new(None, None);
    let broken = "{\"mcpServers\": {\"a\": }";
    setup.config.write("mcp.json", broken);
    let (code, _, err) = setup.run(&["add", "b", "--", "x"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("line 1 column") && err.contains("fix it by hand"), "{err}");
    assert_eq!(fs::read_to_string(setup.config.path().join("mcp.json")).unwrap(), broken);
}

#[test]
fn remove_asks_which_scope_and_refuses_without_a_terminal() {
    let setup = Setup::new(
        Some(json!({"both": {"command": "u"}})),
        Some(json!({"both": {"command": "p"}})),
    );
    let (code, _, err) = setup.run(&["remove", "both"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("pass -s project or -s user"), "{err}");
    assert_eq!(setup.run(&["remove", "both", "--project"], &[]).0, 0);
    assert_eq!(setup.project_file(), json!({"mcpServers": {}}));
    assert_eq!(setup.user_file()["mcpServers"]["both"]["command"], "u");
    assert_eq!(setup.run(&["remove", "both"], &[]).0, 0);
    let (code, _, err) = setup.run(&["remove", "both"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("no server named \"both\""), "{err}");
}

#[test]
fn concurrent_adds_from_two_processes_lose_nothing() {
    let setup = Setup::new(None, None);
    let mut children = Vec::new();
    for process in 0..2 {
        for index in 0..12 {
            let mut command = tether_in(setup.config.path(), setup.project.path());
            command.args(["add", &format!("p{process}-s{index}"), "--", "cmd"]);
            command.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped());
            children.push(command.spawn().unwrap());
        }
    }
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    }
    let servers = setup.user_file()["mcpServers"].as_object().unwrap().len();
    assert_eq!(servers, 24);
}

#[cfg(feature = "desktop")]
#[test]
fn import_translates_other_clients_files_and_reports_what_it_skipped() {
    let configs = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/configs");
    let setup = Setup::new(Some(json!({"github": {"command": "already-here"}})), None);
    let run_import = |file: &str| setup.run(&["import", configs.join(file).to_str().unwrap()], &[]);

    let (code, out, err) = run_import("claude_desktop_config.json");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Imported 2 servers") && out.contains("filesystem, sqlite"), "{out}");
    assert!(out.contains("Skipped weather.service: the name"), "{out}");
    assert!(out.contains("Skipped github: a server of that name is already configured"), "{out}");
    assert!(out.contains("dropped \"autoApprove\""), "{out}");

    let (code, out, _) = run_import("cursor_mcp.json");
    assert_eq!(code, 0);
    assert!(out.contains("Imported 3 servers"), "{out}");
    let (code, out, _) = run_import("vscode_mcp.json");
    assert_eq!(code, 0);
    assert!(out.contains("Imported 2 servers") && out.contains("memory, remote-tools"), "{out}");
    assert!(out.contains("Skipped perplexity: it uses VS Code ${input:"), "{out}");
    assert!(out.contains("Skipped workspace-files: it uses ${workspaceFolder}"), "{out}");
    let (code, out, _) = run_import("claude_code_mcp.json");
    assert_eq!(code, 0);
    assert!(out.contains("Imported 3 servers"), "{out}");
    // Issue 12 (item 6): a literal credential is imported with a warning,
    // and an entry that would not load is not imported at all.
    let other = TempDir::new();
    let literal = other.write(
        "mcp.json",
        &json!({"mcpServers": {
            "lit": {"url": "https://example.com/mcp", "headers": {"X-Api-Key": "sk-literal"}},
            "broken": {"url": "localhost:3000/mcp"},
        }})
        .to_string(),
    );
    let lines = other.write(
        "lines.json",
        &json!({"mcpServers": {
            "line": {"command": "bash -c 'serve --port 3'"},
            "piped": {"command": "serve | tee log"},
        }})
        .to_string(),
    );
    let (code, out, err) = setup.run(&["import", lines.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Imported 1 server") && out.contains("line"), "{out}");
    assert!(out.contains("split the command line"), "{out}");
    assert!(out.contains("Skipped piped:") && out.contains("shell line"), "{out}");
    let line = &setup.user_file()["mcpServers"]["line"];
    assert_eq!(
        (line["command"].clone(), line["args"].clone()),
        (json!("bash"), json!(["-c", "serve --port 3"]))
    );
    let (code, out, err) = setup.run(&["import", literal.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Imported 1 server") && out.contains("lit"), "{out}");
    assert!(out.contains("Skipped broken:") && out.contains("http://"), "{out}");
    assert!(err.contains("literal credential") && err.contains("${VAR}"), "{err}");

    let file = setup.user_file();
    let servers = &file["mcpServers"];
    assert_eq!(servers["sqlite"]["enabled"], false);
    assert!(servers["sqlite"].get("autoApprove").is_none());
    assert_eq!(servers["memory"]["env"]["TOKEN"], "${MEMORY_TOKEN}");
    assert_eq!(servers["memory"]["env"]["MEMORY_FILE"], "${HOME}/memory.json");
    assert_eq!(servers["remote-tools"]["type"], "http");
    assert_eq!(servers["events"]["type"], "sse");
    // Everything imported parses as configuration, given the variables it names.
    let environment: Vec<(String, String)> =
        ["HOME", "GITHUB_TOKEN", "LINEAR_TOKEN", "MEMORY_TOKEN", "API_KEY"]
            .iter()
            .map(|name| (name.to_string(), "x".to_string()))
            .collect();
    let config =
        ConfigLoader::new().config_dir(setup.config.path()).environment(environment).load();
    assert!(config.failed.is_empty(), "{:?}", config.failed);
    assert_eq!(config.servers.len(), 13);
}

#[test]
fn host_servers_are_overridden_by_file_entries_of_the_same_name() {
    let setup = Setup::new(Some(json!({"shared": {"command": "from-file"}})), None);
    let config = ConfigLoader::new()
        .config_dir(setup.config.path())
        .host_server(ServerConfig::stdio("shared", "from-code", &[]))
        .host_server(ServerConfig::stdio("only-code", "from-code", &[]))
        .load();
    let scopes: Vec<(&str, Scope)> =
        config.servers.iter().map(|s| (s.name.as_str(), s.scope)).collect();
    assert_eq!(scopes, [("only-code", Scope::Host), ("shared", Scope::User)]);
    let Some(tether::TransportConfig::Stdio(stdio)) = config.server("shared").map(|s| &s.transport)
    else {
        panic!()
    };
    assert_eq!(stdio.command, "from-file");
    assert!(Config::from_json("{").failed[0].error.contains("line 1"));
}

/// Runs tether on a pseudo-terminal (util-linux `script`) with typed answers.
fn on_terminal(setup: &Setup, args: &str, answers: &str) -> (i32, String) {
    assert!(
        Path::new("/usr/bin/script").exists(),
        "this test needs `script` from util-linux (apt-get install util-linux)"
    );
    let command_line = format!(
        "{} --config-dir {} --project {} {args}",
        crate::support::tether_bin(),
        setup.config.path().display(),
        setup.project.path().display()
    );
    let mut command = std::process::Command::new("script");
    command.args(["-qec", &command_line, "/dev/null"]);
    let (output, _) = run_command(command, Some(answers), WITHIN);
    (output.status.code().unwrap_or(-1), stdout_of(&output))
}

#[test]
fn add_on_a_terminal_asks_for_each_setting() {
    let setup = Setup::new(None, None);
    let (code, out) = on_terminal(
        &setup,
        "add",
        "typed\nstdio\nnode \"my server.js\" --flag\nMODE=fast\n\nTyped in.\n",
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("Server name") && out.contains("Added stdio server \"typed\""), "{out}");
    assert_eq!(
        setup.user_file()["mcpServers"]["typed"],
        json!({"command": "node", "args": ["my server.js", "--flag"], "env": {"MODE": "fast"}, "description": "Typed in."})
    );
    let (code, out) = on_terminal(
        &setup,
        "add",
        "web\nhttp\nhttps://example.test/mcp\nAuthorization: Bearer ${WEB_TOKEN}\n\n\n",
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("X-API-Key"), "the header question offers the usual names: {out}");
    assert_eq!(
        setup.user_file()["mcpServers"]["web"],
        json!({"type": "http", "url": "https://example.test/mcp", "headers": {"Authorization": "Bearer ${WEB_TOKEN}"}})
    );
}

#[test]
fn remove_on_a_terminal_asks_which_file() {
    let setup = Setup::new(
        Some(json!({"both": {"command": "u"}})),
        Some(json!({"both": {"command": "p"}})),
    );
    let (code, out) = on_terminal(&setup, "remove both", "p\n");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("(p)roject, (u)ser"), "{out}");
    assert_eq!(setup.project_file(), json!({"mcpServers": {}}));
    assert_eq!(setup.user_file()["mcpServers"]["both"]["command"], "u");
}

#[test]
fn headers_with_equals_in_their_value_split_at_the_colon() {
    let setup = Setup::new(None, None);
    let (code, _, err) = setup.run(
        &["add", "web", "--url", "https://example.test/mcp", "--header", "Cookie: sid=abc=="],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(setup.user_file()["mcpServers"]["web"]["headers"], json!({"Cookie": "sid=abc=="}));
}

#[cfg(feature = "desktop")]
#[test]
fn import_keeps_other_clients_text_as_text() {
    let setup = Setup::new(None, None);
    let source = setup.project.write(
        "other.json",
        &json!({"mcpServers": {
            "pw": {"command": "x", "cwd": "sub", "env": {"PASSWORD": "pa$$w0rd", "TOKEN": "${MY_TOKEN}"}},
            "bang": {"command": "x", "env": {"GREETING": "!shout"}},
        }})
        .to_string(),
    );
    let (code, out, err) = setup.run(&["import", source.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Skipped bang: a value in \"env\" starts with '!'"), "{out}");
    assert!(out.contains("pw: reads the host variables MY_TOKEN"), "{out}");
    let entry = &setup.user_file()["mcpServers"]["pw"];
    assert_eq!(entry["env"]["PASSWORD"], "pa$$$$w0rd", "a literal $ is written $$");
    assert_eq!(entry["cwd"], setup.project.path().join("sub").display().to_string());
    // And it expands back to the text it was.
    let config = ConfigLoader::new()
        .config_dir(setup.config.path())
        .environment(vec![("MY_TOKEN".into(), "t".into())])
        .load();
    let Some(tether::TransportConfig::Stdio(stdio)) = config.server("pw").map(|s| &s.transport)
    else {
        panic!()
    };
    assert_eq!(stdio.env["PASSWORD"], "pa$$w0rd");
}

#[test]
fn expose_sets_exposure_where_the_server_is_defined_or_overrides_it_in_the_project() {
    let setup =
        Setup::new(Some(json!({"fx": {"command": "x", "toolExposure": {"keep": "direct"}}})), None);
    assert_eq!(setup.run(&["expose", "fx", "deferred"], &[]).0, 0);
    assert_eq!(setup.run(&["expose", "fx", "hidden", "--tool", "delete_*"], &[]).0, 0);
    let entry = &setup.user_file()["mcpServers"]["fx"];
    assert_eq!(entry["exposure"], "deferred");
    assert_eq!(entry["toolExposure"], json!({"keep": "direct", "delete_*": "hidden"}));
    // -l writes an override-only entry in the project file.
    assert_eq!(setup.run(&["expose", "fx", "hidden", "--project"], &[]).0, 0);
    assert_eq!(setup.project_file(), json!({"mcpServers": {"fx": {"exposure": "hidden"}}}));
    let config = ConfigLoader::new()
        .config_dir(setup.config.path())
        .project_dir(setup.project.path())
        .environment(vec![("TETHER_TRUST_PROJECT".into(), "1".into())])
        .load();
    assert_eq!(config.server("fx").unwrap().exposure, tether::Exposure::Hidden);
    let (code, _, err) = setup.run(&["expose", "fx", "loud"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("not an exposure"), "{err}");
}

// Issue 12 (item 12): what tether creates is the user's alone, and a
// temporary left by a writer killed mid-write is cleaned on the next write.
#[test]
fn tether_creates_private_folders_and_logs_and_cleans_stale_temporaries() {
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    let tag = Tag::new();
    let root = TempDir::new();
    let config = root.path().join("fresh/tether");
    let stale = config.join(".mcp.json.tmp-999999999-0");
    let misbehave = fixture("misbehave").display().to_string();
    let mut command = std::process::Command::new(crate::support::tether_bin());
    command
        .arg("--config-dir")
        .arg(&config)
        .args(["add", "fx", "--", &misbehave, "--tag", &tag.0, "--notify", "3"]);
    let (output, _) = run_command(command, None, Duration::from_secs(20));
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(mode(&config), 0o700);
    assert_eq!(mode(&root.path().join("fresh")), 0o700);
    std::fs::write(&stale, "half a file").unwrap();
    let mut command = std::process::Command::new(crate::support::tether_bin());
    command.arg("--config-dir").arg(&config).args(["disable", "fx"]);
    run_command(command, None, Duration::from_secs(20));
    assert!(!stale.exists(), "the stale temporary was left");
    let mut command = std::process::Command::new(crate::support::tether_bin());
    command.arg("--config-dir").arg(&config).args(["enable", "fx"]);
    run_command(command, None, Duration::from_secs(20));
    let mut command = std::process::Command::new(crate::support::tether_bin());
    command.arg("--config-dir").arg(&config).args(["call", "fx", "echo", r#"{"text": "x"}"#]);
    let (output, _) = run_command(command, None, Duration::from_secs(20));
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(mode(&config.join("mcp.log")), 0o600);
    tag.assert_gone();
}

#[test]
fn add_sets_timeouts_and_the_protocol_and_refuses_bad_ones() {
    let setup = Setup::new(None, None);
    let (code, out, err) = setup.run(
        &[
            "add",
            "slowpoke",
            "--timeout",
            "90",
            "--start-timeout",
            "7.5",
            "--protocol",
            "legacy",
            "--",
            "node",
            "server.js",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Added stdio server"), "{out}");
    let entry = &setup.user_file()["mcpServers"]["slowpoke"];
    assert_eq!(entry["timeout"], 90.0);
    assert_eq!(entry["startTimeout"], 7.5);
    assert_eq!(entry["protocol"], "legacy");
    for bad in [["--timeout", "0"], ["--start-timeout", "soon"], ["--protocol", "2026"]] {
        let mut args = vec!["add", "other"];
        args.extend(bad);
        args.extend(["--", "node", "server.js"]);
        let (code, _, err) = setup.run(&args, &[]);
        assert_eq!(code, 2, "{bad:?}: {err}");
        assert!(
            err.contains(bad[0].trim_start_matches('-')) || err.contains(bad[0]),
            "{bad:?}: {err}"
        );
    }
    assert!(setup.user_file()["mcpServers"].get("other").is_none(), "nothing bad is written");
    // A program that is not there is written (it may be installed later), with a warning.
    let (code, _, err) = setup.run(&["add", "ghost", "--", "/nonexistent/server"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("/nonexistent/server is not found"), "{err}");
}

#[test]
fn the_protocol_field_is_checked_and_era_points_to_it() {
    let setup = Setup::new(
        Some(json!({
            "pinned": {"command": "srv", "protocol": "legacy"},
            "sse-modern": {"url": "http://127.0.0.1:9/sse", "type": "sse", "protocol": "modern"},
            "era-field": {"command": "srv", "era": "legacy"},
            "bad-word": {"command": "srv", "protocol": "2026-07-28"},
        })),
        None,
    );
    let config = ConfigLoader::new().config_dir(setup.config.path()).load();
    assert_eq!(config.server("pinned").unwrap().protocol, tether::EraChoice::Legacy);
    let failed = |name: &str| {
        config.failed.iter().find(|failed| failed.name == name).map(|f| f.error.clone())
    };
    let sse = failed("sse-modern").unwrap();
    assert!(sse.contains("handshake era"), "{sse}");
    let era = failed("era-field").unwrap();
    assert!(era.contains("did you mean \"protocol\""), "{era}");
    let word = failed("bad-word").unwrap();
    assert!(word.contains("\"auto\", \"legacy\" or \"modern\""), "{word}");
}

// Issue 26 (item 4): the other clients' files, each read as its client
// means it: Codex's TOML, Gemini's httpUrl/url/millisecond timeout and tool
// lists, ~/.claude.json's local servers named (not dropped), Zed, OpenCode
// and Windsurf.
#[cfg(feature = "desktop")]
#[test]
fn import_reads_codex_gemini_claude_code_zed_opencode_and_windsurf() {
    let configs = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/configs");
    let setup = Setup::new(None, None);
    let run_import = |file: &str| setup.run(&["import", configs.join(file).to_str().unwrap()], &[]);

    let (code, out, err) = run_import("codex_config.toml");
    if !cfg!(feature = "toml") {
        // The smallest build reads no TOML, and says so.
        assert_eq!(code, 2);
        assert!(err.contains("without reading TOML"), "{err}");
        return;
    }
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Imported 2 servers") && out.contains("docs, linear"), "{out}");
    let user = setup.user_file();
    let docs = &user["mcpServers"]["docs"];
    assert_eq!(docs["env"], json!({"DOCS_LEVEL": "2"}));
    // Passed on when set, as Codex does.
    assert_eq!(docs["envFrom"], json!({"DOCS_API_KEY": "DOCS_API_KEY"}));
    assert_eq!(docs["startTimeout"], json!(20.0));
    assert_eq!(docs["timeout"], json!(90.0));
    assert_eq!(docs["tools"], json!(["search", "fetch"]));
    let linear = &user["mcpServers"]["linear"];
    assert_eq!(linear["bearerTokenEnv"], "LINEAR_TOKEN");
    assert_eq!(linear["headers"], json!({"X-Team": "${LINEAR_TEAM}"}));
    assert_eq!(linear["toolExposure"], json!({"delete_issue": "hidden"}));
    assert_eq!(linear["enabled"], false);

    let setup = Setup::new(None, None);
    let run_import = |file: &str| setup.run(&["import", configs.join(file).to_str().unwrap()], &[]);
    let (code, out, err) = run_import("gemini_settings.json");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Imported 3 servers"), "{out}");
    let user = setup.user_file();
    assert_eq!(user["mcpServers"]["stream"]["type"], "http");
    assert_eq!(user["mcpServers"]["stream"]["timeout"], json!(30.0), "30000 ms is 30 s");
    assert_eq!(user["mcpServers"]["stream"]["tools"], json!(["search"]));
    assert_eq!(user["mcpServers"]["events"]["type"], "sse");
    assert_eq!(user["mcpServers"]["events"]["toolExposure"], json!({"purge": "hidden"}));

    let (code, out, _) = run_import("claude_user.json");
    assert_eq!(code, 0);
    assert!(out.contains("Imported 1 server") && out.contains("everywhere"), "{out}");
    assert!(
        out.contains("Skipped notes-db: Claude Code keeps it for the folder /home/ada/notes"),
        "{out}"
    );

    let (code, out, err) = run_import("zed_settings.json");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("postgres, newer"), "{out}");
    assert_eq!(setup.user_file()["mcpServers"]["postgres"]["command"], "postgres-mcp");
    let (code, out, _) = run_import("opencode.json");
    assert_eq!(code, 0);
    assert!(out.contains("fs, remote"), "{out}");
    assert_eq!(setup.user_file()["mcpServers"]["fs"]["args"][0], "-y");
    assert_eq!(setup.user_file()["mcpServers"]["remote"]["enabled"], false);
    let (code, out, _) = run_import("windsurf_mcp_config.json");
    assert_eq!(code, 0);
    assert_eq!(
        setup.user_file()["mcpServers"]["surf"]["url"],
        "https://surf.example.com/mcp",
        "{out}"
    );
}

// Issue 26 (item 4): `tether import` with no file names the files other
// clients keep where they usually are (here under a HOME made for the
// test); without a terminal to ask on, it lists them and exits 2.
#[cfg(feature = "desktop")]
#[test]
fn import_without_a_file_offers_what_it_finds() {
    let configs = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/configs");
    let home = TempDir::new();
    fs::create_dir_all(home.path().join(".codex")).unwrap();
    fs::copy(configs.join("codex_config.toml"), home.path().join(".codex/config.toml")).unwrap();
    fs::create_dir_all(home.path().join(".gemini")).unwrap();
    fs::copy(configs.join("gemini_settings.json"), home.path().join(".gemini/settings.json"))
        .unwrap();
    let setup = Setup::new(None, None);
    let home_env = home.path().to_str().unwrap();
    let (code, _, err) = setup
        .run(&["import"], &[("HOME", home_env), ("XDG_CONFIG_HOME", home_env), ("CODEX_HOME", "")]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("Codex:") && err.contains(".codex/config.toml"), "{err}");
    assert!(err.contains("Gemini CLI:") && err.contains(".gemini/settings.json"), "{err}");
    let empty = TempDir::new();
    let (code, _, err) = setup.run(&["import"], &[("HOME", empty.path().to_str().unwrap())]);
    assert_eq!(code, 2);
    assert!(err.contains("tether import FILE"), "{err}");
}

// Issue 26 (item 3): the local scope, as Claude Code means it. `-s local`
// writes the user's own file for this project (never the project's
// .mcp.json), its entry wins over the project's and the user's of the same
// name, it needs no trust, another project does not see it, and remove
// asks which file when several have the server.
#[test]
fn the_local_scope_is_private_to_one_project_and_wins() {
    let setup = Setup::new(
        Some(json!({"shared": {"command": "user-version"}})),
        Some(json!({"shared": {"command": "project-version"}})),
    );
    let (code, out, err) = setup.run(&["add", "-s", "local", "shared", "--", "local-version"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("alone"), "{out}");
    let (code, _, err) = setup.run(&["add", "--local", "mine", "--", "my-tool", "--flag"], &[]);
    assert_eq!(code, 0, "{err}");
    // The project's file is as it was.
    assert_eq!(
        setup.project_file(),
        json!({"mcpServers": {"shared": {"command": "project-version"}}})
    );
    let local_dir = setup.config.path().join("local");
    let files: Vec<_> = fs::read_dir(&local_dir)
        .unwrap()
        .flatten()
        .filter(|file| file.file_name().to_string_lossy().ends_with(".json"))
        .collect();
    assert_eq!(files.len(), 1, "one file for this project");
    let kept: Value = serde_json::from_str(&fs::read_to_string(files[0].path()).unwrap()).unwrap();
    assert_eq!(kept["mcpServers"]["mine"]["args"], json!(["--flag"]));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(files[0].metadata().unwrap().permissions().mode() & 0o777, 0o600);

    let (_, out, _) = setup.run(&["get", "shared", "--json"], &[]);
    let got: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(got["scope"], "local", "{got}");
    assert_eq!(got["entry"]["command"], "local-version", "local wins: {got}");
    // Its own entries start without trust; the project's would need it.
    let (_, out, _) = setup.run(&["list", "--no-connect", "--json"], &[]);
    let rows: Value = serde_json::from_str(&out).unwrap();
    let mine = rows.as_array().unwrap().iter().find(|row| row["name"] == "mine").unwrap();
    assert_eq!((mine["scope"].clone(), mine["state"].clone()), (json!("local"), json!("enabled")));

    // Another project does not see it.
    let elsewhere = TempDir::new();
    let mut command = crate::support::tether_in(setup.config.path(), elsewhere.path());
    command.args(["get", "mine"]);
    let (output, _) = run_command(command, None, WITHIN);
    assert_eq!(output.status.code(), Some(2), "{}", stderr_of(&output));

    // In three files: remove needs to be told which.
    let (code, _, err) = setup.run(&["remove", "shared"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("pass -s local or -s project or -s user"), "{err}");
    assert_eq!(setup.run(&["remove", "shared", "-l"], &[]).0, 0);
    // The project's entry is not approved here: the user's is in force.
    let (_, out, _) = setup.run(&["get", "shared", "--json"], &[]);
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["scope"], "user");
}

// The smallest build leaves `tether import` and `tether completion` out,
// and says so.
#[cfg(not(feature = "desktop"))]
#[test]
fn a_build_without_import_says_so() {
    let setup = Setup::new(None, None);
    let (code, _, err) = setup.run(&["import", "/nonexistent.json"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("built without import"), "{err}");
    let (code, _, err) = setup.run(&["completion", "bash"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("\"desktop\" cargo feature"), "{err}");
}
