//! JSON-RPC 2.0 messages, as MCP uses them.
//!
//! Knows nothing of MCP methods. Incoming bytes are classified once into
//! [`Message`]; outgoing messages are encoded straight from borrowed parts into
//! bytes, so the per-call path never clones a request's arguments.

use std::borrow::Cow;
use std::fmt;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A request id: MCP allows numbers and strings (never null).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    /// A numeric id; tether's own requests use these.
    Number(i64),
    /// A string id.
    String(String),
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpcError {
    /// The error code (`-32601` method not found, …).
    pub code: i64,
    /// A short description from the server.
    #[serde(default)]
    pub message: String,
    /// Extra information from the server, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// A request from the other side, which expects a response.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The id to answer with.
    pub id: RequestId,
    /// The method name.
    pub method: String,
    /// The parameters, if any.
    pub params: Option<Value>,
}

/// A notification: no response expected.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    /// The method name.
    pub method: String,
    /// The parameters, if any.
    pub params: Option<Value>,
}

/// A response to one of our requests.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The id of the request it answers.
    pub id: RequestId,
    /// The result, or the error the server returned.
    pub outcome: Result<Value, RpcError>,
}

/// One incoming message, classified.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A server→client request.
    Request(Request),
    /// A notification.
    Notification(Notification),
    /// A response to a request of ours.
    Response(Response),
}

/// The JSON-RPC error code for an unknown method.
pub const METHOD_NOT_FOUND: i64 = -32601;

/// The JSON-RPC error code for parameters the receiver refuses.
pub(crate) const INVALID_PARAMS: i64 = -32602;

#[derive(Deserialize)]
struct Incoming {
    #[serde(default)]
    jsonrpc: Option<Version>,
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<Value>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

/// The most JSON values one frame may hold to be parsed whole. Parsed, a
/// value costs 30 to 110 bytes (a `Value`, a map entry, a key), against 2
/// to 8 in the text: a 16 MiB frame of tiny objects would cost some 500 MB.
/// At this bound a frame costs at most some 30 MB once parsed, and a real
/// answer (a thousand tools with their schemas) is a tenth of it.
pub const MAX_FRAME_VALUES: usize = 500_000;

/// The skeleton of a frame too big to parse whole: what it answers.
#[derive(Deserialize)]
struct Skeleton {
    #[serde(default)]
    id: Option<IdField>,
    #[serde(default)]
    method: Option<IgnoredAny>,
}

/// A frame's `jsonrpc` member: whether it is exactly `"2.0"`, read without
/// keeping it.
struct Version(bool);

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Seen;
        impl<'de> serde::de::Visitor<'de> for Seen {
            type Value = Version;
            fn expecting(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
                out.write_str("a JSON-RPC version")
            }
            fn visit_str<E>(self, text: &str) -> Result<Version, E> {
                Ok(Version(text == "2.0"))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Version, E> {
                Ok(Version(false))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Version, E> {
                Ok(Version(false))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Version, E> {
                Ok(Version(false))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Version, E> {
                Ok(Version(false))
            }
            fn visit_unit<E>(self) -> Result<Version, E> {
                Ok(Version(false))
            }
            // Skipped as they are read: any value is read, only "2.0" is it.
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Version, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Version(false))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Version, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Version(false))
            }
        }
        deserializer.deserialize_any(Seen)
    }
}

/// A frame's `id`, read without building what it holds: a number or a
/// string is kept; anything else (an object or an array, which in a
/// hostile frame may be megabytes of values) is skipped as it is read.
pub(crate) struct IdField(pub(crate) Option<RequestId>);

impl<'de> Deserialize<'de> for IdField {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Seen;
        impl<'de> serde::de::Visitor<'de> for Seen {
            type Value = IdField;
            fn expecting(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
                out.write_str("a JSON-RPC id")
            }
            fn visit_i64<E>(self, n: i64) -> Result<IdField, E> {
                Ok(IdField(Some(RequestId::Number(n))))
            }
            fn visit_u64<E>(self, n: u64) -> Result<IdField, E> {
                Ok(IdField(i64::try_from(n).ok().map(RequestId::Number)))
            }
            fn visit_f64<E>(self, _: f64) -> Result<IdField, E> {
                Ok(IdField(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<IdField, E> {
                Ok(IdField(None))
            }
            fn visit_unit<E>(self) -> Result<IdField, E> {
                Ok(IdField(None))
            }
            fn visit_str<E>(self, text: &str) -> Result<IdField, E> {
                Ok(IdField(Some(RequestId::String(text.to_owned()))))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<IdField, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(IdField(None))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<IdField, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(IdField(None))
            }
        }
        deserializer.deserialize_any(Seen)
    }
}

/// Follows a JSON text byte by byte, telling the bytes inside strings
/// (escapes included) from those outside.
#[derive(Default)]
pub(crate) struct Strings {
    inside: bool,
    escaped: bool,
}

impl Strings {
    /// True when `byte` stands outside every string; a quote that opens or
    /// closes one counts as inside.
    pub(crate) fn outside(&mut self, byte: u8) -> bool {
        if self.inside {
            if self.escaped {
                self.escaped = false;
            } else if byte == b'\\' {
                self.escaped = true;
            } else if byte == b'"' {
                self.inside = false;
            }
            false
        } else if byte == b'"' {
            self.inside = true;
            false
        } else {
            true
        }
    }
}

/// About how many JSON values `bytes` holds (containers, members and
/// elements: each `{`, `[`, `:` and `,` outside strings), counted up to
/// `limit + 1`.
fn value_count(bytes: &[u8], limit: usize) -> usize {
    let mut count = 0;
    let mut strings = Strings::default();
    for &byte in bytes {
        if !strings.outside(byte) {
            continue;
        }
        match byte {
            b'{' | b'[' | b':' | b',' => {
                count += 1;
                if count > limit {
                    return count;
                }
            }
            _ => {}
        }
    }
    count
}

impl Message {
    /// Parses one frame's bytes; bytes that are not UTF-8 read as U+FFFD.
    /// A response of more than [`MAX_FRAME_VALUES`] values is not parsed
    /// whole: it becomes an error for the request it answers.
    ///
    /// # Errors
    /// A description of what is wrong, for the log: not JSON, or a JSON
    /// value that is not a JSON-RPC message (a batch, a bad id, …), or a
    /// request or notification too big to parse.
    pub fn parse(bytes: &[u8]) -> Result<Message, String> {
        Message::parse_with(bytes, false)
    }

    /// [`Message::parse`] that also refuses a request or notification
    /// whose `jsonrpc` is not `"2.0"`: what a server (`tether serve`) takes
    /// from its client. A client stays lenient with its servers, whose
    /// requests would otherwise go unanswered.
    #[cfg_attr(not(feature = "serve"), allow(dead_code))]
    pub(crate) fn parse_strict(bytes: &[u8]) -> Result<Message, String> {
        Message::parse_with(bytes, true)
    }

    fn parse_with(bytes: &[u8], strict: bool) -> Result<Message, String> {
        // serde would read an array as a struct's fields in order.
        match bytes.iter().find(|byte| !byte.is_ascii_whitespace()) {
            Some(b'{') => {}
            Some(b'[') => return Err("a batch: MCP sends one message at a time".to_owned()),
            _ => return Err("not a JSON object".to_owned()),
        }
        // Each value counted takes a byte of its own: a frame no longer than
        // the limit cannot pass it, and is not scanned (most are).
        if bytes.len() > MAX_FRAME_VALUES && value_count(bytes, MAX_FRAME_VALUES) > MAX_FRAME_VALUES
        {
            return Message::too_big(bytes);
        }
        let incoming: Incoming = match serde_json::from_slice(bytes) {
            Ok(incoming) => incoming,
            // Bytes that are not UTF-8 in a message that is otherwise whole:
            // read as U+FFFD, so that the answer reaches its caller now
            // rather than its timeout.
            Err(err) if std::str::from_utf8(bytes).is_err() => {
                let text = String::from_utf8_lossy(bytes);
                let incoming =
                    serde_json::from_slice(text.as_bytes()).map_err(|_| err.to_string())?;
                static SAID: crate::sync::ThrottledWarning = crate::sync::ThrottledWarning::new();
                SAID.warn(|| {
                    "a server sent a message that is not valid UTF-8; its bad bytes read as \
                     U+FFFD"
                        .to_owned()
                });
                incoming
            }
            Err(err) => return Err(err.to_string()),
        };
        let id = match incoming.id {
            None => None,
            Some(Value::Number(number)) => match number.as_i64() {
                Some(n) => Some(RequestId::Number(n)),
                None => return Err(format!("unsupported id {number}")),
            },
            Some(Value::String(text)) => Some(RequestId::String(text)),
            Some(other) => return Err(format!("unsupported id {other}")),
        };
        // A request or notification in another JSON-RPC (1.0 has no such
        // member) is not one tether serves; an answer is still an answer.
        if strict && incoming.method.is_some() && !incoming.jsonrpc.is_some_and(|version| version.0)
        {
            return Err("not JSON-RPC 2.0: \"jsonrpc\" is not \"2.0\"".to_owned());
        }
        match (incoming.method, id) {
            (Some(method), Some(id)) => {
                Ok(Message::Request(Request { id, method, params: incoming.params }))
            }
            (Some(method), None) => {
                Ok(Message::Notification(Notification { method, params: incoming.params }))
            }
            (None, Some(id)) => {
                let outcome = match incoming.error {
                    // A malformed error object is still an error for that
                    // request: the caller learns now, not at its timeout.
                    Some(error) => Err(serde_json::from_value::<RpcError>(error.clone())
                        .unwrap_or(RpcError {
                            code: -32603,
                            message: format!("malformed error from the server: {error}"),
                            data: None,
                        })),
                    None => Ok(incoming.result.unwrap_or(Value::Null)),
                };
                Ok(Message::Response(Response { id, outcome }))
            }
            (None, None) if incoming.error.is_some() => {
                Err(format!("an error for no request: {}", incoming.error.unwrap_or_default()))
            }
            (None, None) => Err("neither a method nor an id".to_owned()),
        }
    }
}

impl Message {
    /// A frame past [`MAX_FRAME_VALUES`]: read for its id alone (the rest
    /// skipped as it is read, never held), and made an error for the request
    /// it answers, so the caller hears now rather than at its timeout.
    fn too_big(bytes: &[u8]) -> Result<Message, String> {
        let why = format!(
            "a message of more than {MAX_FRAME_VALUES} JSON values ({} bytes); tether reads at \
             most that many",
            bytes.len()
        );
        let skeleton: Skeleton = serde_json::from_slice(bytes).map_err(|err| err.to_string())?;
        match (skeleton.method, skeleton.id) {
            (None, Some(IdField(Some(id)))) => Ok(Message::Response(Response {
                id,
                outcome: Err(RpcError { code: -32603, message: why, data: None }),
            })),
            _ => Err(why),
        }
    }
}

#[derive(Serialize)]
struct OutgoingRequest<'a, P: Serialize> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<P>,
}

#[derive(Serialize)]
struct OutgoingNotification<'a> {
    jsonrpc: &'static str,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a Value>,
}

#[derive(Serialize)]
struct OutgoingResult<'a> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    result: &'a Value,
}

#[derive(Serialize)]
struct OutgoingError<'a> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    error: &'a RpcError,
}

fn to_bytes<T: Serialize>(message: &T) -> Vec<u8> {
    // Room for a typical request at once (`to_vec` starts at 128 bytes, and
    // a `tools/call` with its progress token is just past that).
    let mut bytes = Vec::with_capacity(256);
    // Serializing these plain structs into a Vec cannot fail: every key is a
    // string and a Value is always representable.
    serde_json::to_writer(&mut bytes, message).expect("JSON-RPC message serializes");
    bytes
}

/// One outgoing message, encoded as one JSON text (no newline), with what a
/// transport routes by, so that nothing below the client parses it again.
#[derive(Debug, Clone)]
pub struct Frame {
    /// The encoded message.
    pub bytes: Vec<u8>,
    /// A request's id; `None` for notifications and responses.
    pub id: Option<i64>,
    /// A request's or notification's method; `None` for a response.
    pub method: Option<Cow<'static, str>>,
    /// What a `tools/call`, `prompts/get` or `resources/read` names (its
    /// `name` or `uri`), which stateless Streamable HTTP mirrors into
    /// `Mcp-Name`; set by the client only then.
    pub name: Option<String>,
    /// `Mcp-Param-*` headers a stateless HTTP server asked for (`x-mcp-header`).
    pub headers: Vec<(String, String)>,
    /// When the caller gives up on a request whatever happens (its
    /// ceiling): an HTTP exchange ends then too.
    pub deadline: Option<std::time::Instant>,
    /// The caller's own HTTP POST of it met a failure worth another try: the
    /// worker that sends it again pauses first, as the retry loop would.
    pub retrying: bool,
}

/// A frame's method, kept: the commonest one without an allocation.
fn method_name(method: &str) -> Cow<'static, str> {
    match method {
        "tools/call" => Cow::Borrowed("tools/call"),
        other => Cow::Owned(other.to_owned()),
    }
}

impl Frame {
    /// A request with a numeric id (tether's ids are numbers).
    pub fn request(id: i64, method: &str, params: Option<&Value>) -> Frame {
        Frame::request_with(id, method, params)
    }

    /// A request whose parameters serialize themselves (the client adds
    /// its progress token so, without changing the caller's value).
    pub fn request_with(id: i64, method: &str, params: Option<impl Serialize>) -> Frame {
        let bytes = to_bytes(&OutgoingRequest {
            jsonrpc: "2.0",
            id: &RequestId::Number(id),
            method,
            params,
        });
        Frame {
            bytes,
            id: Some(id),
            method: Some(method_name(method)),
            name: None,
            headers: Vec::new(),
            deadline: None,
            retrying: false,
        }
    }

    /// A notification.
    pub fn notification(method: &str, params: Option<&Value>) -> Frame {
        let bytes = to_bytes(&OutgoingNotification { jsonrpc: "2.0", method, params });
        Frame {
            bytes,
            id: None,
            method: Some(method_name(method)),
            name: None,
            headers: Vec::new(),
            deadline: None,
            retrying: false,
        }
    }

    /// A response to a server's request.
    pub fn response(id: &RequestId, outcome: &Result<Value, RpcError>) -> Frame {
        let bytes = match outcome {
            Ok(result) => to_bytes(&OutgoingResult { jsonrpc: "2.0", id, result }),
            Err(error) => to_bytes(&OutgoingError { jsonrpc: "2.0", id, error }),
        };
        Frame {
            bytes,
            id: None,
            method: None,
            name: None,
            headers: Vec::new(),
            deadline: None,
            retrying: false,
        }
    }

    /// True for a request (it expects an answer).
    pub fn is_request(&self) -> bool {
        self.id.is_some()
    }

    /// True for a request or notification with this method.
    pub fn is(&self, method: &str) -> bool {
        self.method.as_deref() == Some(method)
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::String(text) => write!(f, "{text:?}"),
        }
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(input: &str, expected: Message) {
        assert_eq!(Message::parse(input.as_bytes()).unwrap(), expected);
    }

    #[test]
    fn an_answer_with_bytes_that_are_not_utf8_still_answers() {
        let frame = b"{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"text\":\"caf\xe9 \xff\"}}";
        assert_eq!(
            Message::parse(frame).unwrap(),
            Message::Response(Response {
                id: RequestId::Number(3),
                outcome: Ok(json!({"text": "caf\u{fffd} \u{fffd}"})),
            })
        );
        // Broken JSON stays broken, whatever its bytes.
        assert!(Message::parse(b"{\"id\":3,\"result\":\xff").is_err());
    }

    #[test]
    fn a_frame_of_too_many_values_answers_its_request_without_being_built() {
        let zeros = vec!["0"; MAX_FRAME_VALUES + 10].join(",");
        let frame = format!(r#"{{"jsonrpc":"2.0","id":5,"result":[{zeros}]}}"#);
        let Message::Response(response) = Message::parse(frame.as_bytes()).unwrap() else {
            panic!("a response")
        };
        assert_eq!(response.id, RequestId::Number(5));
        assert_eq!(response.outcome.unwrap_err().code, -32603);
        // An id of that many values is skipped as it is read: no request.
        let frame = format!(r#"{{"jsonrpc":"2.0","id":[{zeros}],"result":1}}"#);
        assert!(Message::parse(frame.as_bytes()).unwrap_err().contains("more than"));
    }

    #[test]
    fn a_request_must_say_json_rpc_2_0_and_an_answer_need_not() {
        for frame in [
            r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
            r#"{"id":1,"method":"ping"}"#,
            r#"{"jsonrpc":2.0,"method":"notifications/initialized"}"#,
            r#"{"jsonrpc":null,"id":"a","method":"ping"}"#,
            r#"{"jsonrpc":{"v":[2,0]},"id":"a","method":"ping"}"#,
        ] {
            let why = Message::parse_strict(frame.as_bytes()).unwrap_err();
            assert!(why.contains("JSON-RPC 2.0"), "{frame}: {why}");
            // A server's, read by the client, still reaches the host.
            assert!(Message::parse(frame.as_bytes()).is_ok(), "{frame}");
        }
        assert!(matches!(
            Message::parse_strict(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Ok(Message::Request(_))
        ));
        // A sloppy answer still reaches its caller.
        for frame in [&br#"{"id":1,"result":{}}"#[..], br#"{"jsonrpc":[1],"id":1,"result":{}}"#] {
            assert!(matches!(Message::parse_strict(frame), Ok(Message::Response(_))));
        }
    }

    #[test]
    fn what_is_not_an_object_is_no_message() {
        assert!(Message::parse(br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#)
            .unwrap_err()
            .contains("batch"));
        // serde would have read these as a request's fields in order.
        assert!(Message::parse(br#"[1, "ping"]"#).is_err());
        assert!(Message::parse(br#" "ping""#).is_err());
    }

    #[test]
    fn classifies_response_with_result() {
        check(
            r#"{"jsonrpc":"2.0","id":7,"result":{"ok":true}}"#,
            Message::Response(Response {
                id: RequestId::Number(7),
                outcome: Ok(json!({"ok": true})),
            }),
        );
    }

    #[test]
    fn classifies_response_with_error() {
        check(
            r#"{"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"nope"}}"#,
            Message::Response(Response {
                id: RequestId::String("x".into()),
                outcome: Err(RpcError { code: -32601, message: "nope".into(), data: None }),
            }),
        );
    }

    #[test]
    fn classifies_request_and_notification() {
        check(
            r#"{"jsonrpc":"2.0","id":"s1","method":"ping"}"#,
            Message::Request(Request {
                id: RequestId::String("s1".into()),
                method: "ping".into(),
                params: None,
            }),
        );
        check(
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}"#,
            Message::Notification(Notification {
                method: "notifications/progress".into(),
                params: Some(json!({"progress": 1})),
            }),
        );
    }

    #[test]
    fn a_malformed_error_is_still_an_error() {
        let message = Message::parse(br#"{"jsonrpc":"2.0","id":3,"error":"boom"}"#).unwrap();
        let Message::Response(Response { outcome: Err(error), .. }) = message else {
            panic!("{message:?}")
        };
        assert_eq!(error.code, -32603);
        assert!(error.message.contains("boom"));
    }

    #[test]
    fn rejects_non_messages() {
        for input in ["[1,2]", r#"{"hello":"world"}"#, r#"{"id":null,"result":1}"#, "nope", "\u{0}"]
        {
            assert!(Message::parse(input.as_bytes()).is_err(), "{input}");
        }
        assert!(Message::parse(b"\xff\xfe").is_err());
    }

    #[test]
    fn encodes_without_cloning_params() {
        let params = json!({"name": "echo"});
        let bytes = Frame::request(1, "tools/call", Some(&params)).bytes;
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#
        );
        let bytes = Frame::notification("notifications/initialized", None).bytes;
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
        );
    }
}
