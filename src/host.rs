//! What the host answers when a server asks the client something.
//!
//! Servers may send requests back (`roots/list`, `sampling/createMessage`,
//! `elicitation/create`). The host decides; tether only carries the answer.
//! A capability is declared in `initialize` only when the host says it handles
//! it, so a host that installs nothing declares only roots (an empty list).

use serde::Serialize;
use serde_json::{json, Value};

use crate::jsonrpc::{Notification, RpcError, METHOD_NOT_FOUND};

/// A root: a directory or file the host lets servers work within.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Root {
    /// A `file://` URI.
    pub uri: String,
    /// A display name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Root {
    /// A root with no display name; `uri` is a `file://` URI.
    pub fn new(uri: &str) -> Root {
        Root { uri: uri.to_owned(), name: None }
    }

    /// A root for a local folder: its absolute path as a `file://` URI
    /// (percent-encoded), named after the folder.
    pub fn for_folder(folder: &std::path::Path) -> Root {
        use std::os::unix::ffi::OsStrExt;
        let mut uri = String::from("file://");
        for &byte in folder.as_os_str().as_bytes() {
            if byte.is_ascii_alphanumeric() || b"/-._~".contains(&byte) {
                uri.push(char::from(byte));
            } else {
                uri.push_str(&format!("%{byte:02X}"));
            }
        }
        let name = folder.file_name().map(|name| name.to_string_lossy().into_owned());
        Root { uri, name }
    }

    /// The same root with a display name.
    pub fn with_name(mut self, name: &str) -> Root {
        self.name = Some(name.to_owned());
        self
    }
}

/// The host's side of server→client requests and notifications.
///
/// Every method has a default: no roots, sampling and elicitation declined,
/// notifications ignored. Notifications and stderr lines come on the
/// connection's `{server}-events` thread, one at a time, in the order they
/// arrived; each request of the server's (roots, sampling, elicitation)
/// comes on a `{server}-asked` thread of its own, never on the reader, so a
/// slow answer (a person typing) holds up neither a response to another
/// request nor the server's other requests: up to 8 of one server's may be
/// asked at once. Threads come and go, so two calls may come on different
/// OS threads: keep no thread-local state across them. With a stateless
/// (2026-07-28) server, elicitation, sampling and roots are asked on the
/// thread of the call that needs them instead.
pub trait Host: Send + Sync {
    /// The roots reported for `roots/list`.
    fn roots(&self) -> Vec<Root> {
        Vec::new()
    }

    /// Whether `sampling/createMessage` is handled (declares the capability).
    fn handles_sampling(&self) -> bool {
        false
    }

    /// Answers `sampling/createMessage` from `server`.
    ///
    /// # Errors
    /// The JSON-RPC error to send back; the default declines.
    fn create_message(&self, server: &str, params: &Value) -> Result<Value, RpcError> {
        let _ = (server, params);
        Err(declined("sampling"))
    }

    /// Whether `elicitation/create` is handled (declares the capability).
    fn handles_elicitation(&self) -> bool {
        false
    }

    /// Which elicitation modes are handled, when elicitation is: forms
    /// (`form`, the default) and URLs to open (`url`, the default).
    fn elicitation_modes(&self) -> ElicitationModes {
        ElicitationModes { form: true, url: true }
    }

    /// Whether a sampling request may give the model tools (declares
    /// `sampling.tools`; off by default).
    fn sampling_with_tools(&self) -> bool {
        false
    }

    /// Answers `elicitation/create` from `server`.
    ///
    /// # Errors
    /// The JSON-RPC error to send back; the default declines.
    fn elicit(&self, server: &str, params: &Value) -> Result<Value, RpcError> {
        let _ = (server, params);
        Err(declined("elicitation"))
    }

    /// The server gave up its own request that [`Host::elicit`] or
    /// [`Host::create_message`] is answering now (`method` names which):
    /// stop asking the person or the model and return anything, which is
    /// not sent. Called on the connection's reader thread while that call
    /// runs on another, so it must not block: set a flag, wake a prompt. A
    /// request the server gives up before the host sees it never reaches
    /// the host. (Only handshake-era servers do this; the notification
    /// also reaches [`Host::notification`].)
    fn cancelled(&self, server: &str, method: &str, reason: Option<&str>) {
        let _ = (server, method, reason);
    }

    /// Sees every notification that is not a response's progress, nor a
    /// log message a call took ([`Host::log_taken`]).
    fn notification(&self, server: &str, notification: &Notification) {
        let _ = (server, notification);
    }

    /// Sees a log message (`notifications/message`) that a call took
    /// ([`crate::CallOptions::with_log`]) after the call's callback had it,
    /// on the events thread. By default it is seen as every other
    /// notification is ([`Host::notification`]); a host that passes log
    /// messages on to several parties may leave this one to the call's.
    fn log_taken(&self, server: &str, notification: &Notification) {
        self.notification(server, notification);
    }

    /// Sees each line a stdio server writes to its stderr (without the line
    /// break; invalid UTF-8 replaced; at most 200 lines a second, the rest
    /// summed up in one line). Runs on the connection's events thread, in
    /// the order lines and messages arrived (stderr and stdout are separate
    /// pipes, so only that): the pipe is drained meanwhile, but a slow
    /// handler holds up the notifications behind it (and the handing on of
    /// requests), and past 256 waiting lines the rest are dropped (the
    /// stderr tail keeps the last 64 KiB), so keep it quick (append to a
    /// file, say).
    fn stderr(&self, server: &str, line: &str) {
        let _ = (server, line);
    }
}

/// What an `elicitation/create` asks, read from its parameters: for a
/// [`Host::elicit`] that shows it to a person.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Elicitation<'a> {
    /// What to tell the person.
    pub message: &'a str,
    /// `form` (the default) or `url`.
    pub mode: &'a str,
    /// Form mode: the JSON Schema of what to ask (`requestedSchema`).
    pub schema: Option<&'a Value>,
    /// URL mode: the page to open.
    pub url: Option<&'a str>,
    /// URL mode: the server's id for it, which a later
    /// `notifications/elicitation/complete` names (that notification
    /// reaches [`Host::notification`] for ids asked on this connection only).
    pub elicitation_id: Option<&'a str>,
}

impl<'a> Elicitation<'a> {
    /// Reads an `elicitation/create` request's parameters.
    pub fn of(params: &'a Value) -> Elicitation<'a> {
        let text = |name: &str| params.get(name).and_then(Value::as_str);
        Elicitation {
            message: text("message").unwrap_or(""),
            mode: text("mode").unwrap_or("form"),
            schema: params.get("requestedSchema"),
            url: text("url"),
            elicitation_id: text("elicitationId"),
        }
    }
}

/// A person's answer to an elicitation, as [`Host::elicit`] returns it
/// ([`Elicited::into_result`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Elicited {
    /// They answered: the form's values (`{}` in URL mode).
    Accept(Value),
    /// They said no.
    Decline,
    /// They went away without answering.
    Cancel,
}

impl Elicited {
    /// The result to send back: `{"action": …, "content": …}`.
    pub fn into_result(self) -> Value {
        match self {
            Elicited::Accept(content) => json!({"action": "accept", "content": content}),
            Elicited::Decline => json!({"action": "decline"}),
            Elicited::Cancel => json!({"action": "cancel"}),
        }
    }
}

/// A `sampling/createMessage` result of plain text, from `model`, as
/// [`Host::create_message`] returns it.
pub fn sampled_text(model: &str, text: &str) -> Value {
    json!({
        "role": "assistant",
        "content": {"type": "text", "text": text},
        "model": model,
        "stopReason": "endTurn",
    })
}

/// A host that takes every default.
#[derive(Debug, Default, Clone, Copy)]
pub struct DefaultHost;

impl Host for DefaultHost {}

fn declined(what: &str) -> RpcError {
    RpcError {
        code: METHOD_NOT_FOUND,
        message: format!("this client does not support {what}"),
        data: None,
    }
}

/// The elicitation modes a [`Host`] handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ElicitationModes {
    /// A form, from a schema.
    pub form: bool,
    /// A URL the person opens.
    pub url: bool,
}

impl ElicitationModes {
    /// Forms and URLs as given.
    pub fn new(form: bool, url: bool) -> ElicitationModes {
        ElicitationModes { form, url }
    }
}

/// The `capabilities` object tether declares for this host, with what the
/// host's options add (`extra`: `experimental` and `extensions`, each
/// when given).
pub(crate) fn client_capabilities(host: &dyn Host, extra: [(&str, Option<&Value>); 2]) -> Value {
    // The host may change its roots; `Hub::notify_roots_changed` says so.
    let mut capabilities = json!({"roots": {"listChanged": true}});
    if host.handles_sampling() {
        capabilities["sampling"] =
            if host.sampling_with_tools() { json!({"tools": {}}) } else { json!({}) };
    }
    let modes = host.elicitation_modes();
    if host.handles_elicitation() && (modes.form || modes.url) {
        let mut elicitation = json!({});
        if modes.form {
            elicitation["form"] = json!({});
        }
        if modes.url {
            elicitation["url"] = json!({});
        }
        capabilities["elicitation"] = elicitation;
    }
    for (key, value) in extra {
        if let Some(value) = value {
            capabilities[key] = value.clone();
        }
    }
    capabilities
}

/// Answers one server→client request.
pub(crate) fn answer(
    host: &dyn Host,
    server: &str,
    method: &str,
    params: &Value,
) -> Result<Value, RpcError> {
    match method {
        "roots/list" => Ok(json!({"roots": host.roots()})),
        "sampling/createMessage" => host.create_message(server, params),
        "elicitation/create" => host.elicit(server, params),
        other => Err(RpcError {
            code: METHOD_NOT_FOUND,
            message: format!("method not found: {other}"),
            data: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elicitations_read_and_answers_are_made() {
        let params = json!({"message": "Name?", "requestedSchema": {"type": "object"}});
        let asked = Elicitation::of(&params);
        assert_eq!((asked.message, asked.mode, asked.url), ("Name?", "form", None));
        assert_eq!(asked.schema, Some(&json!({"type": "object"})));
        let answer = Elicited::Accept(json!({"name": "Ada"})).into_result();
        assert_eq!(answer, json!({"action": "accept", "content": {"name": "Ada"}}));
        assert_eq!(Elicited::Decline.into_result(), json!({"action": "decline"}));
        assert_eq!(sampled_text("m", "hi")["content"]["text"], "hi");
    }

    #[test]
    fn a_folder_root_is_a_percent_encoded_file_uri() {
        let root = Root::for_folder(std::path::Path::new("/home/ada/my project/ü"));
        assert_eq!(root.uri, "file:///home/ada/my%20project/%C3%BC");
        assert_eq!(root.name.as_deref(), Some("ü"));
    }
}
