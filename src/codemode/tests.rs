//! The engine against a host of tools made here (the hub's side is tested
//! in `tests/it` against real servers): values, errors and their places,
//! parallel calls and their bound, limits, the hook, cancellation, and the
//! escapes that must fail.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::*;
use crate::config::Exposure;
use crate::error::CloseReason;
use crate::model::registry::{NameStyle, ToolRegistry};
use crate::protocol::Tool;

/// Tools by behaviour: `echo` returns its arguments as text, `sleep`
/// waits `ms` (ending early when cancelled), `fail` fails, `oops` reports a
/// tool error, `secret` is hidden.
struct Tools {
    catalog: Catalog,
    running: AtomicUsize,
    most_running: AtomicUsize,
    cancelled: AtomicUsize,
    called: Mutex<Vec<String>>,
}

impl Tools {
    fn new() -> Tools {
        let tools: Vec<Tool> = ["echo", "sleep", "fail", "oops", "secret"]
            .iter()
            .map(|name| {
                serde_json::from_value(
                    json!({"name": name, "description": format!("The {name} tool."),
                    "annotations": {"destructiveHint": *name == "fail"}}),
                )
                .unwrap()
            })
            .collect();
        let registry = ToolRegistry::build([("t", &tools[..])], NameStyle::Prefixed).with_exposure(
            |_, tool| if tool == "secret" { Exposure::Hidden } else { Exposure::Codemode },
        );
        let servers = vec![ServerSummary {
            name: "t".into(),
            description: Some("Test tools.".into()),
            instructions: None,
            connected: true,
            state: "connected",
            error: None,
        }];
        Tools {
            catalog: Catalog::new(registry.tools(), servers, NameStyle::Prefixed),
            running: AtomicUsize::new(0),
            most_running: AtomicUsize::new(0),
            cancelled: AtomicUsize::new(0),
            called: Mutex::new(Vec::new()),
        }
    }
}

impl ScriptHost for Tools {
    fn catalog(&self) -> Catalog {
        self.catalog.clone()
    }

    fn wait_for(&self, _servers: Option<&[String]>, _until: Instant) {}

    fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        options: &CallOptions,
    ) -> Result<ToolResult, Error> {
        self.called.lock().unwrap().push(name.to_owned());
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_running.fetch_max(now, Ordering::SeqCst);
        let answer = match name {
            "mcp__t__echo" => Ok(ToolResult::new(
                json!({"content": [{"type": "text", "text": arguments.to_string()}], "isError": false}),
            )),
            "mcp__t__sleep" => {
                let ms = arguments["ms"].as_u64().unwrap_or(0);
                let cancelled = options.cancel.as_ref().map(|cancel| cancel.receiver().clone());
                let wait = crossbeam_channel::after(Duration::from_millis(ms));
                let never = crossbeam_channel::never();
                crossbeam_channel::select! {
                    recv(wait) -> _ => Ok(ToolResult::new(json!({"content": [{"type": "text", "text": "slept"}]}))),
                    recv(cancelled.as_ref().unwrap_or(&never)) -> _ => {
                        self.cancelled.fetch_add(1, Ordering::SeqCst);
                        Err(Error::Cancelled)
                    }
                }
            }
            "mcp__t__fail" => Err(Error::Disconnected(CloseReason::Eof).for_server("t")),
            "mcp__t__oops" => Ok(ToolResult::new(
                json!({"content": [{"type": "text", "text": "bad input"}], "isError": true}),
            )),
            _ => Err(Error::UnknownTool(name.to_owned())),
        };
        self.running.fetch_sub(1, Ordering::SeqCst);
        answer
    }

    fn read_resource(
        &self,
        server: &str,
        uri: &str,
        _: &CallOptions,
    ) -> Result<Vec<ResourceContents>, Error> {
        if server != "t" {
            return Err(Error::UnknownServer(server.to_owned()));
        }
        Ok(vec![serde_json::from_value(json!({"uri": uri, "text": "hello"})).unwrap()])
    }

    fn list_resources(&self, _server: Option<&str>, _: &CallOptions) -> Result<Listed, Error> {
        let resource = serde_json::from_value(json!({"uri": "t://a", "name": "a"})).unwrap();
        Ok((vec![("t".to_owned(), resource)], Vec::new()))
    }
}

fn parent(code: &str) -> ParentCall {
    ParentCall { tool: "codemode".into(), code: Arc::from(code), run: 1 }
}

fn run_with(tools: &Tools, code: &str, options: &ScriptOptions, limits: ScriptLimits) -> ScriptRun {
    super::run(tools, code, options, limits, parent(code)).expect("the engine runs")
}

fn run(code: &str) -> ScriptRun {
    run_with(&Tools::new(), code, &ScriptOptions::default(), ScriptLimits::default())
}

fn value(code: &str) -> Value {
    let ran = run(code);
    assert!(ran.error.is_none(), "{code}: {:?}", ran.error);
    ran.value.unwrap_or(Value::Null)
}

fn failure(code: &str) -> ScriptError {
    run(code).error.unwrap_or_else(|| panic!("{code} did not fail"))
}

#[test]
fn the_returned_value_is_json_a_string_stays_a_string() {
    assert_eq!(value("return 1 + 1"), json!(2));
    assert_eq!(value("return 'plain'"), json!("plain"));
    assert_eq!(value("return {b: [1, 'x'], a: null}").to_string(), r#"{"b":[1,"x"],"a":null}"#);
    assert_eq!(run("const x = 1;").value, None);
    assert_eq!(run("return () => 1").value, None);
}

#[test]
fn top_level_await_and_a_tool_call_give_the_complete_result() {
    let ran = run("return await tools.mcp__t__echo({ text: 'hi' });");
    assert_eq!(
        ran.value_text().unwrap(),
        r#"{"content":[{"type":"text","text":"{\"text\":\"hi\"}"}]}"#
    );
    assert_eq!(ran.calls.len(), 1);
    assert_eq!(ran.calls[0].name, "mcp__t__echo");
    assert_eq!(ran.calls[0].server.as_deref(), Some("t"));
    assert_eq!(ran.calls[0].outcome.as_str(), "ok");
}

#[test]
fn a_tool_error_resolves_and_the_script_decides() {
    assert_eq!(
        value("const r = await tools.mcp__t__oops({}); return r.isError ? 'saw: ' + r.content[0].text : 'no'"),
        json!("saw: bad input")
    );
}

#[test]
fn a_syntax_error_names_its_line_and_column() {
    let error = failure("const a = 1;\nlet x = ;");
    assert_eq!(error.kind, ScriptErrorKind::Syntax);
    assert_eq!((error.line, error.column), (Some(2), Some(9)));
    assert!(error.message.contains("unexpected token"), "{}", error.message);
}

#[test]
fn a_thrown_error_names_its_line() {
    let error = failure("\n\nthrow new Error('boom')");
    assert_eq!(error.kind, ScriptErrorKind::Threw);
    assert_eq!(error.message, "boom");
    assert_eq!((error.line, error.column), (Some(3), Some(11)));
    let error = failure("null.x");
    assert_eq!(error.message, "TypeError: cannot read property 'x' of null");
    assert_eq!(failure("throw 'plain'").message, "plain");
}

#[test]
fn a_failed_call_rejects_naming_the_tool_and_the_cause_at_the_call() {
    let error = failure("const a = 1;\n  await tools.mcp__t__fail({});");
    assert_eq!(error.kind, ScriptErrorKind::ToolFailed);
    assert!(
        error.message.starts_with("mcp__t__fail: server \"t\": connection closed"),
        "{}",
        error.message
    );
    assert_eq!(error.line, Some(2));
    assert!(matches!(error.cause.as_deref().map(Error::root), Some(Error::Disconnected(_))));
    // Caught, it is the script's to handle.
    assert_eq!(
        value("try { await tools.mcp__t__fail({}) } catch (e) { return e.kind + ' / ' + (e instanceof Error) }"),
        json!("tool failed / true")
    );
}

#[test]
fn unknown_and_hidden_tools_do_not_exist() {
    let error = failure("await tools.mcp__t__ecoh({})");
    assert_eq!(error.kind, ScriptErrorKind::UnknownTool);
    assert!(error.message.contains("did you mean mcp__t__echo?"), "{}", error.message);
    assert_eq!(failure("await tools.mcp__t__secret({})").kind, ScriptErrorKind::UnknownTool);
    assert_eq!(
        value("return Object.keys(tools)"),
        json!(["mcp__t__echo", "mcp__t__sleep", "mcp__t__fail", "mcp__t__oops"])
    );
    assert_eq!(value("return typeof tools.then"), json!("undefined"));
}

#[test]
fn bad_arguments_reject_before_any_call() {
    let tools = Tools::new();
    let ran = run_with(
        &tools,
        "await tools.mcp__t__echo('text')",
        &ScriptOptions::default(),
        ScriptLimits::default(),
    );
    assert!(ran.error.unwrap().message.contains("must be an object"));
    assert!(tools.called.lock().unwrap().is_empty());
}

#[test]
fn promise_all_runs_calls_in_parallel_at_most_the_in_flight_limit() {
    let tools = Tools::new();
    let began = Instant::now();
    let code = "const r = await Promise.all([1,2,3,4].map(() => tools.mcp__t__sleep({ms: 300}))); return r.length";
    let ran = run_with(&tools, code, &ScriptOptions::default(), ScriptLimits::default());
    assert_eq!(ran.value, Some(json!(4)));
    // One after another they would take 1.2 s.
    assert!(began.elapsed() < Duration::from_millis(1000), "{:?}", began.elapsed());

    let tools = Tools::new();
    let code = "await Promise.all(Array.from({length: 20}, () => tools.mcp__t__sleep({ms: 40}))); return 'ok'";
    let ran = run_with(&tools, code, &ScriptOptions::default(), ScriptLimits::default());
    assert_eq!(ran.value, Some(json!("ok")));
    assert_eq!(tools.most_running.load(Ordering::SeqCst), 8);
    assert_eq!(ran.calls.len(), 20);
}

#[test]
fn the_calls_limit_refuses_the_next_call() {
    let tools = Tools::new();
    let limits = ScriptLimits::default().with_max_calls(3);
    let code = "for (let i = 0; i < 5; i++) await tools.mcp__t__echo({i});";
    let ran = run_with(&tools, code, &ScriptOptions::default(), limits);
    let error = ran.error.unwrap();
    assert_eq!(error.kind, ScriptErrorKind::Limit);
    assert!(error.message.contains("a script may make 3 calls"), "{}", error.message);
    assert_eq!(tools.called.lock().unwrap().len(), 3);
    // A call over the limit is not even kept.
    assert_eq!(ran.calls.len(), 3);
}

#[test]
fn the_hook_sees_each_call_with_its_parent_and_may_deny_it() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&seen);
    let hook = move |call: &PlannedCall| {
        kept.lock().unwrap().push((call.name.clone(), call.annotations.clone(), call.parent.run));
        if call.annotations.as_ref().is_some_and(|a| a["destructiveHint"] == true) {
            Verdict::Deny("destructive".into())
        } else {
            Verdict::Allow
        }
    };
    let tools = Tools::new();
    let options = ScriptOptions::default().with_hook(Arc::new(hook));
    let code = "await tools.mcp__t__echo({});\nawait tools.mcp__t__fail({});";
    let ran = run_with(&tools, code, &options, ScriptLimits::default());
    let error = ran.error.unwrap();
    assert_eq!(error.kind, ScriptErrorKind::Denied);
    assert_eq!(error.message, "mcp__t__fail: denied by the host: destructive");
    assert_eq!(error.line, Some(2));
    assert_eq!(*tools.called.lock().unwrap(), ["mcp__t__echo"]);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].2, 1);
    assert!(matches!(ran.calls[1].outcome, NestedOutcome::Denied(_)));
}

#[test]
fn a_stuck_loop_ends_within_50_ms_of_its_deadline() {
    let limits = ScriptLimits::default().with_timeout(Duration::from_millis(300));
    let began = Instant::now();
    let ran = run_with(&Tools::new(), "while (true) {}", &ScriptOptions::default(), limits);
    let took = began.elapsed();
    assert_eq!(ran.error.unwrap().kind, ScriptErrorKind::Timeout);
    // 50 ms past the deadline is the mark (`bench codemode` measures it,
    // quietly); a loaded test machine may add to the engine's start.
    assert!(took < Duration::from_millis(450), "{took:?}");
}

#[test]
fn a_slow_call_ends_at_the_deadline_and_is_cancelled() {
    let tools = Tools::new();
    let limits = ScriptLimits::default().with_timeout(Duration::from_millis(200));
    let code =
        "await Promise.all([tools.mcp__t__sleep({ms: 5000}), tools.mcp__t__sleep({ms: 5000})])";
    let began = Instant::now();
    let ran = run_with(&tools, code, &ScriptOptions::default(), limits);
    assert_eq!(ran.error.unwrap().kind, ScriptErrorKind::Timeout);
    assert!(began.elapsed() < Duration::from_millis(1000), "{:?}", began.elapsed());
    assert_eq!(tools.cancelled.load(Ordering::SeqCst), 2);
}

#[test]
fn the_hosts_cancel_ends_a_loop_and_a_call_in_flight() {
    for code in [
        "while (true) {}",
        "await tools.mcp__t__sleep({ms: 5000})",
        "await Promise.all([tools.mcp__t__sleep({ms: 5000}), tools.mcp__t__sleep({ms: 5000})])",
    ] {
        let cancel = CancelHandle::new();
        let trigger = cancel.clone();
        let stopper = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            trigger.cancel();
        });
        let began = Instant::now();
        let ran = run_with(
            &Tools::new(),
            code,
            &ScriptOptions::default().with_cancel(cancel),
            ScriptLimits::default(),
        );
        stopper.join().unwrap();
        assert_eq!(ran.error.unwrap().kind, ScriptErrorKind::Cancelled, "{code}");
        assert!(began.elapsed() < Duration::from_millis(1000), "{code}: {:?}", began.elapsed());
    }
}

#[test]
fn a_memory_bomb_stops_at_the_heap_cap() {
    let limits = ScriptLimits::default().with_memory(16 << 20);
    let code = "let a = []; while (true) a.push('x'.repeat(1 << 16) + a.length);";
    let ran = run_with(&Tools::new(), code, &ScriptOptions::default(), limits);
    let error = ran.error.unwrap();
    assert_eq!(error.kind, ScriptErrorKind::Limit, "{error:?}");
    assert!(error.message.contains("out of memory"), "{}", error.message);
}

#[test]
fn deep_recursion_stops_at_the_stack_cap() {
    let error = failure("function f(n) { return f(n + 1) + 1 } return f(0)");
    assert_eq!(error.kind, ScriptErrorKind::Limit, "{error:?}");
}

#[test]
fn an_oversized_source_is_refused() {
    let limits = ScriptLimits::default().with_max_source(10);
    let ran =
        run_with(&Tools::new(), "return 'longer than ten'", &ScriptOptions::default(), limits);
    assert_eq!(ran.error.unwrap().kind, ScriptErrorKind::Limit);
}

#[test]
fn escapes_fail() {
    assert_eq!(
        value("return [typeof require, typeof process, typeof std, typeof os, typeof fetch, \
               typeof setTimeout, typeof XMLHttpRequest, typeof Deno, typeof Bun].join()"),
        json!("undefined,undefined,undefined,undefined,undefined,undefined,undefined,undefined,undefined")
    );
    let import = failure("await import('fs')");
    assert!(import.message.contains("could not load module"), "{}", import.message);
    assert_eq!(failure("import fs from 'fs'").kind, ScriptErrorKind::Syntax);
    // eval and Function see the script's own globals, nothing more.
    let reached = value(
        "return [eval('typeof host'), Function('return typeof host')(), \
                         Function('return this')() === globalThis].join()",
    );
    assert_eq!(reached, json!("undefined,undefined,true"));
    let names = value(
        "return Object.getOwnPropertyNames(globalThis).filter(n => \
         ['tools','describeNamespace','searchTools','listResources','readResource','image','console','ALL_TOOLS'].includes(n) \
         || !/^[A-Z]/.test(n) && !['globalThis','parseInt','parseFloat','isNaN','isFinite','decodeURI',\
         'decodeURIComponent','encodeURI','encodeURIComponent','escape','unescape','eval','undefined','NaN','Infinity',\
         'queueMicrotask','structuredClone','atob','btoa','performance'].includes(n)).sort()",
    );
    assert_eq!(
        names,
        json!([
            "ALL_TOOLS",
            "console",
            "describeNamespace",
            "image",
            "listResources",
            "readResource",
            "searchTools",
            "tools"
        ])
    );
}

#[test]
fn the_globals_are_frozen() {
    assert_eq!(
        value("'use strict'; try { tools = 1 } catch (e) { return e.name }"),
        json!("TypeError")
    );
    assert_eq!(
        value("try { tools.mcp__t__echo = 1 } catch (e) { return e.name }"),
        json!("TypeError")
    );
    assert_eq!(
        value("try { ALL_TOOLS[0].name = 'x' } catch (e) { return e.name }"),
        json!("TypeError")
    );
    assert_eq!(value("try { console.log = null } catch (e) { return e.name }"), json!("TypeError"));
}

#[test]
fn nothing_of_one_script_reaches_the_next() {
    let tools = Tools::new();
    let first = "Object.prototype.polluted = 1; Array.prototype.map = null; \
                 globalThis.kept = {secret: 42}; JSON.parse = () => 'evil'; return 1";
    run_with(&tools, first, &ScriptOptions::default(), ScriptLimits::default());
    let second = "return [({}).polluted, typeof [].map, typeof kept, JSON.parse('1')]";
    let ran = run_with(&tools, second, &ScriptOptions::default(), ScriptLimits::default());
    assert_eq!(ran.value, Some(json!([null, "function", "undefined", 1])));
}

#[test]
fn the_catalog_globals_answer() {
    assert_eq!(value("return describeNamespace('t').tools.length"), json!(4));
    assert_eq!(value("return describeNamespace('mcp__t').description"), json!("Test tools."));
    assert!(failure("describeNamespace('nope')").message.contains("no server named \"nope\""));
    let found = value("return searchTools('echo', {limit: 2})");
    assert_eq!(found[0]["name"], "mcp__t__echo");
    assert_eq!(found[0]["signature"], "mcp__t__echo(args: {}): Promise<CallToolResult>");
    assert_eq!(value("return ALL_TOOLS.map(t => t.name).length"), json!(4));
    assert_eq!(value("return ALL_TOOLS[2].annotations"), json!({"destructiveHint": true}));
}

#[test]
fn resources_are_read_and_listed() {
    assert_eq!(
        value("const r = await readResource('t', 't://a'); return [r.server, r.uri, r.contents[0].text]"),
        json!(["t", "t://a", "hello"])
    );
    assert_eq!(
        value("return (await listResources()).map(r => r.server + ' ' + r.uri)"),
        json!(["t t://a"])
    );
    assert_eq!(failure("await readResource('x', 'y')").kind, ScriptErrorKind::ToolFailed);
}

#[test]
fn console_output_is_captured_and_bounded() {
    let ran = run("console.log('a', 1, {b: 2}); console.error('bad'); return 'v'");
    assert_eq!(ran.console, "a 1 {\"b\":2}\n[error] bad\n");
    let limits = ScriptLimits::default().with_max_output(100);
    let ran = run_with(
        &Tools::new(),
        "for (let i = 0; i < 50; i++) console.log('line ' + i)",
        &ScriptOptions::default(),
        limits,
    );
    assert!(ran.console.len() < 200, "{}", ran.console);
    assert!(ran.console.contains("more console line(s) left out"), "{}", ran.console);
}

#[test]
fn images_are_forwarded() {
    let ran = run("image({type: 'image', data: 'AAAA', mimeType: 'image/png'}); return 1");
    assert_eq!(ran.images, vec![json!({"type": "image", "data": "AAAA", "mimeType": "image/png"})]);
    assert_eq!(
        failure("image({type: 'text'})").message,
        "TypeError: image() takes an image content block: { type: \"image\", data, mimeType }"
    );
}

#[test]
fn a_promise_nothing_settles_ends_the_script() {
    let error = failure("await new Promise(() => {})");
    assert!(error.message.contains("nothing will settle"), "{}", error.message);
}

#[test]
fn calls_left_in_flight_when_the_script_returns_are_cancelled() {
    let tools = Tools::new();
    let code = "tools.mcp__t__sleep({ms: 5000}); tools.mcp__t__sleep({ms: 5000});\n\
                await tools.mcp__t__echo({}); return 'early'";
    let began = Instant::now();
    let ran = run_with(&tools, code, &ScriptOptions::default(), ScriptLimits::default());
    assert_eq!(ran.value, Some(json!("early")));
    assert!(began.elapsed() < Duration::from_secs(1), "{:?}", began.elapsed());
    assert_eq!(tools.cancelled.load(Ordering::SeqCst), 2);
    let refused: Vec<&str> = ran.calls.iter().map(|call| call.outcome.as_str()).collect();
    assert_eq!(refused, ["ok", "refused", "refused"]);
    // Calls asked for as the script ended are never made.
    let tools = Tools::new();
    let ran = run_with(
        &tools,
        "tools.mcp__t__echo({}); return 1",
        &ScriptOptions::default(),
        ScriptLimits::default(),
    );
    assert_eq!(ran.value, Some(json!(1)));
    assert!(tools.called.lock().unwrap().is_empty());
    assert_eq!(ran.calls[0].outcome.as_str(), "refused");
}

#[test]
fn a_caller_with_room_runs_the_script_on_its_own_thread_and_others_get_one() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&seen);
    let hook = move |_: &PlannedCall| {
        kept.lock().unwrap().push(std::thread::current().name().map(str::to_owned));
        Verdict::Allow
    };
    let options = ScriptOptions::default().with_hook(Arc::new(hook));
    for (stack, name) in [(16 << 20, "roomy"), (256 << 10, "small")] {
        let options = options.clone();
        let room = std::thread::Builder::new()
            .name(name.into())
            .stack_size(stack)
            .spawn(move || {
                let tools = Tools::new();
                let code = "await tools.mcp__t__echo({}); function f(n) { return f(n + 1) + 1 } return f(0)";
                let ran = run_with(&tools, code, &options, ScriptLimits::default());
                // Deep recursion stops at the limit on either thread.
                assert_eq!(ran.error.unwrap().kind, ScriptErrorKind::Limit);
                super::stack::left()
            })
            .unwrap()
            .join()
            .unwrap();
        // The system may give a thread a bigger stack than asked (a cached
        // one): where the script ran follows what the thread really has.
        let expected =
            if room.is_some_and(|left| left >= (2 << 20) - (64 << 10)) { name } else { "codemode" };
        if cfg!(target_os = "linux") && name == "roomy" {
            assert_eq!(expected, "roomy");
        }
        assert_eq!(seen.lock().unwrap().pop().flatten().as_deref(), Some(expected));
    }
}

#[test]
fn a_script_cannot_run_its_own_code_inside_a_native_throw() {
    // Error.prepareStackTrace would run while the engine makes an error.
    let code = "Error.prepareStackTrace = () => console.log('inside');\n\
                try { describeNamespace('nope') } catch (e) {}\n\
                for (let i = 0; i < 20; i++) { try { image({type: 'image', data: 'AA', mimeType: 'image/png'}) } catch (e) {} }\n\
                return typeof Error.prepareStackTrace";
    let ran = run(code);
    assert!(ran.error.is_none(), "{:?}", ran.error);
    assert_eq!(ran.value, Some(json!("undefined")));
    assert_eq!(ran.console, "");
    assert_eq!(ran.images.len(), 16);
}

#[test]
fn calls_past_the_limit_are_refused_before_rust_keeps_them() {
    let tools = Tools::new();
    let limits = ScriptLimits::default().with_max_calls(5);
    let code = "const big = { x: 'y'.repeat(1 << 20) };\n\
                const all = await Promise.allSettled(Array.from({ length: 60 }, () => tools.mcp__t__echo(big)));\n\
                return all.map(r => r.status === 'fulfilled' ? 'ok' : r.reason.kind)";
    let ran = run_with(&tools, code, &ScriptOptions::default(), limits);
    let outcomes = ran.value.unwrap();
    let limit = outcomes.as_array().unwrap().iter().filter(|o| *o == "limit").count();
    assert_eq!(limit, 55, "{outcomes}");
    assert_eq!(tools.called.lock().unwrap().len(), 5);
    assert!(ran.calls.len() <= 5, "{}", ran.calls.len());
    // A name no tool could have is refused at once, never spelled against.
    let ran = run("const name = 'mcp__t__' + 'x'.repeat(1 << 24); await tools[name]({})");
    assert_eq!(ran.error.unwrap().kind, ScriptErrorKind::UnknownTool);
}

#[test]
fn arguments_json_cannot_carry_are_refused_not_sent_as_something_else() {
    let tools = Tools::new();
    let ran = run_with(
        &tools,
        "await tools.mcp__t__echo({ text: '\\uD83D' })",
        &ScriptOptions::default(),
        ScriptLimits::default(),
    );
    let error = ran.error.unwrap();
    assert!(error.message.contains("cannot be sent as JSON"), "{}", error.message);
    assert!(tools.called.lock().unwrap().is_empty());
}

#[test]
fn what_a_script_throws_or_returns_is_said_plainly() {
    assert_eq!(failure("throw { code: 5 }").message, r#"{"code":5}"#);
    let circular = failure("const a = {}; a.self = a; return a");
    assert!(circular.message.contains("cannot be written as JSON"), "{}", circular.message);
    let open = failure("const x = 1;\nreturn (x +");
    assert_eq!(open.kind, ScriptErrorKind::Syntax);
    assert_eq!(open.line, Some(2));
    assert!(open.message.contains("at the end of the script"), "{}", open.message);
    assert_eq!(value("#!/usr/bin/env tether run\nreturn 7"), json!(7));
    let bomb = run_with(
        &Tools::new(),
        "const a = []; while (true) a.push('x' + a.length);",
        &ScriptOptions::default(),
        ScriptLimits::default().with_memory(8 << 20),
    );
    // With no room left even for an error, the engine throws null.
    let error = bomb.error.unwrap();
    assert!(error.message.contains("the heap limit is 8 MiB"), "{}", error.message);
}

#[test]
fn unknown_names_get_the_nearest_and_the_reason() {
    let bare = failure("await tools.echo({})");
    assert_eq!(bare.kind, ScriptErrorKind::UnknownTool);
    assert!(bare.message.contains("did you mean mcp__t__echo?"), "{}", bare.message);
    let server = failure("await tools.mcp__u__echo({})");
    assert!(
        server.message.contains("no server mcp__u (did you mean mcp__t?)"),
        "{}",
        server.message
    );
    let hidden = failure("await tools.mcp__t__secret({})");
    assert!(hidden.message.contains("is hidden"), "{}", hidden.message);
    let far = failure("await tools.mcp__t__zzzzzzzz({})");
    assert!(far.message.contains("its tools: mcp__t__echo"), "{}", far.message);
}

#[test]
fn servers_are_named_in_any_spelling_and_unknown_ones_said() {
    assert_eq!(value("return (await readResource('mcp__t', 't://a')).server"), json!("t"));
    let unknown = failure("await readResource('nope', 't://a')");
    assert!(unknown.message.contains("no server named \"nope\""), "{}", unknown.message);
    assert!(matches!(unknown.cause.as_deref(), Some(Error::UnknownServer(_))));
}

#[test]
fn the_host_sees_console_lines_as_they_are_written() {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&lines);
    let options = ScriptOptions::default()
        .with_console(move |line| kept.lock().unwrap().push(line.to_owned()));
    let ran = run_with(
        &Tools::new(),
        "console.log('a'); console.warn('b'); return 1",
        &options,
        ScriptLimits::default(),
    );
    assert_eq!(ran.console, "a\n[warn] b\n");
    assert_eq!(*lines.lock().unwrap(), ["a", "[warn] b"]);
}
