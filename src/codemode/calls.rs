//! A script's calls: what it asked for, how each is made through the
//! `ScriptHost`, and the `codemode-call-N` threads that make calls started
//! together.
//!
//! Nothing here touches the engine: a call is plain data going in (a
//! [`Request`]) and plain data coming out (a [`Done`]), so a worker thread
//! never sees a JavaScript value. Workers are started only when a second
//! call is in flight (one call at a time is made on the engine's own
//! thread, saving two thread switches), at most the in-flight limit, and
//! are joined when the script ends; by then every call in flight has been
//! cancelled, so the join waits for nothing a server controls beyond its
//! answer to the cancellation.

use std::thread::{self, Scope};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use serde_json::{json, Map, Value};

use super::{ScriptErrorKind, ScriptHost};
use crate::client::CallOptions;
use crate::error::Error;

/// What a script asked for.
#[derive(Debug, Clone)]
pub(super) enum Request {
    /// `tools.<name>(arguments)`.
    Tool { name: String, arguments: Value },
    /// `readResource(server, uri)`.
    Read { server: String, uri: String },
    /// `listResources({server})`.
    List { server: Option<String> },
}

impl Request {
    /// The name a call is recorded under.
    pub(super) fn name(&self) -> &str {
        match self {
            Request::Tool { name, .. } => name,
            Request::Read { .. } => "readResource",
            Request::List { .. } => "listResources",
        }
    }

    /// The arguments a call is recorded with, taken from it.
    pub(super) fn into_arguments(self) -> Value {
        match self {
            Request::Tool { arguments, .. } => arguments,
            other => other.arguments(),
        }
    }

    /// The arguments a call is recorded with.
    pub(super) fn arguments(&self) -> Value {
        match self {
            Request::Tool { arguments, .. } => arguments.clone(),
            Request::Read { uri, .. } => json!({ "uri": uri }),
            Request::List { .. } => json!({}),
        }
    }
}

/// A call handed to a worker.
pub(super) struct Job {
    pub(super) id: u32,
    pub(super) request: Request,
    pub(super) options: CallOptions,
}

/// A call that ended.
pub(super) struct Done {
    pub(super) id: u32,
    pub(super) outcome: Result<Value, Error>,
    pub(super) elapsed: Duration,
}

/// Makes one call through the host: what the script gets back, as JSON.
pub(super) fn perform(
    host: &dyn ScriptHost,
    request: &Request,
    options: &CallOptions,
) -> Result<Value, Error> {
    match request {
        Request::Tool { name, arguments } => {
            host.call_tool(name, arguments.clone(), options).map(|result| for_script(result.raw))
        }
        Request::Read { server, uri } => {
            let contents = host.read_resource(server, uri, options)?;
            Ok(json!({ "server": server, "uri": uri, "contents": contents }))
        }
        Request::List { server } => {
            let (resources, errors) = host.list_resources(server.as_deref(), options)?;
            if resources.is_empty() {
                if let Some(first) = errors.into_iter().next() {
                    return Err(first);
                }
            }
            let listed: Vec<Value> = resources
                .into_iter()
                .map(|(server, resource)| {
                    let mut shown = serde_json::to_value(resource).unwrap_or_else(|_| json!({}));
                    if let Some(fields) = shown.as_object_mut() {
                        fields.insert("server".to_owned(), Value::String(server));
                    }
                    shown
                })
                .collect();
            Ok(Value::Array(listed))
        }
    }
}

/// The prefix of the `_meta` keys MCP itself reserves.
const RESERVED_META: &str = "io.modelcontextprotocol/";

/// A tool's result as the script gets it: the complete result as the tool
/// made it, without what the protocol added on the way. `content` comes
/// first (an empty list when the server sent none), each block with its
/// `type` first; `isError` only when it is true; no `resultType` (the
/// stateless revision's word for the answer's kind, which tether has read)
/// and no `io.modelcontextprotocol/` keys in `_meta` (its server info). So a
/// plain success reads `{"content":[{"type":"text","text":"4"}]}` from a
/// server of either era.
pub(super) fn for_script(raw: Value) -> Value {
    let Value::Object(fields) = raw else {
        return json!({ "content": [] });
    };
    let mut shaped = Map::with_capacity(fields.len());
    shaped.insert("content".to_owned(), json!([]));
    for (key, value) in fields {
        match (key.as_str(), value) {
            ("content", Value::Array(blocks)) => {
                shaped["content"] = Value::Array(blocks.into_iter().map(type_first).collect());
            }
            ("content", other) => shaped["content"] = other,
            ("resultType", _) => {}
            ("isError", value) if value != Value::Bool(true) => {}
            ("_meta", Value::Object(meta)) => {
                let kept: Map<String, Value> =
                    meta.into_iter().filter(|(key, _)| !key.starts_with(RESERVED_META)).collect();
                if !kept.is_empty() {
                    shaped.insert(key, Value::Object(kept));
                }
            }
            (_, value) => {
                shaped.insert(key, value);
            }
        }
    }
    Value::Object(shaped)
}

/// A content block with its `type` first, the rest in the server's order
/// (as it came when `type` is first already, as most servers send it).
fn type_first(block: Value) -> Value {
    match block {
        Value::Object(fields)
            if fields.contains_key("type") && fields.keys().next().is_some_and(|k| k != "type") =>
        {
            let mut ordered = Map::with_capacity(fields.len());
            ordered.insert("type".to_owned(), Value::Null);
            for (key, value) in fields {
                ordered.insert(key, value);
            }
            Value::Object(ordered)
        }
        other => other,
    }
}

/// The kind the script's error gets when a call fails this way.
pub(super) fn failure_kind(error: &Error) -> ScriptErrorKind {
    match error.root() {
        Error::UnknownTool(_) => ScriptErrorKind::UnknownTool,
        Error::Timeout(_) => ScriptErrorKind::Timeout,
        Error::Cancelled => ScriptErrorKind::Cancelled,
        _ => ScriptErrorKind::ToolFailed,
    }
}

/// The `codemode-call-N` threads of one script, started as needed.
pub(super) struct Workers<'scope, 'env> {
    scope: &'scope Scope<'scope, 'env>,
    host: &'env dyn ScriptHost,
    jobs: Option<Sender<Job>>,
    job_queue: Receiver<Job>,
    done_tx: Sender<Done>,
    /// Where ended calls arrive.
    pub(super) done: Receiver<Done>,
    started: usize,
}

impl<'scope, 'env> Workers<'scope, 'env> {
    pub(super) fn new(scope: &'scope Scope<'scope, 'env>, host: &'env dyn ScriptHost) -> Self {
        let (jobs, job_queue) = crossbeam_channel::unbounded();
        let (done_tx, done) = crossbeam_channel::unbounded();
        Workers { scope, host, jobs: Some(jobs), job_queue, done_tx, done, started: 0 }
    }

    /// Hands a call to a worker, starting one when all `busy` are busy.
    /// Falls back to making it on this thread if no thread can be had.
    pub(super) fn send(&mut self, job: Job, busy: usize) {
        if self.started <= busy {
            let job_queue = self.job_queue.clone();
            let done = self.done_tx.clone();
            let host = self.host;
            let spawned = thread::Builder::new()
                .name(format!("codemode-call-{}", self.started + 1))
                .spawn_scoped(self.scope, move || {
                    for job in job_queue {
                        let began = Instant::now();
                        let outcome = perform(host, &job.request, &job.options);
                        let ended = Done { id: job.id, outcome, elapsed: began.elapsed() };
                        if done.send(ended).is_err() {
                            break;
                        }
                    }
                });
            match spawned {
                Ok(_) => self.started += 1,
                Err(err) if self.started == 0 => {
                    log::warn!("codemode: no thread for a call ({err}); making it in turn");
                    let began = Instant::now();
                    let outcome = perform(self.host, &job.request, &job.options);
                    let ended = Done { id: job.id, outcome, elapsed: began.elapsed() };
                    let _ = self.done_tx.send(ended);
                    return;
                }
                // The workers there are will take it.
                Err(_) => {}
            }
        }
        if let Some(jobs) = &self.jobs {
            let _ = jobs.send(job);
        }
    }

    /// No more calls: the workers end after the ones they are making.
    pub(super) fn close(&mut self) {
        self.jobs = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_success_reads_as_its_content_only() {
        let raw = json!({"content": [{"type": "text", "text": "4"}], "isError": false});
        assert_eq!(for_script(raw).to_string(), r#"{"content":[{"type":"text","text":"4"}]}"#);
    }

    #[test]
    fn what_the_stateless_revision_adds_is_left_out() {
        let raw = json!({"content": [{"text": "4", "type": "text"}], "resultType": "complete",
                         "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "w"}}});
        assert_eq!(for_script(raw).to_string(), r#"{"content":[{"type":"text","text":"4"}]}"#);
        let raw = json!({"content": [], "_meta": {"io.modelcontextprotocol/x": 1, "trace": "t"}});
        assert_eq!(for_script(raw).to_string(), r#"{"content":[],"_meta":{"trace":"t"}}"#);
    }

    #[test]
    fn everything_else_of_the_result_is_kept() {
        let raw = json!({"structuredContent": {"n": 4}, "isError": true, "_meta": {"k": 1}});
        assert_eq!(
            for_script(raw).to_string(),
            r#"{"content":[],"structuredContent":{"n":4},"isError":true,"_meta":{"k":1}}"#
        );
        assert_eq!(for_script(json!("odd")), json!({"content": []}));
    }
}
