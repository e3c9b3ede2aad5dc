//! The headers a 2026-07-28 client mirrors from a request's body into its
//! POST (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, and
//! `Mcp-Param-{Name}` for a tool's `x-mcp-header` parameters), checked
//! against that body, as Streamable HTTP's server validation requires: a
//! gateway in front may have routed on the headers, so a request whose
//! headers say otherwise than its body is refused (400, `HeaderMismatch`),
//! never answered as the body says.
//!
//! Only stateless requests are checked; a handshake session's carry none of
//! these. The checks read headers and the parsed request, and do no I/O.

use base64::Engine;
use serde_json::Value;

use super::http_wire::HttpRequest;
use crate::client::param_headers;
use crate::jsonrpc::Request;

/// JSON-RPC's code for headers that do not agree with the body.
pub(super) const HEADER_MISMATCH: i64 = -32020;

/// The headers that route a request: each at most once.
const ROUTING: [&str; 3] = ["mcp-protocol-version", "mcp-method", "mcp-name"];

/// What checks a tool's input schema as served, if there is such a tool.
pub(super) type SchemaCheck<'c> = &'c mut dyn FnMut(&Value) -> Option<String>;

/// Why `request`'s headers do not agree with `asked`, its body; `None`
/// when they do. `with_schema` runs a check on the input schema of a tool
/// as served (for its `x-mcp-header` parameters), where it lies.
pub(super) fn mismatch(
    request: &HttpRequest,
    asked: &Request,
    with_schema: impl FnOnce(&str, SchemaCheck<'_>) -> Option<String>,
) -> Option<String> {
    if let Some(twice) = ROUTING.iter().find(|name| request.header_count(name) > 1) {
        return Some(format!("the {twice} header is sent more than once"));
    }
    let params = asked.params.as_ref();
    let version = params
        .and_then(|params| params.pointer("/_meta/io.modelcontextprotocol~1protocolVersion"))
        .and_then(Value::as_str);
    if let Some(version) = version {
        match request.header("mcp-protocol-version") {
            None => return Some("the MCP-Protocol-Version header is missing".to_owned()),
            Some(header) if header != version => {
                return Some(format!(
                    "the MCP-Protocol-Version header {header:?} does not match the body's \
                     protocol version {version:?}"
                ))
            }
            Some(_) => {}
        }
    }
    match request.header("mcp-method") {
        None => return Some("the Mcp-Method header is missing".to_owned()),
        Some(method) if method != asked.method => {
            return Some(format!(
                "the Mcp-Method header {method:?} does not match the body's method {:?}",
                asked.method
            ))
        }
        Some(_) => {}
    }
    let key = match asked.method.as_str() {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        _ => return None,
    };
    let named = params.and_then(|params| params.get(key)).and_then(Value::as_str)?;
    match request.header("mcp-name").map(decoded) {
        None => return Some("the Mcp-Name header is missing".to_owned()),
        Some(None) => return Some("the Mcp-Name header's base64 cannot be read".to_owned()),
        Some(Some(name)) if name != named => {
            return Some(format!(
                "the Mcp-Name header {name:?} does not match the body's {key} {named:?}"
            ))
        }
        Some(Some(_)) => {}
    }
    if asked.method == "tools/call" {
        let arguments = params.and_then(|params| params.get("arguments"))?;
        return with_schema(named, &mut |schema| param_mismatch(request, schema, arguments));
    }
    None
}

/// Why the `Mcp-Param-{Name}` headers of a call do not carry what its
/// arguments hold for the tool's `x-mcp-header` parameters.
fn param_mismatch(request: &HttpRequest, schema: &Value, arguments: &Value) -> Option<String> {
    let annotated = param_headers::annotations(schema).ok()?;
    // A value no header can carry is the tool's to refuse, as the call's.
    let wanted = param_headers::for_call(&annotated, arguments).ok()?;
    for (header, value) in wanted {
        let lower = header.to_ascii_lowercase();
        if request.header_count(&lower) > 1 {
            return Some(format!("the {header} header is sent more than once"));
        }
        let Some(sent) = request.header(&lower) else {
            return Some(format!("the {header} header is missing"));
        };
        let Some(sent) = decoded(sent) else {
            return Some(format!("the {header} header's base64 cannot be read"));
        };
        if !same_value(&sent, &value) {
            return Some(format!(
                "the {header} header {sent:?} does not match the argument's {value:?}"
            ));
        }
    }
    None
}

/// A header's value, its base64 sentinel (`=?base64?…?=`) decoded; `None`
/// when the sentinel holds no base64 of UTF-8.
fn decoded(value: &str) -> Option<String> {
    let Some(inner) = value.strip_prefix("=?base64?").and_then(|rest| rest.strip_suffix("?="))
    else {
        return Some(value.to_owned());
    };
    let bytes = base64::engine::general_purpose::STANDARD.decode(inner).ok()?;
    String::from_utf8(bytes).ok()
}

/// True when a header carries `wanted` (as `param_headers` writes it): the
/// same text, or the same integer written another way (`42.0` for `42`).
fn same_value(sent: &str, wanted: &str) -> bool {
    if sent == wanted {
        return true;
    }
    let (Ok(wanted), Some(sent)) = (wanted.parse::<i64>(), integral(sent)) else {
        return false;
    };
    wanted == sent
}

/// `42`, `-7`, `42.0` as the integer they write; `None` for anything else.
fn integral(text: &str) -> Option<i64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if !fraction.bytes().all(|byte| byte == b'0') {
        return None;
    }
    whole.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::RequestId;
    use serde_json::json;

    fn post(headers: &[(&str, &str)]) -> HttpRequest {
        HttpRequest::for_test(headers)
    }

    fn call(name: &str, arguments: Value) -> Request {
        Request {
            id: RequestId::Number(1),
            method: "tools/call".into(),
            params: Some(json!({"name": name, "arguments": arguments,
                                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}})),
        }
    }

    const AGREEING: [(&str, &str); 3] = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "fx__echo"),
    ];

    // Headers that agree with the body pass; each one missing, differing,
    // sent twice or badly encoded is refused, saying which.
    #[test]
    fn the_mirrored_headers_must_agree_with_the_body() {
        let none = |_: &str, _: SchemaCheck<'_>| None;
        let asked = call("fx__echo", json!({"text": "hi"}));
        assert_eq!(mismatch(&post(&AGREEING), &asked, none), None);
        let encoded = [AGREEING[0], AGREEING[1], ("mcp-name", "=?base64?ZnhfX2VjaG8=?=")];
        assert_eq!(mismatch(&post(&encoded), &asked, none), None);
        for (without, says) in [(0, "MCP-Protocol-Version"), (1, "Mcp-Method"), (2, "Mcp-Name")] {
            let mut headers = AGREEING.to_vec();
            headers.remove(without);
            let why = mismatch(&post(&headers), &asked, none).unwrap();
            assert!(why.contains(says) && why.contains("missing"), "{why}");
        }
        let wrong = [AGREEING[0], ("mcp-method", "tools/list"), AGREEING[2]];
        assert!(mismatch(&post(&wrong), &asked, none).unwrap().contains("Mcp-Method"));
        let wrong = [("mcp-protocol-version", "2025-11-25"), AGREEING[1], AGREEING[2]];
        assert!(mismatch(&post(&wrong), &asked, none).unwrap().contains("MCP-Protocol-Version"));
        let wrong = [AGREEING[0], AGREEING[1], ("mcp-name", "fx__other")];
        assert!(mismatch(&post(&wrong), &asked, none).unwrap().contains("Mcp-Name"));
        let bad = [AGREEING[0], AGREEING[1], ("mcp-name", "=?base64?***?=")];
        assert!(mismatch(&post(&bad), &asked, none).unwrap().contains("base64"));
        let twice = [AGREEING[0], AGREEING[1], AGREEING[2], ("mcp-method", "tools/call")];
        assert!(mismatch(&post(&twice), &asked, none).unwrap().contains("more than once"));
    }

    // A tool's x-mcp-header parameters: each present argument needs its
    // header, carrying the same value (an integer written another way is
    // the same); an absent or null argument needs none.
    #[test]
    fn a_tools_parameter_headers_must_carry_its_arguments() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "count": {"type": "integer", "x-mcp-header": "Count"}}});
        let schema_of =
            || |name: &str, check: SchemaCheck<'_>| (name == "fx__echo").then(|| check(&schema))?;
        let asked = call("fx__echo", json!({"region": "eu", "count": 42}));
        let mut headers = AGREEING.to_vec();
        headers.extend([("mcp-param-region", "eu"), ("mcp-param-count", "42.0")]);
        assert_eq!(mismatch(&post(&headers), &asked, schema_of()), None);
        let why = mismatch(&post(&AGREEING), &asked, schema_of()).unwrap();
        assert!(why.contains("Mcp-Param-Region") && why.contains("missing"), "{why}");
        let mut wrong = AGREEING.to_vec();
        wrong.extend([("mcp-param-region", "us"), ("mcp-param-count", "42")]);
        assert!(mismatch(&post(&wrong), &asked, schema_of()).unwrap().contains("Region"));
        let absent = call("fx__echo", json!({"region": null}));
        assert_eq!(mismatch(&post(&AGREEING), &absent, schema_of()), None);
    }
}
