//! Unit tests of parsing, scopes and the rules about secrets.

use std::time::Duration;

use super::loader::Reading;
use super::*;

fn environment() -> Vec<(String, String)> {
    [("HOME", "/home/me"), ("TOKEN", "planted-secret-42"), ("PATH", "/bin")]
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect()
}

fn parse(json: &str) -> Config {
    let environment = environment();
    let mut config = Config::new();
    config.add_json(
        json,
        Scope::User,
        None,
        &Reading { environment: &environment, allowed: None, approvals: None, checking: false },
    );
    config
}

fn failure(json: &str) -> String {
    let config = parse(json);
    assert!(config.servers.is_empty(), "{json} should fail");
    config.failed[0].error.clone()
}

#[test]
fn parses_a_stdio_entry() {
    let config = parse(
        r#"{"mcpServers": {"demo": {"command": "demo-server", "args": ["-v", "${TOKEN}"], "env": {"A": "1", "N": 2},
            "timeout": 5, "startTimeout": 1.5, "description": "counts"}}}"#,
    );
    assert!(config.failed.is_empty(), "{:?}", config.failed);
    let server = &config.servers[0];
    assert_eq!(server.timeout, Duration::from_secs(5));
    assert_eq!(server.max_total_timeout, Duration::from_secs(50));
    assert_eq!(server.start_timeout, Duration::from_millis(1500));
    let TransportConfig::Stdio(stdio) = &server.transport else { panic!() };
    assert_eq!(stdio.args, ["-v", "planted-secret-42"]);
    assert_eq!(stdio.env["N"], "2");
    assert_eq!(server.secret_vars, ["TOKEN"]);
    assert_eq!(config.secret_vars(), ["TOKEN"]);
}

#[test]
fn parses_a_remote_entry() {
    let config = parse(
        r#"{"mcpServers": {"docs": {"url": "https://example.test/mcp", "type": "sse",
            "headers": {"X-Team": "a", "Authorization": "Bearer ${TOKEN}"}, "bearerTokenEnv": "TOKEN"}}}"#,
    );
    assert!(config.failed.is_empty(), "{:?}", config.failed);
    let TransportConfig::Http(remote) = &config.servers[0].transport else { panic!() };
    assert_eq!(remote.kind, HttpKind::Sse);
    assert_eq!(
        remote.headers[1],
        ("Authorization".to_string(), "Bearer planted-secret-42".to_string())
    );
    assert_eq!(config.servers[0].transport_name(), "sse");
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
}

#[test]
fn debug_output_never_shows_secret_values() {
    let config = parse(
        r#"{"mcpServers": {"a": {"command": "x", "env": {"K": "${TOKEN}"}},
            "b": {"url": "http://h/mcp", "headers": {"Authorization": "${TOKEN}"}}}}"#,
    );
    let debug = format!("{config:?}");
    assert!(!debug.contains("planted-secret-42"), "{debug}");
}

#[test]
fn unknown_field_names_the_closest_known_one() {
    assert!(failure(r#"{"mcpServers": {"x": {"comand": "a"}}}"#)
        .ends_with(r#"unknown field "comand" (did you mean "command"?)"#));
    assert!(failure(r#"{"mcpServers": {"x": {"command": "a", "evn": {}}}}"#)
        .ends_with(r#"unknown field "evn" (did you mean "env"?)"#));
}

#[test]
fn foreign_fields_warn_and_disabled_means_not_enabled() {
    let config =
        parse(r#"{"mcpServers": {"x": {"command": "a", "autoApprove": [], "disabled": true}}}"#);
    // `autoApprove` means nothing here; `disabled` is Claude Code's inverse of
    // `enabled`, taken without a word.
    assert_eq!(config.servers[0].warnings.len(), 1, "{:?}", config.servers[0].warnings);
    assert!(config.warnings.is_empty());
    assert!(!config.servers[0].enabled);
}

#[test]
fn literal_credentials_are_accepted_with_a_warning() {
    let config = parse(
        r#"{"mcpServers": {"x": {"command": "a", "env": {"API_KEY": "abc", "MODE": "fast"}},
            "y": {"url": "http://h/mcp", "headers": {"X-Api-Key": "abc", "Accept-Language": "en"}}}}"#,
    );
    assert_eq!(config.servers.len(), 2);
    // Each warning belongs to its entry, so a command shows only its servers'.
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
    assert_eq!(config.servers[0].warnings.len(), 1);
    assert!(config.servers[0].warnings[0].contains("env API_KEY holds a literal credential"));
    assert!(config.servers[1].warnings[0].contains("header X-Api-Key holds a literal credential"));
}

#[test]
fn bad_entries_do_not_stop_good_ones() {
    let config = parse(
        r#"{"mcpServers": {"bad name!": {"command": "a"}, "both": {"command": "a", "url": "http://x"},
            "go_od": {"command": "a"}, "types": {"command": 3}, "go-od": {"command": "b"},
            "unset": {"command": "${NOPE}"}, "kind": {"command": "a", "type": "sse"}, "far": {"url": "ftp://x"}}}"#,
    );
    assert_eq!(config.servers.len(), 1);
    let errors: Vec<&str> = config.failed.iter().map(|f| f.error.as_str()).collect();
    assert_eq!(errors.len(), 7, "{errors:?}");
    assert!(errors.iter().any(|e| e.contains("same name as \"go_od\"")));
    assert!(errors.iter().any(|e| e.contains("must be a string, not a number")));
    assert!(errors.iter().any(|e| e.contains("${NOPE}, which is not set")));
    assert!(errors.iter().any(|e| e.contains("both \"command\" and \"url\"")));
    assert!(errors.iter().any(|e| e.contains("does not go with \"command\"")));
    assert!(errors.iter().any(|e| e.contains("must start with http://")));
}

#[test]
fn syntax_errors_give_line_and_column() {
    let config = parse("{\n  \"mcpServers\": {,}\n}");
    assert!(config.failed[0].error.contains("line 2 column"), "{}", config.failed[0].error);
}

#[test]
fn names_follow_the_rules() {
    assert!(check_name("a-b_C9").is_ok());
    assert!(check_name("").is_err());
    assert!(check_name(&"x".repeat(33)).is_err());
    assert!(check_name("a.b").is_err());
}

#[test]
fn exposure_exact_names_win_then_the_first_pattern() {
    let config = parse(
        r#"{"mcpServers": {"x": {"command": "a", "exposure": "deferred",
            "toolExposure": {"read_*": "direct", "*_file": "hidden", "read_secret_file": "hidden"}}}}"#,
    );
    let server = &config.servers[0];
    assert_eq!(server.exposure_of("read_notes"), Exposure::Direct);
    assert_eq!(server.exposure_of("read_big_file"), Exposure::Direct);
    assert_eq!(server.exposure_of("write_file"), Exposure::Hidden);
    assert_eq!(server.exposure_of("read_secret_file"), Exposure::Hidden);
    assert_eq!(server.exposure_of("delete"), Exposure::Deferred);
    assert!(failure(r#"{"mcpServers": {"x": {"command": "a", "exposure": "loud"}}}"#)
        .contains("\"direct\""));
}

#[test]
fn glob_patterns() {
    assert!(glob_matches("*", "anything"));
    assert!(glob_matches("a*c", "abc"));
    assert!(glob_matches("a*b*c", "a-b-c"));
    assert!(!glob_matches("a*c", "ab"));
    assert!(!glob_matches("ab*ba", "aba"));
}

// A cold trial of the API: `Config::from_json` read VS Code's layout as no
// servers without a word, took 5000 as seconds silently, and said
// "invalid configuration: configuration: …".
#[test]
fn from_json_says_what_it_cannot_read_as_meant() {
    let config = Config::from_json(r#"{"servers": {"a": {"command": "x"}}}"#);
    assert!(config.servers.is_empty());
    assert!(
        config.warnings.iter().any(|w| w.contains("VS Code's layout")),
        "{:?}",
        config.warnings
    );

    let config = Config::from_json(r#"{"mcpServers": {"a": {"command": "x", "timeout": 5000}}}"#);
    let warnings = &config.servers[0].warnings;
    assert!(warnings.iter().any(|w| w.contains("not milliseconds")), "{warnings:?}");
    let config = Config::from_json(r#"{"mcpServers": {"a": {"command": "x", "timeout": 120}}}"#);
    assert!(config.servers[0].warnings.is_empty(), "{:?}", config.servers[0].warnings);

    let config = Config::from_json(r#"{"mcpServers": {"bad": {"command": 7}}}"#);
    let error = crate::Error::Config(config.failed[0].error.clone()).to_string();
    assert!(!error.contains("configuration: configuration"), "{error}");
}
