//! The commands that browse what servers offer besides tools: `resources`,
//! `read`, `prompts`, `prompt`.
//!
//! Text goes to stdout; a binary resource goes to a file whose path is
//! printed (named after the URI in the current folder, or where `-o` says;
//! to stdout with `--raw`), so a terminal never receives bytes it cannot show.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;

use tether::{Config, Error, Hub, Offered};

use super::output::{
    emit, emit_body, emit_json, report, EXIT_OK, EXIT_SERVER, EXIT_TOOL_ERROR, EXIT_USAGE,
};
use super::signals::SignalWatch;
use super::starting::{connected_hub, warn_not_connected};
use super::{escape, table};

/// Warns about servers that did not connect and lists that failed; the
/// exit code says whether the listing is whole.
fn print_errors(hub: &Hub, errors: &[Error]) -> u8 {
    let not_connected = warn_not_connected(hub);
    for error in errors {
        eprintln!("warning: {}", escape::escaped(&error.to_string()));
    }
    if errors.is_empty() && !not_connected {
        EXIT_OK
    } else {
        EXIT_TOOL_ERROR
    }
}

pub(super) fn resources(
    config: Config,
    server: Option<&str>,
    json: bool,
    signals: &SignalWatch,
) -> u8 {
    let hub = match connected_hub(config, server, signals) {
        Ok(hub) => hub,
        Err(code) => return code,
    };
    let (resources, mut errors) = hub.resources();
    let (templates, template_errors) = hub.resource_templates();
    errors.extend(template_errors);
    if json {
        let value = serde_json::json!({"resources": resources, "resourceTemplates": templates});
        emit_json(&value);
    } else {
        let mut rows: Vec<[String; 4]> = resources
            .iter()
            .map(|Offered { server, item }| {
                let mime = item.mime_type.as_deref().unwrap_or("-");
                [server.clone(), item.uri.clone(), item.name.clone(), mime.to_owned()]
            })
            .collect();
        rows.extend(templates.iter().map(|Offered { server, item }| {
            [server.clone(), item.uri_template.clone(), item.name.clone(), "(template)".into()]
        }));
        let out = table::render(&rows);
        if out.is_empty() {
            eprintln!("No resources.");
        }
        emit(&out);
    }
    print_errors(&hub, &errors)
}

pub(super) fn read(
    config: Config,
    server: &str,
    uri: &str,
    output: Option<&Path>,
    raw: bool,
    json: bool,
    signals: &SignalWatch,
) -> u8 {
    let hub = match connected_hub(config, Some(server), signals) {
        Ok(hub) => hub,
        Err(code) => return code,
    };
    let contents = match hub.read_resource(server, uri, &tether::CallOptions::default()) {
        Ok(contents) => contents,
        Err(err) => {
            let code = report(&err);
            let offers = hub
                .status()
                .iter()
                .any(|status| Config::same_name(&status.name, server) && status.resources);
            if !offers {
                detail!("hint: {server:?} offers no resources (see: tether list {server})");
            }
            return code;
        }
    };
    if json {
        let result = serde_json::json!({"contents": contents});
        emit_json(&result);
        return EXIT_OK;
    }
    // With -o a file takes one part; a folder takes any number.
    let output_is_folder = output.is_some_and(is_folder);
    let parts = contents.iter().filter(|item| item.text.is_some() || item.blob.is_some()).count();
    if parts > 1 && output.is_some() && !output_is_folder {
        errln!("{uri} has {parts} parts; give -o a folder to put them in");
        return EXIT_USAGE;
    }
    for item in &contents {
        let bytes = match (&item.text, &item.blob) {
            (Some(text), _) if output.is_none() => {
                emit_body(text);
                if !text.ends_with('\n') {
                    emit("\n");
                }
                continue;
            }
            (Some(text), _) => text.as_bytes().to_vec(),
            (None, Some(blob)) => match decode_base64(blob) {
                Some(bytes) => bytes,
                None => {
                    errln!(
                        "server {server:?} sent a blob that is not base64 for {}",
                        escape::escaped(&item.uri)
                    );
                    return EXIT_SERVER;
                }
            },
            (None, None) => {
                emit(&format!("{} (empty)\n", escape::escaped(&item.uri)));
                continue;
            }
        };
        if raw {
            let mut stdout = io::stdout().lock();
            if stdout.write_all(&bytes).and_then(|()| stdout.flush()).is_err() {
                return EXIT_OK;
            }
            continue;
        }
        let to = output.map(|path| (path, output_is_folder));
        if let Err(code) = save_part(&item.uri, item.mime_type.as_deref(), &bytes, to) {
            return code;
        }
    }
    EXIT_OK
}

/// True when `-o` names a folder (one that exists, or ends in `/`): a
/// folder takes any number of parts, a file one.
fn is_folder(path: &Path) -> bool {
    path.is_dir() || path.to_string_lossy().ends_with('/')
}

/// Saves one binary part where `-o` says (`to`: the path, and whether it
/// is a folder, decided once per command), in the current folder without
/// it, and says where; the exit code when it cannot be saved.
fn save_part(
    uri: &str,
    mime_type: Option<&str>,
    bytes: &[u8],
    to: Option<(&Path, bool)>,
) -> Result<(), u8> {
    let output = to.map(|(path, _)| path);
    let saved = match to {
        Some((folder, true)) => {
            fs::create_dir_all(folder).and_then(|()| save_in(folder, uri, bytes))
        }
        Some((file, false)) => fs::write(file, bytes).map(|()| file.to_owned()),
        None => save_in(Path::new("."), uri, bytes),
    };
    match saved {
        Ok(path) => {
            let mime = mime_type.unwrap_or("binary");
            emit(&format!(
                "{} ({}, {} bytes) saved to {}\n",
                escape::escaped(uri),
                escape::escaped(mime),
                bytes.len(),
                path.display()
            ));
            Ok(())
        }
        Err(err) => {
            let target = output.unwrap_or(Path::new("."));
            errln!("cannot save {} to {}: {err}", escape::escaped(uri), target.display());
            Err(EXIT_USAGE)
        }
    }
}

/// Saves a binary resource in `folder` under a name made from its URI's
/// last part (letters, digits, `.`, `-`, `_`; never hidden, never `..`),
/// without replacing a file: `logo.png` is taken, so `logo-1.png`, ….
fn save_in(folder: &Path, uri: &str, bytes: &[u8]) -> io::Result<PathBuf> {
    let name = file_name_of(uri);
    let (stem, extension) = match name.rsplit_once('.') {
        Some((stem, extension)) if !stem.is_empty() => (stem, format!(".{extension}")),
        _ => (name.as_str(), String::new()),
    };
    for attempt in 0..1000u32 {
        let candidate = if attempt == 0 {
            folder.join(&name)
        } else {
            folder.join(format!("{stem}-{attempt}{extension}"))
        };
        // A new file only: nothing there is replaced, and no link is followed.
        match fs::OpenOptions::new().write(true).create_new(true).open(&candidate) {
            Ok(mut file) => {
                file.write_all(bytes)?;
                return Ok(candidate);
            }
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(err),
        }
    }
    Err(io::Error::new(io::ErrorKind::AlreadyExists, format!("{name} and 999 like it exist")))
}

/// A safe file name from a URI's last non-empty part.
fn file_name_of(uri: &str) -> String {
    let last = uri.split(['?', '#']).next().unwrap_or(uri);
    let name: String = last
        .rsplit('/')
        .find(|part| !part.is_empty())
        .unwrap_or("")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || ".-_".contains(c) { c } else { '_' })
        .collect();
    let name = name.trim_start_matches('.');
    if name.is_empty() || name.chars().all(|c| c == '_') {
        "resource".to_owned()
    } else {
        name.to_owned()
    }
}

/// Base64 as servers send it: standard or URL-safe, padding optional,
/// line breaks allowed; `None` when it is not base64.
pub(crate) fn decode_base64(text: &str) -> Option<Vec<u8>> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    use base64::{alphabet, Engine};
    const LENIENT: GeneralPurposeConfig =
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    const STANDARD: GeneralPurpose = GeneralPurpose::new(&alphabet::STANDARD, LENIENT);
    const URL_SAFE: GeneralPurpose = GeneralPurpose::new(&alphabet::URL_SAFE, LENIENT);
    let compact: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    STANDARD.decode(&compact).or_else(|_| URL_SAFE.decode(&compact)).ok()
}

pub(super) fn prompts(
    config: Config,
    server: Option<&str>,
    json: bool,
    signals: &SignalWatch,
) -> u8 {
    let hub = match connected_hub(config, server, signals) {
        Ok(hub) => hub,
        Err(code) => return code,
    };
    let (prompts, errors) = hub.prompts();
    if json {
        emit_json(&prompts);
    } else {
        let mut rows: Vec<[String; 3]> = Vec::new();
        for Offered { server, item } in &prompts {
            let arguments: Vec<String> = item
                .arguments
                .iter()
                .map(|argument| {
                    if argument.required {
                        argument.name.clone()
                    } else {
                        format!("[{}]", argument.name)
                    }
                })
                .collect();
            let description =
                item.description.as_deref().and_then(|text| text.lines().next()).unwrap_or("");
            let usage = format!("{} {}", item.name, arguments.join(" "));
            rows.push([server.clone(), usage.trim_end().to_owned(), description.to_owned()]);
        }
        let out = table::render(&rows);
        if out.is_empty() {
            eprintln!("No prompts.");
        }
        emit(&out);
    }
    print_errors(&hub, &errors)
}

pub(super) fn prompt(
    config: Config,
    server: &str,
    name: &str,
    arguments: Value,
    json: bool,
    signals: &SignalWatch,
) -> u8 {
    let hub = match connected_hub(config, Some(server), signals) {
        Ok(hub) => hub,
        Err(code) => return code,
    };
    match hub.get_prompt(server, name, arguments, &tether::CallOptions::default()) {
        Ok(result) if json => {
            emit_json(&result);
            EXIT_OK
        }
        Ok(result) => {
            let mut out = String::new();
            for message in &result.messages {
                let role = message.get("role").and_then(Value::as_str).unwrap_or("?");
                let content = message.get("content").cloned().unwrap_or(Value::Null);
                let text =
                    tether::ToolResult::new(serde_json::json!({"content": [content]})).to_text();
                out.push_str(&format!("{role}: {text}\n"));
            }
            emit_body(&out);
            EXIT_OK
        }
        Err(err) => report(&err),
    }
}

/// `tether complete`: the values a prompt's argument or a resource
/// template's variable may take, one a line (`--json`: the completion).
pub(super) fn complete(
    config: Config,
    server: &str,
    reference: &tether::CompletionRef,
    argument: (&str, &str),
    context: &[String],
    json: bool,
    signals: &SignalWatch,
) -> u8 {
    // `k=v` words: the arguments chosen already, strings as the revision has them.
    let context = match super::arguments::from_pairs(context, &serde_json::json!({})) {
        Ok(context) => context,
        Err(message) => {
            errln!("--context: {}", escape::escaped(&message));
            return EXIT_USAGE;
        }
    };
    let context = context.as_object().is_some_and(|map| !map.is_empty()).then_some(&context);
    let hub = match connected_hub(config, Some(server), signals) {
        Ok(hub) => hub,
        Err(code) => return code,
    };
    let (name, value) = argument;
    let options = tether::CallOptions::default();
    match hub.complete(server, reference, name, value, context, &options) {
        Ok(completion) if json => {
            emit_json(&completion.to_json());
            EXIT_OK
        }
        Err(err) if matches!(err.root(), Error::Rpc(rpc) if rpc.code == -32601) => {
            let code = report(&err);
            detail!("hint: {server} offers no completions (the completions capability)");
            code
        }
        Ok(completion) => {
            let mut out = String::new();
            for value in &completion.values {
                out.push_str(&escape::escaped(value));
                out.push('\n');
            }
            emit(&out);
            if completion.has_more {
                let total =
                    completion.total.map(|total| format!(" ({total} in all)")).unwrap_or_default();
                eprintln!("(and more{total}: type more of the value)");
            }
            EXIT_OK
        }
        Err(err) => report(&err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips() {
        assert_eq!(decode_base64("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(decode_base64("aGVsbG8").unwrap(), b"hello");
        assert_eq!(decode_base64("AAEC/w==").unwrap(), [0, 1, 2, 255]);
        assert!(decode_base64("not base64!").is_none());
    }

    #[test]
    fn file_names_from_uris_are_safe() {
        assert_eq!(file_name_of("demo://images/logo.png"), "logo.png");
        assert_eq!(file_name_of("file:///a/b/"), "b");
        assert_eq!(file_name_of("file:///a/.."), "resource");
        assert_eq!(file_name_of("x://a/.bashrc"), "bashrc");
        assert_eq!(file_name_of("x://a/%2e%2e%2fetc"), "_2e_2e_2fetc");
        assert_eq!(file_name_of("x://pic.png?size=2#top"), "pic.png");
        assert_eq!(file_name_of("blob:"), "blob_");
    }
}
