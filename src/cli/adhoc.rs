//! Ad-hoc servers: a URL, or a command line given with `--stdio` (split as
//! a shell splits words, never run by one), typed
//! where a configured server's name goes (`tether call URL TOOL`, `tether
//! tools --stdio "npx -y pkg"`). The user typed it, so it is trusted as
//! their own command line is; it is an entry made for this one run, named
//! after its package or host, and nothing is written.

use tether::{Config, HttpKind, ServerConfig};

pub(super) use super::args::STDIO;

/// True when `word` is an ad-hoc server, not a configured name.
pub(super) fn is_adhoc(word: &str) -> bool {
    word.starts_with(STDIO) || is_url(word)
}

fn is_url(word: &str) -> bool {
    let lower = word.to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

/// The entry `word` makes, under a name not taken by `config`.
pub(super) fn entry(word: &str, config: &Config) -> Result<ServerConfig, String> {
    let mut server = match word.strip_prefix(STDIO) {
        Some(line) => {
            let words = tether::for_cli::shell_words(line).ok_or_else(|| {
                format!(
                    "--stdio {line:?}: a quote does not close, or a shell operator (| & ; < > $( `) \
                     is there; tether runs no shell: give the command itself"
                )
            })?;
            let (program, args) = words
                .split_first()
                .ok_or("--stdio needs a command, like --stdio \"npx -y pkg\"")?;
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            ServerConfig::stdio(&command_name(&words), program, &args)
        }
        None => {
            let name = super::proxy::url_name(word)
                .ok_or_else(|| format!("{word:?} is not an http(s) URL with a host"))?;
            // Judged as a browser reads the URL (`http://a\\@127.0.0.1/` is
            // host `a`), as every URL tether signs in to is.
            if !tether::for_cli::is_https_or_loopback_http(word) {
                return Err(format!(
                    "{word} is plain http to another machine: what tether sends would cross \
                     the network readable; use https"
                ));
            }
            ServerConfig::http(&name, word, HttpKind::Auto)
        }
    };
    // A configured server of that name keeps it: this one takes another.
    let base = server.name.clone();
    let mut n = 1;
    while config.server(&server.name).is_some() {
        n += 1;
        server.name = format!("{base}-{n}");
    }
    Ok(server)
}

/// A name for a command line: its package for a runner (`npx -y
/// @scope/server-x@1` is `server-x`), else its program's file name.
fn command_name(words: &[String]) -> String {
    const RUNNERS: [&str; 9] =
        ["npx", "bunx", "pnpx", "uvx", "pipx", "node", "python", "python3", "deno"];
    let program = file_name(&words[0]);
    let picked = if RUNNERS.contains(&program) || program == "uv" {
        words[1..]
            .iter()
            .filter(|word| {
                !word.starts_with('-') && !matches!(word.as_str(), "run" | "tool" | "dlx")
            })
            .map(|word| package_name(word))
            .next()
            .unwrap_or_else(|| program.to_owned())
    } else {
        program.to_owned()
    };
    sanitized(&picked)
}

/// The name in a runner's first word: a package (`@scope/name@1.0`,
/// `pkg==1.0`) without its scope and version, or a script's file without
/// its extension (one called `index` or `main` by the folder it is in,
/// past `dist`, `build`, `src` and `lib`).
fn package_name(word: &str) -> String {
    let segments: Vec<&str> = word.split('/').filter(|segment| !segment.is_empty()).collect();
    let Some(last) = segments.last() else { return String::new() };
    // A version after the name: `name@1.0`, `name==1.0`.
    let last = match last.rfind('@') {
        Some(at) if at > 0 => &last[..at],
        _ => last,
    };
    let last = last.split("==").next().unwrap_or(last);
    let stem = last
        .strip_suffix(".js")
        .or_else(|| last.strip_suffix(".mjs"))
        .or_else(|| last.strip_suffix(".py"))
        .or_else(|| last.strip_suffix(".ts"))
        .unwrap_or(last);
    if !matches!(stem, "index" | "main" | "server" | "__main__" | "cli") || segments.len() < 2 {
        return stem.trim_start_matches('@').to_owned();
    }
    segments[..segments.len() - 1]
        .iter()
        .rev()
        .find(|folder| !matches!(**folder, "dist" | "build" | "src" | "lib" | "bin" | "out"))
        .map_or_else(|| stem.to_owned(), |folder| (*folder).to_owned())
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Letters, digits, `-` and `_`; anything else `-`.
fn sanitized(name: &str) -> String {
    let name: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' })
        .collect();
    let name = name.trim_matches('-');
    if name.is_empty() {
        "adhoc".to_owned()
    } else {
        name.to_ascii_lowercase()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(line: &str) -> Vec<String> {
        tether::for_cli::shell_words(line).unwrap()
    }

    #[test]
    fn command_lines_split_as_a_shell_splits_them() {
        assert_eq!(split("npx -y pkg"), ["npx", "-y", "pkg"]);
        assert_eq!(
            split(r#"node "my server.js" --name 'a b' c\ d"#),
            ["node", "my server.js", "--name", "a b", "c d"]
        );
        assert!(tether::for_cli::shell_words("x 'open").is_none());
        assert!(tether::for_cli::shell_words("x | y").is_none());
    }

    #[test]
    fn names_come_from_the_package_or_the_host() {
        let name = |line: &str| command_name(&split(line));
        assert_eq!(
            name("npx -y @modelcontextprotocol/server-everything@2026.8.31 stdio"),
            "server-everything"
        );
        assert_eq!(name("uvx mcp-server-fetch"), "mcp-server-fetch");
        assert_eq!(name("'/usr/local/bin/My Server' --flag"), "my-server");
        assert_eq!(name("python3 -m weather_server"), "weather_server");
        assert_eq!(
            name(
                "node /x/node_modules/@modelcontextprotocol/server-everything/dist/index.js stdio"
            ),
            "server-everything"
        );
        assert_eq!(name("uvx mcp-server-git==1.2"), "mcp-server-git");
        assert_eq!(name("node ./weather.js"), "weather");
        assert_eq!(
            super::super::proxy::url_name("https://mcp.example.com/mcp").unwrap(),
            "mcp-example-com"
        );
        assert_eq!(
            super::super::proxy::url_name("http://127.0.0.1:8080/mcp").unwrap(),
            "127-0-0-1-8080"
        );
        // An IPv6 address says so, its colons one dash each run.
        assert_eq!(super::super::proxy::url_name("http://[::1]:8080/mcp").unwrap(), "ipv6-1-8080");
        assert_eq!(
            super::super::proxy::url_name("https://user@[2001:db8::5]/").unwrap(),
            "ipv6-2001-db8-5"
        );
    }
}
