//! The commands that browse what servers offer besides tools: `resources`,
//! `read`, `prompts`, `prompt`.
//!
//! Text goes to stdout; a binary resource goes to a file whose path is
//! printed (or to stdout with `--raw`), so a terminal never receives bytes
//! it cannot show.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;

use serde_json::Value;

use tether::{Config, Error, Hub, Offered, ServerState};

use super::connect::{only_server, start_failure_code, SignalWatch};
use super::{emit, report, status, EXIT_OK, EXIT_SERVER, EXIT_TOOL_ERROR, EXIT_USAGE};

/// Starts the hub for `server` (or every server) and fails when a named
/// server did not connect.
fn connected_hub(config: Config, server: Option<&str>, signals: &SignalWatch) -> Result<Hub, u8> {
    let config = match server {
        None => config,
        Some(name) => only_server(&config, name)?,
    };
    let hub = signals.start_hub(config);
    if let Some(name) = server {
        if let Some(status) =
            hub.status().into_iter().find(|status| status.state != ServerState::Ready)
        {
            eprintln!(
                "error: server {name:?} is not connected: {}",
                status::error_text(&status).unwrap_or_else(|| "unknown error".into())
            );
            return Err(start_failure_code(&status));
        }
    }
    Ok(hub)
}

fn print_errors(errors: &[Error]) -> u8 {
    for error in errors {
        eprintln!("warning: {error}");
    }
    if errors.is_empty() {
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
        emit(&format!("{}\n", serde_json::to_string_pretty(&value).unwrap_or_default()));
    } else {
        let mut out = String::new();
        for Offered { server, item } in &resources {
            let mime = item.mime_type.as_deref().unwrap_or("-");
            out.push_str(format!("{server}  {}  {}  {mime}", item.uri, item.name).trim_end());
            out.push('\n');
        }
        for Offered { server, item } in &templates {
            out.push_str(
                format!("{server}  {}  {}  (template)", item.uri_template, item.name).trim_end(),
            );
            out.push('\n');
        }
        if out.is_empty() {
            eprintln!("No resources.");
        }
        emit(&out);
    }
    print_errors(&errors)
}

pub(super) fn read(
    config: Config,
    server: &str,
    uri: &str,
    raw: bool,
    json: bool,
    signals: &SignalWatch,
) -> u8 {
    let hub = match connected_hub(config, Some(server), signals) {
        Ok(hub) => hub,
        Err(code) => return code,
    };
    let contents = match hub.read_resource(server, uri) {
        Ok(contents) => contents,
        Err(err) => return report(&err),
    };
    if json {
        emit(&format!("{}\n", serde_json::to_string_pretty(&contents).unwrap_or_default()));
        return EXIT_OK;
    }
    for item in &contents {
        match (&item.text, &item.blob) {
            (Some(text), _) => {
                emit(text);
                if !text.ends_with('\n') {
                    emit("\n");
                }
            }
            (None, Some(blob)) => {
                let bytes = match decode_base64(blob) {
                    Some(bytes) => bytes,
                    None => {
                        eprintln!(
                            "error: server {server:?} sent a blob that is not base64 for {}",
                            item.uri
                        );
                        return EXIT_SERVER;
                    }
                };
                if raw {
                    let mut stdout = io::stdout().lock();
                    if stdout.write_all(&bytes).and_then(|()| stdout.flush()).is_err() {
                        return EXIT_OK;
                    }
                    continue;
                }
                match save_blob(&item.uri, &bytes) {
                    Ok(path) => {
                        let mime = item.mime_type.as_deref().unwrap_or("binary");
                        emit(&format!(
                            "{} ({mime}, {} bytes) saved to {}\n",
                            item.uri,
                            bytes.len(),
                            path.display()
                        ));
                    }
                    Err(err) => {
                        eprintln!("error: cannot save {}: {err}", item.uri);
                        return EXIT_USAGE;
                    }
                }
            }
            (None, None) => emit(&format!("{} (empty)\n", item.uri)),
        }
    }
    EXIT_OK
}

/// Saves a binary resource under the temporary folder, named after its URI.
fn save_blob(uri: &str, bytes: &[u8]) -> io::Result<PathBuf> {
    let folder = private_folder()?;
    let name: String = uri
        .rsplit('/')
        .find(|part| !part.is_empty())
        .unwrap_or("resource")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || ".-_".contains(c) { c } else { '_' })
        .collect();
    let path = folder.join(if name.is_empty() { "resource".to_owned() } else { name });
    // A new file in a folder only we can write: nothing planted is followed.
    let mut file = fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path)?;
    file.write_all(bytes)?;
    Ok(path)
}

/// A new folder under the temporary folder, mode 0700; never one that exists.
fn private_folder() -> io::Result<PathBuf> {
    let base = std::env::temp_dir();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    for attempt in 0..100u32 {
        let folder = base.join(format!("tether-read-{}-{nanos:x}-{attempt}", std::process::id()));
        match fs::DirBuilder::new().mode(0o700).create(&folder) {
            Ok(()) => return Ok(folder),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(err),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "no free folder name under the temporary folder",
    ))
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
        emit(&format!("{}\n", serde_json::to_string_pretty(&prompts).unwrap_or_default()));
    } else {
        let mut out = String::new();
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
            out.push_str(
                format!("{server}  {} {}  {description}", item.name, arguments.join(" "))
                    .trim_end(),
            );
            out.push('\n');
        }
        if out.is_empty() {
            eprintln!("No prompts.");
        }
        emit(&out);
    }
    print_errors(&errors)
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
    match hub.get_prompt(server, name, arguments) {
        Ok(result) if json => {
            emit(&format!("{}\n", serde_json::to_string_pretty(&result).unwrap_or_default()));
            EXIT_OK
        }
        Ok(result) => {
            let mut out = String::new();
            for message in &result.messages {
                let role = message.get("role").and_then(Value::as_str).unwrap_or("?");
                let content = message.get("content").cloned().unwrap_or(Value::Null);
                let text =
                    tether::ToolResult { raw: serde_json::json!({"content": [content]}) }.to_text();
                out.push_str(&format!("{role}: {text}\n"));
            }
            emit(&out);
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
}
