//! `tether watch SERVER URI`: a resource's changes as they come.
//!
//! The hub subscribes to the resource (`Hub::subscribe_resource`, which
//! keeps the subscription across reconnects); the command's host, wrapped,
//! hands each `notifications/resources/updated` for it to this thread over
//! a channel, and the thread prints a line for each (and, with `--read`,
//! the resource as it is then). A server that stops is connected again,
//! which subscribes again. Ctrl-C ends it as every command is ended.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use serde_json::{json, Value};

use tether::{Config, Host, Notification, Root, RpcError, ServerState};

use super::escape;
use super::output::{emit, emit_body, emit_json_line, report, EXIT_OK};
use super::signals::SignalWatch;
use super::starting::connected_hub;

/// How often the server's state is looked at while no update comes.
const LOOK: Duration = Duration::from_secs(1);

/// The command's host, which also hands on the updates of one resource.
struct Watching {
    inner: Arc<dyn Host>,
    server: String,
    uri: String,
    updates: Sender<Value>,
}

impl Host for Watching {
    fn roots(&self) -> Vec<Root> {
        self.inner.roots()
    }

    fn handles_sampling(&self) -> bool {
        self.inner.handles_sampling()
    }

    fn create_message(&self, server: &str, params: &Value) -> Result<Value, RpcError> {
        self.inner.create_message(server, params)
    }

    fn handles_elicitation(&self) -> bool {
        self.inner.handles_elicitation()
    }

    fn elicit(&self, server: &str, params: &Value) -> Result<Value, RpcError> {
        self.inner.elicit(server, params)
    }

    fn cancelled(&self, server: &str, method: &str, reason: Option<&str>) {
        self.inner.cancelled(server, method, reason);
    }

    fn notification(&self, server: &str, notification: &Notification) {
        let params = notification.params.clone().unwrap_or(Value::Null);
        if notification.method == "notifications/resources/updated"
            && Config::same_name(server, &self.server)
            && params.get("uri").and_then(Value::as_str) == Some(self.uri.as_str())
        {
            let _ = self.updates.try_send(params);
        }
        self.inner.notification(server, notification);
    }

    fn stderr(&self, server: &str, line: &str) {
        self.inner.stderr(server, line);
    }
}

pub(super) fn watch(
    config: Config,
    (server, uri): (&str, &str),
    count: Option<usize>,
    (read, json): (bool, bool),
    signals: &mut SignalWatch,
) -> u8 {
    let (updates, updated) = crossbeam_channel::bounded(256);
    let host = Arc::new(Watching {
        inner: Arc::clone(&signals.options.host),
        server: server.to_owned(),
        uri: uri.to_owned(),
        updates,
    });
    signals.options = signals.options.clone().with_host(host);
    let hub = match connected_hub(config, Some(server), signals) {
        Ok(hub) => hub,
        Err(code) => return code,
    };
    if let Err(err) = hub.subscribe_resource(server, uri) {
        let code = report(&err);
        if matches!(err.root(), tether::Error::Rpc(rpc) if rpc.code == -32601) {
            detail!("hint: {server} offers no resource subscriptions (resources.subscribe)");
        }
        return code;
    }
    if !json {
        eprintln!("watching {} on {server} (Ctrl-C to stop)", escape::escaped(uri));
    }
    print_updates(&hub, (server, uri), &updated, count, (read, json))
}

/// Prints each update until `count` came; connects the server again when
/// it stopped.
fn print_updates(
    hub: &tether::Hub,
    (server, uri): (&str, &str),
    updated: &Receiver<Value>,
    count: Option<usize>,
    (read, json): (bool, bool),
) -> u8 {
    let mut seen = 0usize;
    while count.is_none_or(|count| seen < count) {
        let params = match updated.recv_timeout(LOOK) {
            Ok(params) => params,
            Err(RecvTimeoutError::Timeout) => {
                let lost = hub.status().iter().any(|status| {
                    Config::same_name(&status.name, server) && status.state != ServerState::Ready
                });
                // Connected again, it is subscribed again (the hub keeps it).
                if lost && hub.client(server).is_ok() {
                    eprintln!("note: {server} was connected again");
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => return EXIT_OK,
        };
        seen += 1;
        let at = tether::for_cli::rfc3339(SystemTime::now());
        let contents =
            read.then(|| hub.read_resource(server, uri, &tether::CallOptions::default()));
        if json {
            let mut line = json!({"at": at, "uri": uri});
            if let Some(title) = params.get("title") {
                line["title"] = title.clone();
            }
            match contents {
                Some(Ok(contents)) => line["contents"] = json!(contents),
                Some(Err(err)) => line["error"] = json!(err.to_string()),
                None => {}
            }
            emit_json_line(&line);
        } else {
            emit(&format!("{at}  updated  {}\n", escape::escaped(uri)));
            match contents {
                Some(Ok(contents)) => {
                    for content in contents {
                        if let Some(text) = content.text.as_deref() {
                            emit_body(text);
                            if !text.ends_with('\n') {
                                emit("\n");
                            }
                        }
                    }
                }
                Some(Err(err)) => {
                    report(&err);
                }
                None => {}
            }
        }
    }
    EXIT_OK
}
