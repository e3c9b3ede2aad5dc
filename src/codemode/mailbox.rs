//! What the script's native functions and the loop share, on the engine's
//! thread only: the calls the script asked for since the loop last looked,
//! its console output (bounded), the images it forwarded, and the catalog
//! its questions about tools are answered from. `native_functions` makes
//! the `host` object the prelude is handed: each function only reads or
//! records here, so a script never re-enters the loop.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use rquickjs::{Ctx, Exception, Function, Object};
use serde_json::{json, Value};

use super::calls::Request;
use super::Catalog;

/// The most images one script may forward.
const MAX_IMAGES: usize = 64;

/// What the script's native functions and the loop share, on the engine's
/// thread only.
pub(super) struct Mailbox {
    pub(super) catalog: Catalog,
    /// Calls the script made since the loop last looked.
    pub(super) requests: VecDeque<(u32, Request)>,
    next_id: u32,
    pub(super) console: String,
    /// Console lines left out once the output limit was reached.
    pub(super) dropped_lines: usize,
    pub(super) images: Vec<Value>,
    max_output: usize,
}

impl Mailbox {
    pub(super) fn new(catalog: Catalog, max_output: usize) -> Mailbox {
        Mailbox {
            catalog,
            requests: VecDeque::new(),
            next_id: 0,
            console: String::new(),
            dropped_lines: 0,
            images: Vec::new(),
            max_output,
        }
    }

    fn log(&mut self, level: &str, text: &str) {
        let prefix = match level {
            "warn" => "warning: ",
            "error" => "error: ",
            _ => "",
        };
        let needed = prefix.len() + text.len() + 1;
        if self.dropped_lines > 0 || self.console.len() + needed > self.max_output {
            // A first line too long for what is left keeps what fits.
            if self.dropped_lines == 0 && self.console.len() + prefix.len() + 2 < self.max_output {
                let room = self.max_output - self.console.len() - prefix.len() - 1;
                let mut end = room.min(text.len());
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                self.console.push_str(prefix);
                self.console.push_str(&text[..end]);
                self.console.push('\n');
            }
            self.dropped_lines += 1;
            return;
        }
        self.console.push_str(prefix);
        self.console.push_str(text);
        self.console.push('\n');
    }
}

/// The native functions the prelude is handed (`host`), each working on
/// the shared mailbox.
pub(super) fn native_functions<'js>(
    ctx: &Ctx<'js>,
    mailbox: &Rc<RefCell<Mailbox>>,
) -> rquickjs::Result<Object<'js>> {
    let host = Object::new(ctx.clone())?;
    let shared = Rc::clone(mailbox);
    host.set(
        "request",
        Function::new(ctx.clone(), move |kind: String, name: String, arguments: String| -> u32 {
            let mut mailbox = shared.borrow_mut();
            mailbox.next_id += 1;
            let id = mailbox.next_id;
            let request = match kind.as_str() {
                "tool" => Request::Tool {
                    name,
                    arguments: serde_json::from_str(&arguments).unwrap_or_else(|_| json!({})),
                },
                "read" => Request::Read {
                    server: name,
                    uri: serde_json::from_str::<Value>(&arguments)
                        .ok()
                        .and_then(|value| {
                            value.get("uri").and_then(Value::as_str).map(str::to_owned)
                        })
                        .unwrap_or_default(),
                },
                _ => Request::List { server: Some(name).filter(|name| !name.is_empty()) },
            };
            mailbox.requests.push_back((id, request));
            id
        })?,
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
                match shared.borrow().catalog.describe(&namespace) {
                    Ok(described) => Ok(described.to_string()),
                    Err(message) => Err(Exception::throw_message(&ctx, &message)),
                }
            },
        )?,
    )?;
    let shared = Rc::clone(mailbox);
    host.set(
        "search",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, query: String, options: String| -> rquickjs::Result<String> {
                let options: Value = serde_json::from_str(&options).unwrap_or_else(|_| json!({}));
                let namespace = options.get("namespace").and_then(Value::as_str);
                let limit =
                    options.get("limit").and_then(Value::as_f64).map(|n| n.max(1.0) as usize);
                match shared.borrow().catalog.search(&query, namespace, limit) {
                    Ok(found) => Ok(found.to_string()),
                    Err(message) => Err(Exception::throw_message(&ctx, &message)),
                }
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
            let mut mailbox = shared.borrow_mut();
            if mailbox.images.len() >= MAX_IMAGES {
                return Err(Exception::throw_range(
                    &ctx,
                    &format!("a script may forward {MAX_IMAGES} images"),
                ));
            }
            if let Ok(block) = serde_json::from_str(&block) {
                mailbox.images.push(block);
            }
            Ok(())
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
