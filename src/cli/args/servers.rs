//! The commands that talk to servers: `list`, `tools`, `resources`,
//! `prompts`, `read`, `prompt`, `call`, `run`, `complete`, `watch`; and
//! how their words name a server (`--stdio CMD`, `mcp__SERVER__TOOL`) and
//! give arguments (JSON, or `key=value` words).

use std::path::PathBuf;
use std::time::Duration;

use lexopt::prelude::*;

use super::scope::{scope_flag, scope_of};
use super::{number, Command, STDIO};

/// `watch SERVER URI [--count N] [--read] [--json]`.
pub(super) fn parse_watch(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
    let (mut words, mut count, mut read, mut json) = (Vec::new(), None, false, false);
    while let Some(arg) = parser.next()? {
        match arg {
            Long("count") => {
                let at_least_one: std::num::NonZeroUsize =
                    number(parser, "--count", "a number of updates, 1 or more")?;
                count = Some(at_least_one.get());
            }
            Long("read") => read = true,
            Long("json") => json = true,
            Long("stdio") if words.is_empty() => words.push(stdio_server(parser)?),
            Value(word) if words.len() < 2 => words.push(word.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    let mut words = words.into_iter();
    match (words.next(), words.next()) {
        (Some(server), Some(uri)) => Ok(Command::Watch { server, uri, count, read, json }),
        _ => Err("usage: tether watch SERVER URI [--count N] [--read] [--json]".into()),
    }
}

/// `complete SERVER (--prompt NAME | --resource TEMPLATE) ARG [VALUE]
/// [--context K=V]... [--json]`.
pub(super) fn parse_complete(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
    const USAGE: &str = "usage: tether complete SERVER (--prompt NAME | --resource TEMPLATE) ARG \
                         [VALUE] [--context K=V]... [--json]";
    let (mut words, mut reference, mut context, mut json) = (Vec::new(), None, Vec::new(), false);
    while let Some(arg) = parser.next()? {
        match arg {
            Long("prompt" | "resource") if reference.is_some() => {
                return Err("complete takes one of --prompt NAME or --resource TEMPLATE".into())
            }
            Long("prompt") => {
                reference = Some(tether::CompletionRef::Prompt(parser.value()?.string()?));
            }
            Long("resource") => {
                let template = parser.value()?.string()?;
                reference = Some(tether::CompletionRef::ResourceTemplate(template));
            }
            Long("stdio") if words.is_empty() => words.push(stdio_server(parser)?),
            Long("context") => context.push(parser.value()?.string()?),
            Long("json") => json = true,
            Value(word) if words.len() < 3 => words.push(word.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    let Some(reference) = reference else { return Err(USAGE.into()) };
    let mut words = words.into_iter();
    match (words.next(), words.next(), words.next()) {
        (Some(server), Some(argument), value) => Ok(Command::Complete {
            server,
            reference,
            argument,
            value: value.unwrap_or_default(),
            context,
            json,
        }),
        _ => Err(USAGE.into()),
    }
}

pub(super) fn parse_list(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
    let (mut names, mut scope, mut json, mut no_connect) = (Vec::new(), None, false, false);
    while let Some(arg) = parser.next()? {
        if let Some(flag) = scope_flag(&arg) {
            scope = Some(scope_of(flag, parser)?);
            continue;
        }
        match arg {
            Long("json") => json = true,
            Long("no-connect") => no_connect = true,
            Value(name) => names.push(name.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    Ok(Command::List { names, scope, json, no_connect })
}

/// `tools`, `resources` and `prompts` take the same options:
/// `[SERVER | --server NAME] [--json]` (and `tools` `--signatures`).
pub(super) fn parse_listing(
    parser: &mut lexopt::Parser,
    command: &str,
) -> Result<Command, lexopt::Error> {
    let (mut server, mut json, mut signatures) = (None, false, false);
    while let Some(arg) = parser.next()? {
        match arg {
            Long("server") if server.is_none() => server = Some(parser.value()?.string()?),
            Long("stdio") if server.is_none() => server = Some(stdio_server(parser)?),
            Value(name) if server.is_none() => server = Some(name.string()?),
            Long("json") => json = true,
            Long("signatures") if command == "tools" => signatures = true,
            _ => return Err(arg.unexpected()),
        }
    }
    Ok(match command {
        "tools" => Command::Tools { server, json, signatures },
        "resources" => Command::Resources { server, json },
        _ => Command::Prompts { server, json },
    })
}

/// `read SERVER URI [-o PATH] [--raw] [--json]` and
/// `prompt SERVER NAME [ARGS_JSON] [--json]`.
pub(super) fn parse_fetch(
    parser: &mut lexopt::Parser,
    command: &str,
) -> Result<Command, lexopt::Error> {
    let (mut positional, mut raw, mut json, mut output) = (Vec::new(), false, false, None);
    let mut stdio = None;
    while let Some(arg) = parser.next()? {
        match arg {
            Long("stdio") if stdio.is_none() => stdio = Some(stdio_server(parser)?),
            Long("raw") if command == "read" => raw = true,
            Short('o') | Long("output") if command == "read" => {
                output = Some(PathBuf::from(parser.value()?))
            }
            Long("json") => json = true,
            Value(word) if positional.len() < 3 || command == "prompt" => {
                positional.push(word.string()?)
            }
            _ => return Err(arg.unexpected()),
        }
    }
    const PROMPT_USAGE: &str =
        "usage: tether prompt SERVER NAME [ARGS_JSON|-|key=value...] [--json]";
    // `--stdio CMD` is the server: the words after it shift.
    if let Some(stdio) = stdio {
        positional.insert(0, stdio);
    }
    if command == "prompt" && positional.len() >= 2 {
        let rest = positional.split_off(2);
        let (arguments, pairs) = split_arguments(rest, PROMPT_USAGE)?;
        let name = positional.pop().expect("two words");
        let server = positional.pop().expect("two words");
        return Ok(Command::Prompt { server, name, arguments, pairs, json });
    }
    let mut positional = positional.into_iter();
    match (command, positional.next(), positional.next(), positional.next()) {
        ("read", Some(server), Some(uri), None) if !(raw && output.is_some()) => {
            Ok(Command::Read { server, uri, output, raw, json })
        }
        ("read", ..) => Err(
            "usage: tether read SERVER URI [-o|--output PATH] [--raw] [--json] (not -o with --raw)"
                .into(),
        ),
        _ => Err(PROMPT_USAGE.into()),
    }
}

/// `--timeout S`: seconds, above 0 and below 115 days.
pub(super) fn timeout_flag(parser: &mut lexopt::Parser) -> Result<Duration, lexopt::Error> {
    let seconds: f64 = number(parser, "--timeout", "a number of seconds")?;
    if !(seconds > 0.0 && seconds < 1e7) {
        return Err(
            "--timeout takes a number of seconds above 0 and below 10000000 (115 days)".into()
        );
    }
    // 30000 is 30 s in milliseconds (as Gemini's config has it), or 8 h.
    if seconds >= 1000.0 && seconds % 1000.0 == 0.0 {
        return Err(format!(
            "--timeout is in seconds: {seconds} s is {:.1} hours; for {} s write --timeout {}",
            seconds / 3600.0,
            seconds / 1000.0,
            seconds / 1000.0
        )
        .into());
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// `run [FILE|-] [-e CODE] [--timeout S] [--json]`.
pub(super) fn parse_run(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
    let (mut file, mut code, mut timeout, mut json) = (None, None, None, false);
    let mut adhoc = Vec::new();
    while let Some(arg) = parser.next()? {
        match arg {
            Long("stdio") => adhoc.push(stdio_server(parser)?),
            Long("url") => adhoc.push(parser.value()?.string()?),
            Short('e') | Long("eval") if code.is_none() => code = Some(parser.value()?.string()?),
            Short('e') | Long("eval") => return Err("-e comes once: one script a run".into()),
            Long("timeout") => timeout = Some(timeout_flag(parser)?),
            Long("json") => json = true,
            Value(word) if file.is_none() => file = Some(word.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    if file.is_some() && code.is_some() {
        return Err("tether run takes a FILE or -e CODE, not both".into());
    }
    Ok(Command::Run { file, code, timeout, json, adhoc })
}

pub(super) fn parse_call(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
    let mut positional = Vec::new();
    let (mut timeout, mut json, mut stdio) = (None, false, None);
    let (mut max_chars, mut save_images) = (None, None);
    while let Some(arg) = parser.next()? {
        match arg {
            Long("timeout") => timeout = Some(timeout_flag(parser)?),
            Long("json") => json = true,
            Long("max-chars") => {
                max_chars = Some(number(parser, "--max-chars", "a number of characters")?)
            }
            Long("save-images") => save_images = Some(PathBuf::from(parser.value()?)),
            Long("stdio") if stdio.is_none() => stdio = Some(stdio_server(parser)?),
            Value(word) => positional.push(word.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    // `--stdio CMD` is the server: the words after it shift.
    if let Some(stdio) = stdio {
        positional.insert(0, stdio);
    }
    const USAGE: &str = "usage: tether call SERVER TOOL [ARGS_JSON|-|key=value...] [--timeout S] \
                         [--json]\n       tether call mcp__SERVER__TOOL [ARGS_JSON|-|key=value...]";
    // `call mcp__SERVER__TOOL [ARGS]`: the qualified name `tools` prints.
    let qualified = positional.first().and_then(|first| split_qualified(first));
    let (server, tool, rest) = match qualified {
        Some((server, tool))
            if positional.len() == 1 || is_arguments(&positional[1]) || is_pair(&positional[1]) =>
        {
            (server, tool, positional.split_off(1))
        }
        _ => {
            if positional.len() < 2 {
                return Err(USAGE.into());
            }
            let rest = positional.split_off(2);
            let tool = positional.pop().expect("two words");
            (positional.pop().expect("two words"), tool, rest)
        }
    };
    let (arguments, pairs) = split_arguments(rest, USAGE)?;
    Ok(Command::Call { server, tool, arguments, pairs, timeout, json, max_chars, save_images })
}

/// A call's words after its tool: one JSON object (or `-`), or
/// `key=value` words.
fn split_arguments(
    rest: Vec<String>,
    usage: &str,
) -> Result<(Option<String>, Vec<String>), lexopt::Error> {
    match rest.as_slice() {
        [] => Ok((None, Vec::new())),
        // One word that is no pair is JSON (or `-`), and said so if not.
        [one] if !is_pair(one) => Ok((rest.into_iter().next(), Vec::new())),
        _ => match rest.iter().find(|word| !is_pair(word)) {
            Some(word) => Err(format!(
                "{word:?} is neither JSON arguments nor key=value (k=v, k:=JSON, k=@FILE, \
                 k=@-)\n{usage}"
            )
            .into()),
            None => Ok((None, rest)),
        },
    }
}

fn is_pair(word: &str) -> bool {
    crate::cli::arguments::is_pair(word)
}

/// `--stdio CMD`: an ad-hoc server, handed on in the server field.
pub(super) fn stdio_server(parser: &mut lexopt::Parser) -> Result<String, lexopt::Error> {
    let line = parser.value()?.string()?;
    if line.trim().is_empty() {
        return Err("--stdio needs a command, like --stdio \"npx -y pkg\"".into());
    }
    Ok(format!("{STDIO}{line}"))
}

/// `mcp__SERVER__TOOL` as (SERVER, the qualified name): the hub maps the
/// qualified name back to the server's own name for its tool.
fn split_qualified(word: &str) -> Option<(String, String)> {
    let rest = word.strip_prefix("mcp__")?;
    let (server, tool) = rest.split_once("__")?;
    (!server.is_empty() && !tool.is_empty()).then(|| (server.to_owned(), word.to_owned()))
}

/// True for what can only be arguments: JSON, or `-` for stdin.
fn is_arguments(word: &str) -> bool {
    word == "-" || word.trim_start().starts_with('{')
}
