//! What a thrown value means for the model: its message, the kind of
//! failure (a call's own kind rides on the `Error` the prelude made for it;
//! the engine's own "out of memory" and stack overflow are the limits), the
//! call it came from, and the script's line and column from its stack.

use std::sync::Arc;

use rquickjs::{Coerced, Ctx, FromJs, Value as JsValue};

use super::{NestedCall, NestedOutcome, ScriptError, ScriptErrorKind};

/// The file name errors in the script point into.
pub(super) const SCRIPT_FILE: &str = "script";
/// Lines the wrapper puts before the script's first line.
pub(super) const WRAPPER_LINES: u32 = 1;

/// What the script threw; `None` when it is the engine's interrupt (the
/// deadline or a cancel), which the caller words itself.
pub(super) fn error_of<'js>(
    ctx: &Ctx<'js>,
    thrown: JsValue<'js>,
    calls: &[NestedCall],
) -> Option<ScriptError> {
    let object = thrown.as_object();
    let text = |key: &str| -> Option<String> {
        object
            .and_then(|object| object.get::<_, Option<Coerced<String>>>(key).ok().flatten())
            .map(|c| c.0)
    };
    let message = match object {
        // A plain object thrown (`throw {code: 5}`): as JSON.
        Some(_) if text("message").is_none() && text("name").is_none() => ctx
            .json_stringify(thrown.clone())
            .ok()
            .flatten()
            .and_then(|json| json.to_string().ok())
            .unwrap_or_else(|| "an object".into()),
        Some(_) => {
            let name = text("name").unwrap_or_else(|| "Error".into());
            let message = text("message").unwrap_or_default();
            if name == "Error" || text("kind").is_some() {
                message
            } else {
                format!("{name}: {message}")
            }
        }
        None => Coerced::<String>::from_js(ctx, thrown.clone()).map(|c| c.0).unwrap_or_default(),
    };
    // `tools.mcp__my-server__x` is JavaScript's minus: say how to write it.
    let message = match message.strip_prefix("ReferenceError: ") {
        Some(rest) if rest.split(' ').next().is_some_and(|name| name.contains("__")) => format!(
            "{message} (a `-` in a tool's name is written `_` in a script: \
             tools.mcp__my_server__my_tool, or tools[\"mcp__my-server__my-tool\"])"
        ),
        _ => message,
    };
    let (line, column) = text("stack").as_deref().map_or((None, None), location);
    // What the engine throws when it stops a script.
    if message == "InternalError: interrupted" || message == "interrupted" {
        return None;
    }
    let kind = match text("kind").as_deref().and_then(ScriptErrorKind::from_str) {
        Some(kind) => kind,
        None if message.contains("out of memory")
            || message.contains("Maximum call stack size exceeded")
            || message.contains("stack overflow") =>
        {
            ScriptErrorKind::Limit
        }
        None => ScriptErrorKind::Threw,
    };
    let cause = object
        .and_then(|object| object.get::<_, Option<u32>>("call").ok().flatten())
        .and_then(|index| calls.get(index as usize))
        .and_then(|call| match &call.outcome {
            NestedOutcome::Failed(error) => Some(Arc::clone(error)),
            _ => None,
        });
    Some(ScriptError { kind, message, line, column, cause })
}

/// Whether the engine's heap is past half its limit: then a `null` thrown
/// is the engine's own, with no room left for an error (a big allocation,
/// an array's storage doubling, fails well before the heap is full).
pub(super) fn heap_nearly_full(ctx: &Ctx<'_>) -> bool {
    // SAFETY: called inside `Context::with` on the engine's thread, which
    // holds the runtime; JS_ComputeMemoryUsage only reads its counters
    // into the struct given.
    let usage = unsafe {
        let runtime = rquickjs::qjs::JS_GetRuntime(ctx.as_raw().as_ptr());
        let mut usage: rquickjs::qjs::JSMemoryUsage = std::mem::zeroed();
        rquickjs::qjs::JS_ComputeMemoryUsage(runtime, &mut usage);
        usage
    };
    usage.malloc_limit > 0 && usage.malloc_size * 2 >= usage.malloc_limit
}

/// The first place in the script a stack names: its line and column, with
/// the wrapper's line taken off.
fn location(stack: &str) -> (Option<u32>, Option<u32>) {
    let marker = format!("{SCRIPT_FILE}:");
    for frame in stack.lines() {
        let Some(at) = frame.find(&marker) else { continue };
        let rest = &frame[at + marker.len()..];
        let mut numbers = rest.split(|c: char| !c.is_ascii_digit()).filter(|part| !part.is_empty());
        let line = numbers.next().and_then(|n| n.parse::<u32>().ok());
        let column = numbers.next().and_then(|n| n.parse::<u32>().ok());
        if let Some(line) = line {
            return (Some(line.saturating_sub(WRAPPER_LINES).max(1)), column);
        }
    }
    (None, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_gives_the_scripts_own_line_and_column() {
        assert_eq!(
            location("    at <anonymous> (script:4:11)\n    at <eval> (script:5:1)\n"),
            (Some(3), Some(11))
        );
        assert_eq!(location("    at script:2:9\n"), (Some(1), Some(9)));
        assert_eq!(location("    at deliver (prelude:20:5)\n"), (None, None));
    }
}
