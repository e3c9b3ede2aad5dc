//! The commands that change the configuration files: `add`, `remove`,
//! `enable`, `disable`, `trust`, `untrust`, `import`.
//!
//! Each says what it did and the next useful command. The writing itself
//! (locked, atomic, keeping everything else in the file) is the library's
//! `ConfigFiles`; this module only turns arguments and answers into entries.

use std::io::{self, BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use tether::{ConfigFiles, Scope};

use super::args::{key_value, AddArgs};
use super::output::{report, EXIT_OK, EXIT_USAGE};
use tether::for_cli::shell_quote;

/// `tether` with the global options that chose the files (`--config-dir`,
/// `--project`), so that a hint's command reaches the same entry.
pub(super) struct SameFiles(String);

impl SameFiles {
    pub(super) fn new(
        config_dir: Option<&std::path::Path>,
        project: Option<&std::path::Path>,
    ) -> SameFiles {
        let mut command = String::from("tether");
        for (option, path) in [("--config-dir", config_dir), ("--project", project)] {
            if let Some(path) = path {
                command
                    .push_str(&format!(" {option} {}", shell_quote(&path.display().to_string())));
            }
        }
        SameFiles(command)
    }
}

impl std::fmt::Display for SameFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub(super) fn add(files: &ConfigFiles, mut add: AddArgs, again: &SameFiles) -> u8 {
    if add.name.is_none() {
        if !io::stdin().is_terminal() {
            errln!("usage: tether add NAME [options] -- COMMAND [ARGS...]  (or --url URL)");
            return EXIT_USAGE;
        }
        match ask_add(&mut add) {
            Ok(()) => {}
            Err(err) => {
                errln!("{err}");
                return EXIT_USAGE;
            }
        }
    }
    let name = add.name.clone().unwrap_or_default();
    let entry = match entry_of(&add) {
        Ok(entry) => entry,
        Err(message) => {
            errln!("{message}");
            return EXIT_USAGE;
        }
    };
    let scope = add.scope.unwrap_or(Scope::User);
    let kind = if add.url.is_some() { "remote" } else { "stdio" };
    match files.add_server(scope, &name, entry) {
        Ok((path, warnings)) => {
            outln!("Added {kind} server {name:?} to {}.", path.display());
            for warning in warnings {
                eprintln!("warning: {}", super::escape::escaped(&warning));
            }
            if let Some(program) = add.command.first().filter(|program| !findable(program)) {
                eprintln!(
                    "warning: {} is not found{}; the server will not start until it is",
                    super::escape::escaped(program),
                    if program.contains('/') { "" } else { " on PATH" }
                );
            }
            match scope {
                // A project entry starts once approved, also in a trusted project.
                Scope::Project => outln!(
                    "Project entries start once approved; review and approve with: tether trust"
                ),
                Scope::Local => outln!(
                    "It is yours, for {} alone; the project's .mcp.json is left as it is.",
                    files.project_dir.display()
                ),
                _ => {}
            }
            outln!("Check it with: {again} list {}", shell_quote(&name));
            EXIT_OK
        }
        Err(err) => report(&err),
    }
}

/// True when `program` names a file (a path), or one on PATH (a bare name);
/// a `${VAR}` or `~` in it is the loader's to expand, so it passes.
fn findable(program: &str) -> bool {
    if program.contains('$') || program.starts_with('~') {
        return true;
    }
    if program.contains('/') {
        return Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// Builds the JSON entry `add` writes.
fn entry_of(add: &AddArgs) -> Result<Value, String> {
    let mut entry = Map::new();
    let transport = add.transport.as_deref();
    if let Some(text) = &add.json {
        // The entry as JSON: the options may add to it, not compete with it.
        if add.url.is_some() || !add.command.is_empty() || transport.is_some() {
            return Err("give the entry as JSON, or as a URL or command, not both".into());
        }
        match serde_json::from_slice::<Value>(text.as_bytes()) {
            Ok(Value::Object(given)) => entry = given,
            Ok(_) => {
                return Err("the entry must be a JSON object, like {\"command\": \"npx\"}".into())
            }
            Err(err) => return Err(format!("the entry is not valid JSON: {err}")),
        }
    }
    match (&add.url, add.command.is_empty()) {
        _ if add.json.is_some() => {}
        (Some(_), false) => return Err("give either a URL or a command, not both".into()),
        (None, false) if add.command[0].contains("://") => {
            return Err(format!(
                "{:?} is a URL, not a command; a remote server is added with: tether add {} {}",
                add.command[0],
                add.name.as_deref().unwrap_or("NAME"),
                add.command[0]
            ))
        }
        (None, true) => return Err("give the server's command after `--`, or --url URL".into()),
        (Some(url), true) => {
            if !add.env.is_empty() {
                return Err("--env is for stdio servers; a remote server takes --header".into());
            }
            match transport {
                None => {}
                Some("http" | "streamable-http") => {
                    entry.insert("type".into(), json!("http"));
                }
                Some("sse") => {
                    entry.insert("type".into(), json!("sse"));
                }
                Some(other) => {
                    return Err(format!(
                        "--transport {other:?} is not a remote transport; use http or sse"
                    ))
                }
            }
            entry.insert("url".into(), json!(url));
            if !add.headers.is_empty() {
                let headers: Map<String, Value> =
                    add.headers.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
                entry.insert("headers".into(), Value::Object(headers));
            }
            if let Some(variable) = &add.bearer_token_env {
                entry.insert("bearerTokenEnv".into(), json!(variable));
            }
        }
        (None, false) => {
            if let Some(other) = transport.filter(|kind| !matches!(*kind, "stdio" | "local")) {
                return Err(format!(
                    "--transport {other:?} needs --url; a command is a stdio server"
                ));
            }
            if !add.headers.is_empty() || add.bearer_token_env.is_some() {
                return Err(
                    "--header and --bearer-token-env-var are for remote servers (--url)".into()
                );
            }
            entry.insert("command".into(), json!(add.command[0]));
            if add.command.len() > 1 {
                entry.insert("args".into(), json!(add.command[1..]));
            }
            if !add.env.is_empty() {
                let env: Map<String, Value> =
                    add.env.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
                entry.insert("env".into(), Value::Object(env));
            }
        }
    }
    if let Some(description) = &add.description {
        entry.insert("description".into(), json!(description));
    }
    if add.keep_alive {
        entry.insert("keepAlive".into(), json!(true));
    }
    for (option, field, given) in [
        ("--timeout", "timeout", &add.timeout),
        ("--start-timeout", "startTimeout", &add.start_timeout),
    ] {
        if let Some(given) = given {
            match given.parse::<f64>() {
                // 30000 is 30 s in milliseconds (as other clients write it).
                Ok(seconds) if seconds >= 1000.0 && seconds % 1000.0 == 0.0 => {
                    return Err(format!(
                        "{option} is in seconds: {seconds} s is {:.1} hours; for {} s write \
                         {option} {}",
                        seconds / 3600.0,
                        seconds / 1000.0,
                        seconds / 1000.0
                    ))
                }
                // What the configuration takes (config/entry.rs).
                Ok(seconds) if seconds > 0.0 && seconds < 1e7 => {
                    entry.insert(field.into(), json!(seconds));
                }
                _ => {
                    return Err(format!(
                    "{option} takes a number of seconds above 0 and below 10000000, not {given:?}"
                ))
                }
            }
        }
    }
    if let Some(protocol) = &add.protocol {
        let era: tether::EraChoice =
            protocol.parse().map_err(|err| format!("--protocol: {err}"))?;
        entry.insert("protocol".into(), json!(era.as_str()));
    }
    if !add.include_tools.is_empty() {
        entry.insert("tools".into(), json!(add.include_tools));
    }
    if !add.exclude_tools.is_empty() {
        let hidden: Map<String, Value> =
            add.exclude_tools.iter().map(|tool| (tool.clone(), json!("hidden"))).collect();
        entry.insert("toolExposure".into(), Value::Object(hidden));
    }
    Ok(Value::Object(entry))
}

/// Asks for each setting on the terminal.
fn ask_add(add: &mut AddArgs) -> Result<(), String> {
    let stdin = io::stdin();
    let mut lines = stdin.lock().lines();
    let mut ask = |question: &str| -> Result<String, String> {
        eprint!("{question}");
        let _ = io::stderr().flush();
        match lines.next() {
            Some(Ok(line)) => Ok(line.trim().to_owned()),
            _ => Err("no answer (end of input)".into()),
        }
    };
    let name = ask("Server name (letters, digits, _ and -): ")?;
    if name.is_empty() {
        return Err("a server needs a name".into());
    }
    add.name = Some(name);
    let transport = ask("Transport: stdio (a local command), http or sse [stdio]: ")?;
    match transport.as_str() {
        "" | "stdio" | "local" => {
            let command = ask("Command and arguments: ")?;
            add.command = split_words(&command)?;
            loop {
                let variable = ask("Environment variable KEY=VALUE (empty to finish): ")?;
                if variable.is_empty() {
                    break;
                }
                add.env.push(key_value(&variable, "the variable").map_err(|err| err.to_string())?);
            }
        }
        "http" | "sse" => {
            add.transport = Some(transport.clone());
            add.url = Some(ask("URL: ")?);
            eprintln!("Headers, e.g. Authorization, X-API-Key, Cookie, User-Agent. Tip: a value like ${{MY_TOKEN}} keeps the secret out of the file.");
            loop {
                let header = ask("Header NAME: VALUE (empty to finish): ")?;
                if header.is_empty() {
                    break;
                }
                add.headers.push(key_value(&header, "the header").map_err(|err| err.to_string())?);
            }
        }
        other => return Err(format!("{other:?} is not a transport; use stdio, http or sse")),
    }
    let description = ask("One sentence: what is it for? (optional): ")?;
    if !description.is_empty() {
        add.description = Some(description);
    }
    Ok(())
}

/// Splits a command line into words, with '…' and "…" quoting (no other shell syntax).
fn split_words(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err("an open quote in the command".into());
    }
    if in_word {
        words.push(word);
    }
    if words.is_empty() {
        return Err("a stdio server needs a command".into());
    }
    Ok(words)
}

/// Says that no file defines this server, and which configured one is close.
fn unknown(files: &ConfigFiles, name: &str) -> u8 {
    let config = tether::ConfigLoader::new()
        .config_dir(&files.config_dir)
        .project_dir(&files.project_dir)
        .load();
    super::starting::unknown_server(&config, name)
}

/// The server must be in `scope`'s file (or in some file, without a scope).
fn check_defined(files: &ConfigFiles, name: &str, scope: Option<Scope>) -> Result<(), u8> {
    let defined = files.defined_in(name);
    match scope {
        _ if defined.is_empty() => Err(unknown(files, name)),
        Some(scope) if !defined.contains(&scope) => {
            let file = match scope {
                Scope::Project => files.project_file(),
                Scope::Local => files.local_file(),
                _ => files.user_file(),
            };
            errln!(
                "server {name:?} is not in {} (it is in the {} file)",
                file.display(),
                defined[0].as_str()
            );
            Err(EXIT_USAGE)
        }
        _ => Ok(()),
    }
}

pub(super) fn remove(
    files: &ConfigFiles,
    name: &str,
    scope: Option<Scope>,
    again: &SameFiles,
) -> u8 {
    if let Err(code) = check_defined(files, name, scope) {
        return code;
    }
    let defined = files.defined_in(name);
    let scope = match scope {
        Some(scope) => scope,
        None => match defined.as_slice() {
            [] => return unknown(files, name),
            [only] => *only,
            _ => {
                let words: Vec<&str> = defined.iter().map(|scope| scope.as_str()).collect();
                let choices: Vec<String> =
                    words.iter().map(|word| format!("({}){}", &word[..1], &word[1..])).collect();
                let question = format!(
                    "Server {name:?} is in the {} files. Remove it from {}, or (n)either? ",
                    words.join(" and "),
                    choices.join(", ")
                );
                let picked = ask_choice(&question).map(|answer| {
                    defined.iter().copied().find(|scope| scope.as_str().starts_with(answer))
                });
                match picked {
                    Some(Some(scope)) => scope,
                    Some(None) => {
                        eprintln!("Nothing removed.");
                        return EXIT_OK;
                    }
                    None => {
                        errln!(
                            "server {name:?} is in the {} files; pass -s {} to say which",
                            words.join(" and "),
                            words.join(" or -s ")
                        );
                        return EXIT_USAGE;
                    }
                }
            }
        },
    };
    match files.remove_server(scope, name) {
        Ok(path) => {
            outln!("Removed server {name:?} from {}.", path.display());
            outln!("Check with: {again} list");
            EXIT_OK
        }
        Err(err) => report(&err),
    }
}

/// Asks a one-letter question on a terminal; `None` when there is no terminal.
fn ask_choice(question: &str) -> Option<char> {
    if !io::stdin().is_terminal() {
        return None;
    }
    eprint!("{question}");
    let _ = io::stderr().flush();
    let mut answer = String::new();
    io::stdin().lock().read_line(&mut answer).ok()?;
    Some(answer.trim().chars().next().unwrap_or('n').to_ascii_lowercase())
}

pub(super) fn enable(
    files: &ConfigFiles,
    name: &str,
    enabled: bool,
    scope: Option<Scope>,
    again: &SameFiles,
) -> u8 {
    if let Err(code) = check_defined(files, name, scope) {
        return code;
    }
    // Already so: said, and the file left alone.
    let config = tether::ConfigLoader::new()
        .config_dir(files.config_dir.clone())
        .project_dir(files.project_dir.clone())
        .load();
    let same = |server: &tether::ServerConfig| {
        server.enabled == enabled && scope.is_none_or(|scope| server.scope == scope)
    };
    if config.server(name).is_some_and(same) {
        let state = if enabled { "enabled" } else { "disabled" };
        outln!("Server {name:?} is already {state}; nothing changed.");
        return EXIT_OK;
    }
    match files.set_field(scope, name, "enabled", Some(Value::Bool(enabled))) {
        Ok((_, path)) => {
            let done = if enabled { "Enabled" } else { "Disabled" };
            outln!("{done} server {name:?} in {}.", path.display());
            outln!("Check it with: {again} list {}", shell_quote(name));
            EXIT_OK
        }
        Err(err) => report(&err),
    }
}

pub(super) fn trust(
    files: &ConfigFiles,
    dir: Option<PathBuf>,
    trusted: bool,
    yes: bool,
    again: &SameFiles,
) -> u8 {
    use super::escape::escaped;
    let dir = dir.unwrap_or_else(|| files.project_dir.clone());
    if !dir.is_dir() {
        errln!("{} is not a folder", dir.display());
        return EXIT_USAGE;
    }
    let outcome = if trusted {
        // What is shown is exactly what is approved: these entries, as read now.
        let entries = match ConfigFiles::project_entries(&dir) {
            Ok(entries) => entries,
            Err(err) => return report(&err),
        };
        if entries.is_empty() {
            // Nothing is approved that was not shown.
            outln!("{} has no servers in .mcp.json (yet); nothing to trust.", dir.display());
            return EXIT_OK;
        } else {
            // Everything the file says is shown escaped: an entry cannot
            // hide what it runs behind terminal control sequences.
            outln!(
                "Trusting {} lets its .mcp.json start these servers, as they are now:",
                escaped(&dir.display().to_string())
            );
            // Everything the approval covers: the command line, then every
            // other field (an `env.PATH` changes which program runs).
            let mut rows: Vec<[String; 2]> = Vec::new();
            for entry in &entries {
                let line = entry.command_line.as_deref().unwrap_or("(changes settings only)");
                rows.push([format!("  {}", entry.name), line.to_owned()]);
                for (field, value) in &entry.details {
                    rows.push([String::new(), format!("  {field} = {value}")]);
                }
            }
            out!("{}", super::table::render(&rows));
            if !yes {
                match ask_choice("Trust them? [y/N] ") {
                    Some('y') => {}
                    Some(_) => {
                        eprintln!("Nothing trusted.");
                        return EXIT_OK;
                    }
                    None => {
                        errln!("trusting a project needs a yes: run it on a terminal, or pass --yes after reading the list above");
                        return EXIT_USAGE;
                    }
                }
            }
        }
        files.approve(&dir, &entries)
    } else {
        files.set_trusted(&dir, false)
    };
    match outcome {
        Ok((changed, canonical)) => {
            let shown = escaped(&canonical.display().to_string());
            match (trusted, changed) {
                (true, true) => outln!("Trusted {shown}: these entries may start."),
                (true, false) => outln!("{shown} was already trusted as it is."),
                (false, true) => {
                    outln!("No longer trusting {shown}; its servers will not start.")
                }
                (false, false) => outln!("{shown} was not trusted."),
            }
            // The folder trusted, unless --project already named one.
            if again.0.contains(" --project ") {
                outln!("Check with: {again} list");
            } else {
                outln!("Check with: {again} --project {} list", shell_quote(&shown));
            }
            EXIT_OK
        }
        Err(err) => report(&err),
    }
}

/// `tether import` with no file: the files other clients keep where they
/// usually are, offered on a terminal (a number, several, `all`), listed
/// otherwise.
#[cfg(feature = "desktop")]
pub(super) fn import_found(files: &ConfigFiles, again: &SameFiles) -> u8 {
    let found = ConfigFiles::import_candidates();
    if found.is_empty() {
        errln!(
            "no other client's configuration is where it usually is; name the file: \
             tether import FILE"
        );
        return EXIT_USAGE;
    }
    let shown = |at: usize, client: &str, path: &Path| {
        format!("  {}. {client}: {}", at + 1, super::escape::escaped(&path.display().to_string()))
    };
    if !io::stdin().is_terminal() {
        eprintln!("Found these; name one: tether import FILE");
        for (at, (client, path)) in found.iter().enumerate() {
            eprintln!("{}", shown(at, client, path));
        }
        return EXIT_USAGE;
    }
    eprintln!("Found:");
    for (at, (client, path)) in found.iter().enumerate() {
        eprintln!("{}", shown(at, client, path));
    }
    eprint!("Import which? (numbers, all, or nothing to stop): ");
    let _ = io::stderr().flush();
    let mut answer = String::new();
    if io::stdin().lock().read_line(&mut answer).is_err() {
        return EXIT_USAGE;
    }
    let answer = answer.trim();
    let picked: Vec<usize> = if answer.eq_ignore_ascii_case("all") {
        (0..found.len()).collect()
    } else {
        let numbers: Option<Vec<usize>> = answer
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|word| !word.is_empty())
            .map(|word| word.parse::<usize>().ok().filter(|n| (1..=found.len()).contains(n)))
            .map(|n| n.map(|n| n - 1))
            .collect();
        match numbers {
            Some(numbers) => numbers,
            None => {
                errln!("{answer:?} is not a number from the list");
                return EXIT_USAGE;
            }
        }
    };
    let mut code = EXIT_OK;
    for at in picked {
        code = code.max(import(files, &found[at].1, again));
    }
    code
}

#[cfg(feature = "desktop")]
pub(super) fn import(files: &ConfigFiles, source: &Path, again: &SameFiles) -> u8 {
    match files.import(source) {
        Ok(report) => {
            let target = files.user_file();
            if report.imported.is_empty() {
                outln!("Imported nothing into {}.", target.display());
            } else {
                let noun = if report.imported.len() == 1 { "server" } else { "servers" };
                outln!(
                    "Imported {} {noun} into {}: {}.",
                    report.imported.len(),
                    target.display(),
                    report.imported.join(", ")
                );
            }
            for (name, why) in &report.skipped {
                outln!(
                    "Skipped {}: {}.",
                    super::escape::escaped(name),
                    super::escape::escaped(why)
                );
            }
            for note in &report.notes {
                outln!("Note: {}.", super::escape::escaped(note));
            }
            for warning in &report.warnings {
                eprintln!("warning: {}", super::escape::escaped(warning));
            }
            outln!("Check them with: {again} list");
            EXIT_OK
        }
        Err(err) => report(&err),
    }
}

pub(super) fn expose(
    files: &ConfigFiles,
    name: &str,
    mode: tether::Exposure,
    tool: Option<&str>,
    scope: Option<Scope>,
    again: &SameFiles,
) -> u8 {
    // A project file may override a user server it does not define.
    let defined = if scope == Some(Scope::Project) { None } else { scope };
    if let Err(code) = check_defined(files, name, defined) {
        return code;
    }
    // Where the server is defined, unless -s says which file.
    let scope =
        scope.unwrap_or_else(|| files.defined_in(name).first().copied().unwrap_or(Scope::User));
    match files.set_exposure(scope, name, mode, tool) {
        Ok(path) => {
            match tool {
                Some(pattern) => outln!(
                    "Set the exposure of {name:?} tools matching {pattern:?} to {} in {}.",
                    mode.as_str(),
                    path.display()
                ),
                None => outln!(
                    "Set the exposure of {name:?} to {} in {}.",
                    mode.as_str(),
                    path.display()
                ),
            }
            outln!("Check it with: {again} tools {}", shell_quote(name));
            EXIT_OK
        }
        Err(err) => report(&err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_with_quotes() {
        assert_eq!(
            split_words(r#"npx -y "@scope/pkg" 'a b' """#).unwrap(),
            ["npx", "-y", "@scope/pkg", "a b", ""]
        );
        assert!(split_words("a 'b").is_err());
        assert!(split_words("   ").is_err());
    }
}
