//! A script's run as the model reads it: the returned value (a string as
//! is, anything else as JSON), the console output beside it, the images it
//! forwarded, or an error naming the kind, the message, and the script's
//! line and column. The host shapes it like any tool result
//! (`shape_result`: the 20 KB cut, the full text spilled to a file).

use serde_json::{json, Value};

use super::ScriptRun;
use crate::protocol::ToolResult;

impl ScriptRun {
    /// The returned value as text: a string as it is, anything else as
    /// compact JSON; `None` when the script returned nothing.
    pub fn value_text(&self) -> Option<String> {
        match &self.value {
            None => None,
            Some(Value::String(text)) => Some(text.clone()),
            Some(value) => Some(value.to_string()),
        }
    }

    /// What the model reads, as a tool result: the value (or the error,
    /// with `isError`), the console output, and the forwarded images.
    pub fn to_tool_result(&self) -> ToolResult {
        let mut content = Vec::new();
        let head = match &self.error {
            Some(error) => format!("The script failed: {error}"),
            None => self.value_text().unwrap_or_else(|| "(the script returned nothing)".to_owned()),
        };
        content.push(json!({"type": "text", "text": head}));
        if !self.console.is_empty() {
            content.push(
                json!({"type": "text", "text": format!("console output:\n{}", self.console)}),
            );
        }
        content.extend(self.images.iter().cloned());
        let mut raw = json!({ "content": content });
        if self.error.is_some() {
            raw["isError"] = Value::Bool(true);
        }
        ToolResult::new(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codemode::{ScriptError, ScriptErrorKind};
    use std::time::Duration;

    fn run(value: Option<Value>, console: &str, error: Option<ScriptError>) -> ScriptRun {
        ScriptRun {
            value,
            console: console.to_owned(),
            images: vec![json!({"type": "image", "data": "AA==", "mimeType": "image/png"})],
            calls: Vec::new(),
            error,
            elapsed: Duration::ZERO,
        }
    }

    #[test]
    fn a_value_reads_as_text_then_the_console_then_images() {
        let result = run(Some(json!({"a": 1})), "hi\n", None).to_tool_result();
        assert_eq!(
            result.raw,
            json!({"content": [{"type": "text", "text": "{\"a\":1}"},
                               {"type": "text", "text": "console output:\nhi\n"},
                               {"type": "image", "data": "AA==", "mimeType": "image/png"}]})
        );
        let text = run(Some(json!("plain")), "", None).to_tool_result();
        assert_eq!(text.raw["content"][0]["text"], "plain");
        assert_eq!(run(None, "", None).value_text(), None);
    }

    #[test]
    fn a_failure_names_its_kind_and_place() {
        let error = ScriptError {
            kind: ScriptErrorKind::ToolFailed,
            message: "mcp__a__b: server \"a\": cancelled".into(),
            line: Some(3),
            column: Some(7),
            cause: None,
        };
        let result = run(None, "", Some(error)).to_tool_result();
        assert_eq!(result.raw["isError"], true);
        assert_eq!(
            result.raw["content"][0]["text"],
            "The script failed: tool failed at line 3, column 7: mcp__a__b: server \"a\": cancelled"
        );
    }
}
