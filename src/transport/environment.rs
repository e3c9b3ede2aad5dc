//! The environment a stdio server starts with.
//!
//! A server does not inherit tether's environment: API keys of the host
//! would otherwise reach every server. It gets a base set that programs need
//! to run at all (paths, locale, proxies, CA bundles), then `envFrom` (named
//! host variables), then `env`. `inheritEnv: true` hands over everything.

use std::collections::BTreeMap;

use super::command::StdioCommand;
use crate::config::StdioConfig;

/// Variables every server gets from tether's environment.
const BASE_VARIABLES: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "TMPDIR",
    "TZ",
    "LANG",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
];

/// Prefixes of variables every server gets.
const BASE_PREFIXES: &[&str] = &["LC_", "XDG_"];

/// True for a variable of the base set.
fn is_base_variable(name: &str) -> bool {
    BASE_VARIABLES.contains(&name) || BASE_PREFIXES.iter().any(|prefix| name.starts_with(prefix))
}

/// Resolves a stdio entry against `host_env` (tether's environment).
///
/// A host variable named by `envFrom` that is not set is left out, with a
/// warning naming it (never its value).
pub(crate) fn stdio_command(
    server: &str,
    stdio: &StdioConfig,
    host_env: &[(String, String)],
) -> StdioCommand {
    let mut env: BTreeMap<String, String> = host_env
        .iter()
        .filter(|(name, _)| stdio.inherit_env || is_base_variable(name))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    for (server_var, host_var) in &stdio.env_from {
        match host_env.iter().find(|(name, _)| name == host_var) {
            Some((_, value)) => {
                env.insert(server_var.clone(), value.clone());
            }
            None => log::warn!(
                "{server}: envFrom names {host_var}, which is not set; {server_var} is left out"
            ),
        }
    }
    env.extend(stdio.env.iter().map(|(name, value)| (name.clone(), value.clone())));
    StdioCommand {
        program: stdio.command.clone(),
        args: stdio.args.clone(),
        env: env.into_iter().collect(),
        cwd: stdio.cwd.clone(),
        shutdown_grace: stdio.shutdown_timeout,
    }
}

impl StdioCommand {
    /// A command run with the base set of tether's environment (paths,
    /// locale, proxies, CA bundles) and nothing else of it: what an entry
    /// without `env` or `envFrom` gets. Add variables to `env` as needed.
    pub fn new(program: &str, args: &[&str]) -> StdioCommand {
        let stdio = StdioConfig {
            command: program.to_owned(),
            args: args.iter().map(|arg| arg.to_string()).collect(),
            ..StdioConfig::default()
        };
        stdio_command(program, &stdio, &crate::config::host_environment())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> Vec<(String, String)> {
        [("PATH", "/bin"), ("LC_ALL", "C"), ("SECRET", "s3cr3t"), ("TOKEN", "t")]
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn base_set_then_env_from_then_env() {
        let stdio = StdioConfig {
            command: "x".into(),
            env_from: [
                ("API_TOKEN".to_string(), "TOKEN".to_string()),
                ("GONE".into(), "UNSET".into()),
            ]
            .into(),
            env: [("PATH".to_string(), "/override".to_string())].into(),
            ..StdioConfig::default()
        };
        let command = stdio_command("s", &stdio, &host());
        let names: Vec<&str> = command.env.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["API_TOKEN", "LC_ALL", "PATH"]);
        assert!(command.env.contains(&("PATH".into(), "/override".into())));
        assert!(command.env.contains(&("API_TOKEN".into(), "t".into())));
    }

    #[test]
    fn inherit_env_hands_over_everything() {
        let stdio =
            StdioConfig { command: "x".into(), inherit_env: true, ..StdioConfig::default() };
        assert_eq!(stdio_command("s", &stdio, &host()).env.len(), 4);
    }
}
