//! An in-memory transport, for the client's unit tests: no process, no
//! socket. What the client sends arrives on a channel as typed frames, and
//! the test plays the server by delivering messages into the client's inbox
//! from its own thread, as a reader thread would.

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use serde_json::Value;

use crate::error::CloseReason;
use crate::jsonrpc::{Frame, Message};
use crate::sync::lock;
use crate::transport::outbox::Closed;
use crate::transport::{Endpoint, Inbox, Outlet, Traits};

/// How long a test waits for the client to send something.
const WAIT: Duration = Duration::from_secs(5);

/// The server's end of an in-memory connection.
pub(crate) struct MemoryServer {
    frames: Receiver<Frame>,
    inbox: Arc<Mutex<Option<Arc<dyn Inbox>>>>,
}

struct MemoryOutlet {
    frames: Sender<Frame>,
}

struct MemoryEndpoint {
    inbox: Arc<Mutex<Option<Arc<dyn Inbox>>>>,
}

/// Starts an in-memory transport delivering into `inbox`; returns its
/// endpoint (for the client) and the server's end (for the test).
pub(crate) fn open(inbox: Arc<dyn Inbox>) -> (Box<dyn Endpoint>, MemoryServer) {
    let (sender, frames) = crossbeam_channel::unbounded();
    inbox.attach(Arc::new(MemoryOutlet { frames: sender }));
    let inbox = Arc::new(Mutex::new(Some(inbox)));
    (Box::new(MemoryEndpoint { inbox: Arc::clone(&inbox) }), MemoryServer { frames, inbox })
}

impl MemoryServer {
    /// The next message the client sent, as JSON; panics after 5 s.
    pub(crate) fn next(&self) -> Value {
        let frame = self.frames.recv_timeout(WAIT).expect("the client sent a message");
        serde_json::from_slice(&frame.bytes).expect("the client sent JSON")
    }

    /// True when the client sends nothing within `wait`.
    pub(crate) fn is_quiet_for(&self, wait: Duration) -> bool {
        self.frames.recv_timeout(wait).is_err()
    }

    /// Delivers a message from the server, as the reader thread would.
    pub(crate) fn send(&self, message: Value) {
        let message = Message::parse(message.to_string().as_bytes()).expect("a JSON-RPC message");
        if let Some(inbox) = lock(&self.inbox).clone() {
            inbox.deliver(message);
        }
    }

    /// Answers request `id` with `result`.
    /// Fails a request as a broken response stream does (the transport
    /// lost its answer).
    pub(crate) fn lose(&self, id: &Value, method: &str) {
        let id = id.as_i64().expect("tether's ids are numbers");
        if let Some(inbox) = lock(&self.inbox).clone() {
            inbox.failed(id, crate::error::Error::ResponseLost { method: method.to_owned() });
        }
    }

    /// Answers a request with a JSON-RPC error.
    pub(crate) fn fail(&self, id: &Value, code: i64, message: &str, data: Option<Value>) {
        let mut error = serde_json::json!({"code": code, "message": message});
        if let Some(data) = data {
            error["data"] = data;
        }
        self.send(serde_json::json!({"jsonrpc": "2.0", "id": id, "error": error}));
    }

    pub(crate) fn answer(&self, id: &Value, result: Value) {
        self.send(serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    /// The connection ends, for this reason.
    pub(crate) fn close(&self, reason: CloseReason) {
        if let Some(inbox) = lock(&self.inbox).take() {
            inbox.closed(reason);
        }
    }
}

impl Outlet for MemoryOutlet {
    fn send(&self, frame: Frame) -> Result<(), Closed> {
        self.frames.send(frame).map_err(|_| Closed)
    }
}

impl Endpoint for MemoryEndpoint {
    fn close(&self) -> io::Result<()> {
        lock(&self.inbox).take();
        Ok(())
    }

    fn stderr_tail(&self, _wait_for_end: Duration) -> Option<String> {
        None
    }

    fn traits(&self) -> Traits {
        Traits { name: "memory", carries_stateless: true, ..Traits::default() }
    }
}
