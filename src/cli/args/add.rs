//! `tether add`'s words: a name, then a URL or a command taken verbatim
//! (the server's own flags are not ours), and the options that fill in the
//! rest of the entry.

use lexopt::prelude::*;
use tether::Scope;

use super::scope::{scope_flag, scope_of};

/// What `tether add` was told.
#[derive(Debug, Default)]
pub(crate) struct AddArgs {
    pub(crate) name: Option<String>,
    pub(crate) scope: Option<Scope>,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) bearer_token_env: Option<String>,
    pub(crate) description: Option<String>,
    pub(crate) url: Option<String>,
    pub(crate) transport: Option<String>,
    pub(crate) command: Vec<String>,
    /// The whole entry as JSON (`add NAME '{…}'`, `add-json NAME '{…}'`).
    pub(crate) json: Option<String>,
    /// `--include-tools a,b` (the `tools` allowlist) and `--exclude-tools
    /// c,d` (hidden in `toolExposure`).
    pub(crate) include_tools: Vec<String>,
    pub(crate) exclude_tools: Vec<String>,
    /// `timeout`, `startTimeout` (seconds, as given) and `protocol`.
    pub(crate) timeout: Option<String>,
    pub(crate) start_timeout: Option<String>,
    pub(crate) protocol: Option<String>,
    /// `--keep-alive`: `"keepAlive": true`.
    pub(crate) keep_alive: bool,
}

/// `add-json NAME JSON [-s SCOPE]`: the entry as one JSON object.
pub(crate) fn parse_add_json(parser: &mut lexopt::Parser) -> Result<AddArgs, lexopt::Error> {
    let add = parse_add_options(parser)?;
    if add.name.is_none() || add.json.is_none() {
        return Err("usage: tether add-json NAME '{\"command\": \"…\", \"args\": […]}' \
                    [-s|--scope user|project]"
            .into());
    }
    Ok(add)
}

/// `add`'s options and positionals; `after_dashes` is what followed `--`
/// (the command, verbatim), if there was one.
pub(crate) fn parse_add(
    parser: &mut lexopt::Parser,
    after_dashes: Option<Vec<String>>,
) -> Result<AddArgs, lexopt::Error> {
    let mut add = parse_add_options(parser)?;
    if let Some(command) = after_dashes {
        if !add.command.is_empty() {
            // `add fx npx server -- --flag`: that `--` is the server's.
            add.command.push("--".into());
        }
        add.command.extend(command);
    }
    Ok(add)
}

fn parse_add_options(parser: &mut lexopt::Parser) -> Result<AddArgs, lexopt::Error> {
    let mut add = AddArgs::default();
    while let Some(arg) = parser.next()? {
        if let Some(flag) = scope_flag(&arg) {
            add.scope = Some(scope_of(flag, parser)?);
            continue;
        }
        match arg {
            Short('e') | Long("env") => {
                add.env.push(key_value(&parser.value()?.string()?, "--env")?)
            }
            Short('H') | Long("header") => {
                add.headers.push(key_value(&parser.value()?.string()?, "--header")?)
            }
            Long("bearer-token-env-var") => add.bearer_token_env = Some(parser.value()?.string()?),
            Long("description") => add.description = Some(parser.value()?.string()?),
            Long("keep-alive") => add.keep_alive = true,
            Long("timeout") => add.timeout = Some(parser.value()?.string()?),
            Long("start-timeout") => add.start_timeout = Some(parser.value()?.string()?),
            Long("protocol") => add.protocol = Some(parser.value()?.string()?),
            Long("include-tools") => add.include_tools.extend(names(parser)?),
            Long("exclude-tools") => add.exclude_tools.extend(names(parser)?),
            Long("url") if add.url.is_none() => add.url = Some(parser.value()?.string()?),
            Short('t') | Long("transport") => add.transport = Some(parser.value()?.string()?),
            Value(word) if add.name.is_none() => {
                let word = word.string()?;
                if word.contains("://") {
                    return Err(format!(
                        "{word:?} is a URL; give the server a name first: tether add NAME {word}"
                    )
                    .into());
                }
                add.name = Some(word);
            }
            // `add NAME URL`, as Claude Code and Gemini CLI take it; options may follow.
            Value(word)
                if add.url.is_none()
                    && add.command.is_empty()
                    && (word.to_str().is_some_and(|word| {
                        word.starts_with("http://") || word.starts_with("https://")
                    })) =>
            {
                add.url = Some(word.string()?);
            }
            // Not a URL tether can use, where a URL was clearly meant.
            // `add NAME '{"command": …}'`: the entry itself, as JSON.
            Value(word)
                if add.command.is_empty()
                    && add.url.is_none()
                    && add.json.is_none()
                    && word.to_string_lossy().trim_start().starts_with('{') =>
            {
                add.json = Some(word.string()?);
            }
            Value(word) if add.command.is_empty() && url_like(&word.to_string_lossy()) => {
                let word = word.to_string_lossy().into_owned();
                let hint = if word.contains("://") {
                    "only http:// and https:// URLs are supported".to_owned()
                } else {
                    format!("did you mean http://{word}?")
                };
                return Err(format!("{word:?} is not a server URL: {hint}").into());
            }
            Value(word) => {
                // The command: this word and everything after it, verbatim
                // (the server's own flags are not ours).
                add.command.push(word.string()?);
                for rest in parser.raw_args()? {
                    add.command.push(rest.string()?);
                }
                // tether's own options typed after the command are the
                // server's now: said, since that is seldom what was meant.
                let ours = [
                    "-s",
                    "--scope",
                    "-e",
                    "--env",
                    "-H",
                    "--header",
                    "--description",
                    "--timeout",
                    "--start-timeout",
                    "--keep-alive",
                    "--include-tools",
                    "--exclude-tools",
                    "-l",
                    "--local",
                    "--project",
                    "--user",
                ];
                let taken: Vec<&str> = add.command[1..]
                    .iter()
                    .map(String::as_str)
                    .filter(|word| ours.contains(&word.split('=').next().unwrap_or(word)))
                    .collect();
                if !taken.is_empty() {
                    eprintln!(
                        "warning: {} after the command {:?} went to the server as its arguments; \
                         put tether's options before the command, or -- before the command",
                        taken.join(" "),
                        add.command[0]
                    );
                }
            }
            _ => return Err(arg.unexpected()),
        }
    }
    Ok(add)
}

/// A comma-separated list of tool names (repeatable flags add up).
fn names(parser: &mut lexopt::Parser) -> Result<Vec<String>, lexopt::Error> {
    let list = parser.value()?.string()?;
    Ok(list.split(',').map(str::trim).filter(|name| !name.is_empty()).map(str::to_owned).collect())
}

/// True for words that look like a URL but are not http(s): `ftp://…`,
/// `localhost:3102/mcp`, `127.0.0.1:8080` (a program's path never has a
/// colon followed by a port).
fn url_like(word: &str) -> bool {
    if word.starts_with("http://") || word.starts_with("https://") {
        return false;
    }
    if word.contains("://") {
        return true;
    }
    match word.split_once(':') {
        Some((host, rest)) => {
            let port: String = rest.chars().take_while(char::is_ascii_digit).collect();
            !host.is_empty()
                && !host.contains('/')
                && !port.is_empty()
                && rest[port.len()..].chars().next().is_none_or(|c| c == '/')
        }
        None => false,
    }
}

/// `K=V` (or `K: V` for headers).
pub(crate) fn key_value(text: &str, option: &str) -> Result<(String, String), lexopt::Error> {
    // `Cookie: sid=abc` is a header with an `=` in its value: split at
    // whichever separator comes first.
    let split = match (text.find('='), text.find(':')) {
        (Some(equals), Some(colon)) if colon < equals => text.split_once(':'),
        (Some(_), _) => text.split_once('='),
        (None, _) => text.split_once(':'),
    };
    match split {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_owned(), value.trim_start().to_owned()))
        }
        _ => Err(format!("{option} takes KEY=VALUE or 'KEY: VALUE', not {text:?}").into()),
    }
}
