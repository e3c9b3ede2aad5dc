//! What the script's native functions and the loop share, on the engine's
//! thread only: the calls the script asked for since the loop last looked,
//! its console output, the images it forwarded, and the catalog its
//! questions about tools are answered from. `native_functions` makes the
//! `host` object the prelude is handed: each function only reads or
//! records here, so a script never re-enters the loop.
//!
//! Everything kept here is bounded, apart from the engine's heap: a script
//! can hand Rust a copy of a big value on every call, so the calls asked
//! for, a call's name and arguments, the arguments of all calls together,
//! the images and the console each have a limit. And no borrow of the
//! mailbox is held while a function throws: making an exception may run
//! the script's own code (a setter on `Error.prototype`), which may call
//! another native function.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use rquickjs::{Ctx, Exception, Function, Object, Value as JsValue};
use serde_json::{json, Value};

use super::calls::Request;
use super::{Catalog, ConsoleCallback, ScriptErrorKind};
use crate::config::ScriptLimits;
use crate::model::floor_char_boundary;

/// The most images one script may forward, and their bytes together.
const MAX_IMAGES: usize = 16;
const MAX_IMAGE_BYTES: usize = 32 << 20;
/// The longest tool or server name a call may give.
const MAX_NAME: usize = 256;
/// The most bytes of one call's arguments (under a frame's 16 MiB), and of
/// all calls' arguments together.
const MAX_ARGUMENTS: usize = 8 << 20;
const MAX_ALL_ARGUMENTS: usize = 64 << 20;

/// What the script's native functions and the loop share, on the engine's
/// thread only.
pub(super) struct Mailbox {
    pub(super) catalog: Catalog,
    /// Calls the script made since the loop last looked.
    pub(super) requests: VecDeque<(u32, Request)>,
    next_id: u32,
    /// Calls asked for so far, and the bytes of their arguments.
    asked: usize,
    argument_bytes: usize,
    max_calls: usize,
    pub(super) console: String,
    /// Console lines left out once the output limit was reached.
    pub(super) dropped_lines: usize,
    max_output: usize,
    /// The host's live view of the console, if it asked for one.
    live: Option<ConsoleCallback>,
    pub(super) images: Vec<Value>,
    image_bytes: usize,
}

impl Mailbox {
    pub(super) fn new(
        catalog: Catalog,
        limits: &ScriptLimits,
        live: Option<ConsoleCallback>,
    ) -> Mailbox {
        Mailbox {
            catalog,
            requests: VecDeque::new(),
            next_id: 0,
            asked: 0,
            argument_bytes: 0,
            max_calls: limits.max_calls,
            console: String::new(),
            dropped_lines: 0,
            max_output: limits.max_output,
            live,
            images: Vec::new(),
            image_bytes: 0,
        }
    }

    /// Takes a call, or says why not: `(kind, message)`.
    fn ask(
        &mut self,
        kind: &str,
        name: String,
        arguments: &str,
    ) -> Result<u32, (ScriptErrorKind, String)> {
        let shown =
            || if name.len() > 60 { format!("{}…", cut(&name, 60)) } else { name.clone() };
        if name.len() > MAX_NAME {
            let why = format!("{}: a name of {} bytes is no tool's", shown(), name.len());
            return Err((ScriptErrorKind::UnknownTool, why));
        }
        if self.asked >= self.max_calls {
            let why = format!("{}: not made: a script may make {} calls", shown(), self.max_calls);
            return Err((ScriptErrorKind::Limit, why));
        }
        if arguments.len() > MAX_ARGUMENTS
            || self.argument_bytes + arguments.len() > MAX_ALL_ARGUMENTS
        {
            let why = format!(
                "{}: not made: its arguments are {} bytes; a call may send {} and a script {} in all",
                shown(),
                arguments.len(),
                MAX_ARGUMENTS,
                MAX_ALL_ARGUMENTS
            );
            return Err((ScriptErrorKind::Limit, why));
        }
        let request = match kind {
            "tool" => match serde_json::from_slice(arguments.as_bytes()) {
                Ok(arguments) => Request::Tool { name, arguments },
                // A lone surrogate, or nesting past the JSON reader's depth:
                // refused, never sent as something else.
                Err(err) => {
                    let why = format!("{}: the arguments cannot be sent as JSON: {err}", shown());
                    return Err((ScriptErrorKind::ToolFailed, why));
                }
            },
            "read" => {
                let uri = serde_json::from_slice::<Value>(arguments.as_bytes())
                    .ok()
                    .and_then(|value| value.get("uri").and_then(Value::as_str).map(str::to_owned))
                    .unwrap_or_default();
                Request::Read { server: name, uri }
            }
            _ => Request::List { server: Some(name).filter(|name| !name.is_empty()) },
        };
        self.asked += 1;
        self.argument_bytes += arguments.len();
        self.next_id += 1;
        self.requests.push_back((self.next_id, request));
        Ok(self.next_id)
    }

    fn log(&mut self, level: &str, text: &str) {
        let prefix = match level {
            "warn" => "[warn] ",
            "error" => "[error] ",
            _ => "",
        };
        let needed = prefix.len() + text.len() + 1;
        if self.dropped_lines == 0 && self.console.len() + needed <= self.max_output {
            let start = self.console.len();
            self.console.push_str(prefix);
            self.console.push_str(text);
            self.console.push('\n');
            self.show(start);
            return;
        }
        // A first line too long for what is left keeps what fits.
        if self.dropped_lines == 0 && self.console.len() + prefix.len() + 2 < self.max_output {
            let start = self.console.len();
            let room = self.max_output - self.console.len() - prefix.len() - 1;
            self.console.push_str(prefix);
            self.console.push_str(cut(text, room));
            self.console.push('\n');
            self.show(start);
        }
        self.dropped_lines += 1;
    }

    /// Hands the line that begins at `start` to the host's live view.
    fn show(&self, start: usize) {
        if let Some(live) = &self.live {
            live(self.console[start..].trim_end_matches('\n'));
        }
    }

    fn image(&mut self, block: &str) -> Result<(), String> {
        if self.images.len() >= MAX_IMAGES || self.image_bytes + block.len() > MAX_IMAGE_BYTES {
            return Err(format!(
                "a script may forward {MAX_IMAGES} images, {} MiB in all",
                MAX_IMAGE_BYTES >> 20
            ));
        }
        if let Ok(block) = serde_json::from_slice(block.as_bytes()) {
            self.image_bytes += block_len(&block);
            self.images.push(block);
        }
        Ok(())
    }
}

/// The bytes of an image block's data.
fn block_len(block: &Value) -> usize {
    block.get("data").and_then(Value::as_str).map_or(0, str::len)
}

/// At most `bytes` of `text`, cut at a character's boundary.
fn cut(text: &str, bytes: usize) -> &str {
    &text[..floor_char_boundary(text, bytes)]
}

/// The native functions the prelude is handed (`host`), each working on
/// the shared mailbox.
pub(super) fn native_functions<'js>(
    ctx: &Ctx<'js>,
    mailbox: &Rc<RefCell<Mailbox>>,
) -> rquickjs::Result<Object<'js>> {
    let host = Object::new(ctx.clone())?;
    let shared = Rc::clone(mailbox);
    // A number (the call's id), or `[kind, message]` for a call not taken.
    host.set(
        "request",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, kind: String, name: String, arguments: String| {
                let asked = shared.borrow_mut().ask(&kind, name, &arguments);
                match asked {
                    Ok(id) => Ok(JsValue::new_int(ctx, id as i32)),
                    Err((kind, why)) => {
                        let refused = rquickjs::Array::new(ctx.clone())?;
                        refused.set(0, kind.as_str())?;
                        refused.set(1, why)?;
                        Ok::<_, rquickjs::Error>(refused.into_value())
                    }
                }
            },
        )?,
    )?;
    catalog_functions(ctx, &host, mailbox)?;
    output_functions(ctx, &host, mailbox)?;
    Ok(host)
}

/// `toolNames`, `describe`, `search`, `allTools`: the catalog's answers.
fn catalog_functions<'js>(
    ctx: &Ctx<'js>,
    host: &Object<'js>,
    mailbox: &Rc<RefCell<Mailbox>>,
) -> rquickjs::Result<()> {
    let shared = Rc::clone(mailbox);
    host.set(
        "toolNames",
        Function::new(ctx.clone(), move || -> String {
            serde_json::to_string(&shared.borrow().catalog.tool_names()).unwrap_or_default()
        })?,
    )?;
    let shared = Rc::clone(mailbox);
    host.set(
        "describe",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, namespace: String| -> rquickjs::Result<String> {
                let described = shared.borrow().catalog.describe(&namespace);
                answer(&ctx, described)
            },
        )?,
    )?;
    let shared = Rc::clone(mailbox);
    host.set(
        "search",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, query: String, options: String| -> rquickjs::Result<String> {
                let options: Value =
                    serde_json::from_slice(options.as_bytes()).unwrap_or_else(|_| json!({}));
                let namespace = options.get("namespace").and_then(Value::as_str);
                let limit =
                    options.get("limit").and_then(Value::as_f64).map(|n| n.max(1.0) as usize);
                let found = shared.borrow().catalog.search(&query, namespace, limit);
                answer(&ctx, found)
            },
        )?,
    )?;
    let shared = Rc::clone(mailbox);
    host.set(
        "allTools",
        Function::new(ctx.clone(), move || -> String {
            shared.borrow().catalog.all_tools().to_string()
        })?,
    )?;
    Ok(())
}

/// A catalog's answer as JSON text, or its refusal thrown (the borrow that
/// made it already let go: throwing may run the script's own code).
fn answer(ctx: &Ctx<'_>, answer: Result<Value, String>) -> rquickjs::Result<String> {
    answer.map(|value| value.to_string()).map_err(|message| Exception::throw_message(ctx, &message))
}

/// `image` and `log`: what the script forwards beside its value.
fn output_functions<'js>(
    ctx: &Ctx<'js>,
    host: &Object<'js>,
    mailbox: &Rc<RefCell<Mailbox>>,
) -> rquickjs::Result<()> {
    let shared = Rc::clone(mailbox);
    host.set(
        "image",
        Function::new(ctx.clone(), move |ctx: Ctx<'js>, block: String| -> rquickjs::Result<()> {
            let taken = shared.borrow_mut().image(&block);
            taken.map_err(|why| Exception::throw_range(&ctx, &why))
        })?,
    )?;
    let shared = Rc::clone(mailbox);
    host.set(
        "log",
        Function::new(ctx.clone(), move |level: String, text: String| {
            shared.borrow_mut().log(&level, &text);
        })?,
    )?;
    Ok(())
}
