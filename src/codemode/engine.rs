//! Running one script: a fresh QuickJS runtime and context (on the
//! caller's thread when its stack has room, else on a `codemode` thread),
//! the globals of `prelude.js`, and the loop that drives the script's
//! promises and makes its calls.
//!
//! Each script gets its own runtime, so nothing of one script (a polluted
//! prototype, a kept reference) can reach the next, and its heap and stack
//! limits are its own. A runtime and context cost about 0.13 ms to make,
//! well within the start budget, so none is pooled.
//!
//! The loop, until the script's promise settles: run the engine's pending
//! jobs; take the calls the script made; answer at once those that cannot
//! be made (over the limit, unknown, denied); make a lone call on this
//! thread, or hand calls started together to workers; then wait for an
//! ended call, the host's cancel handle, or the deadline. The interrupt
//! handler stops JavaScript that runs past the deadline or a cancel, so a
//! `while (true) {}` ends within milliseconds of it.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{select, Receiver, TryRecvError};
use rquickjs::context::EvalOptions;
use rquickjs::{Array, Context, Ctx, Function, Persistent, Promise, Runtime, Value as JsValue};
use serde_json::{json, Value};

use super::calls::{failure_kind, perform, Done, Job, Request, Workers};
use super::gate::{Call, Gate, Refusal};
use super::mailbox::{native_functions, Mailbox};
use super::thrown::{error_of, heap_nearly_full, SCRIPT_FILE};
use super::{
    CallHook, Catalog, NestedCall, NestedOutcome, ParentCall, ScriptError, ScriptErrorKind,
    ScriptHost, ScriptOptions, ScriptRun,
};
use crate::client::{CallOptions, CancelHandle};
use crate::config::ScriptLimits;
use crate::error::Error;

/// The globals, as one function expression (see its own comment).
const PRELUDE: &str = include_str!("prelude.js");
/// The stack the engine's thread has beyond the script's own limit: for
/// the engine's and tether's frames around it.
const THREAD_STACK_SLACK: usize = 1 << 20;

/// Runs `code`; see `codemode::run`.
pub(super) fn run(
    host: &dyn ScriptHost,
    code: &str,
    options: &ScriptOptions,
    limits: ScriptLimits,
    parent: ParentCall,
) -> Result<ScriptRun, Error> {
    if code.len() > limits.max_source {
        return Ok(ScriptRun::failed(ScriptError {
            kind: ScriptErrorKind::Limit,
            message: format!(
                "the script is {} bytes; the limit is {} bytes",
                code.len(),
                limits.max_source
            ),
            line: None,
            column: None,
            cause: None,
        }));
    }
    // The script's time runs from here: waiting for its servers spends it.
    let started = Instant::now();
    let server_names: Vec<String> =
        host.catalog().servers.iter().map(|server| server.name.clone()).collect();
    let names: Vec<&str> = server_names.iter().map(String::as_str).collect();
    let until = deadline_of(started, limits.timeout);
    match super::servers_named(code, &names) {
        super::Named::All => host.wait_for(None, until),
        super::Named::Some(named) if !named.is_empty() => host.wait_for(Some(&named), until),
        super::Named::Some(_) => {}
    }
    let catalog = host.catalog();
    let hook = options.hook.as_deref();
    let setup = Setup { host, catalog, options, limits, hook, parent, started };
    if super::stack::left().is_some_and(|left| left >= limits.stack + THREAD_STACK_SLACK) {
        // Room enough here: the script's calls go out from the caller's
        // own thread, as its direct calls do.
        return Engine::new(setup)?.run(code);
    }
    thread::scope(|scope| {
        let engine = thread::Builder::new()
            .name("codemode".into())
            .stack_size(limits.stack + THREAD_STACK_SLACK)
            .spawn_scoped(scope, move || Engine::new(setup)?.run(code))
            .map_err(|err| Error::Engine(format!("no thread for the script: {err}")))?;
        engine.join().unwrap_or_else(|_| Err(Error::Engine("the script engine panicked".into())))
    })
}

struct Engine<'h> {
    host: &'h dyn ScriptHost,
    options: &'h ScriptOptions,
    limits: ScriptLimits,
    gate: Gate<'h>,
    mailbox: Rc<RefCell<Mailbox>>,
    runtime: Runtime,
    context: Context,
    started: Instant,
    deadline: Instant,
    /// Cancels the calls in flight when the script ends before them.
    calls_cancel: CancelHandle,
    calls: Vec<NestedCall>,
    /// The calls in flight, by id: what they were, and when they started.
    in_flight: Vec<(Call, Duration)>,
    /// Calls admitted but not started: more than the in-flight limit.
    waiting: VecDeque<Call>,
    /// The script's lines, as given.
    source_lines: u32,
}

/// A duration as people read it: `30 s`, `2.5 s`, `250 ms`.
fn seconds(duration: Duration) -> String {
    match duration.as_millis() {
        millis if millis < 1000 => format!("{millis} ms"),
        millis if millis % 1000 == 0 => format!("{} s", millis / 1000),
        _ => format!("{:.1} s", duration.as_secs_f64()),
    }
}

/// What an engine is made from.
struct Setup<'h> {
    host: &'h dyn ScriptHost,
    catalog: Catalog,
    options: &'h ScriptOptions,
    limits: ScriptLimits,
    hook: Option<&'h dyn CallHook>,
    parent: ParentCall,
    /// When the script's time began.
    started: Instant,
}

/// The instant `timeout` after `started`; a timeout too long to add is no
/// limit at all.
fn deadline_of(started: Instant, timeout: Duration) -> Instant {
    let far = Duration::from_secs(100 * 365 * 86_400);
    started.checked_add(timeout).unwrap_or_else(|| started + far)
}

/// How the loop ended.
enum Ending {
    Settled,
    Failed(ScriptError),
}

impl<'h> Engine<'h> {
    fn new(setup: Setup<'h>) -> Result<Engine<'h>, Error> {
        let Setup { host, catalog, options, limits, hook, parent, started } = setup;
        let deadline = deadline_of(started, limits.timeout);
        let runtime = Runtime::new()
            .map_err(|err| Error::Engine(format!("the engine could not start: {err}")))?;
        runtime.set_memory_limit(limits.memory);
        runtime.set_max_stack_size(limits.stack);
        let cancelled: Option<Receiver<()>> =
            options.cancel.as_ref().map(|cancel| cancel.receiver().clone());
        runtime.set_interrupt_handler(Some(Box::new(move || {
            Instant::now() >= deadline
                || cancelled
                    .as_ref()
                    .is_some_and(|rx| matches!(rx.try_recv(), Err(TryRecvError::Disconnected)))
        })));
        let context = Context::full(&runtime)
            .map_err(|err| Error::Engine(format!("the engine could not start: {err}")))?;
        let mailbox = Mailbox::new(catalog, &limits, options.console.clone());
        let mailbox = Rc::new(RefCell::new(mailbox));
        Ok(Engine {
            host,
            options,
            limits,
            gate: Gate::new(hook, parent),
            mailbox,
            runtime,
            context,
            started,
            deadline,
            calls_cancel: CancelHandle::new(),
            calls: Vec::new(),
            in_flight: Vec::new(),
            waiting: VecDeque::new(),
            source_lines: 0,
        })
    }

    fn run(mut self, code: &str) -> Result<ScriptRun, Error> {
        self.source_lines = u32::try_from(code.lines().count()).unwrap_or(u32::MAX);
        let started = self.context.with(|ctx| self.start(&ctx, code));
        let ending = match started {
            Ok((deliver, finish, promise)) => {
                let ending = thread::scope(|scope| {
                    let mut workers = Workers::new(scope, self.host);
                    let ending = self.drive(&deliver, &promise, &mut workers);
                    // Whatever is still in flight is cancelled (the servers
                    // are told), and the workers end with it.
                    if !self.in_flight.is_empty() {
                        self.calls_cancel.cancel();
                    }
                    workers.close();
                    ending
                });
                self.settle_abandoned();
                match ending {
                    Ending::Settled => self.outcome(&promise, &finish),
                    Ending::Failed(error) => Err(error),
                }
            }
            Err(error) => Err(error),
        };
        let mut mailbox = self.mailbox.borrow_mut();
        let mut console = std::mem::take(&mut mailbox.console);
        if mailbox.dropped_lines > 0 {
            console.push_str(&format!(
                "… {} more console line(s) left out: the output limit is {} bytes\n",
                mailbox.dropped_lines, self.limits.max_output
            ));
        }
        let (value, error) = match ending {
            Ok(value) => (value, None),
            Err(error) => (None, Some(error)),
        };
        Ok(ScriptRun {
            value,
            console,
            images: std::mem::take(&mut mailbox.images),
            calls: std::mem::take(&mut self.calls),
            error,
            elapsed: self.started.elapsed(),
        })
    }

    /// Installs the globals and starts the script: the functions the loop
    /// calls, and the script's promise.
    #[allow(clippy::type_complexity)]
    fn start(
        &self,
        ctx: &Ctx<'_>,
        code: &str,
    ) -> Result<
        (
            Persistent<Function<'static>>,
            Persistent<Function<'static>>,
            Persistent<Promise<'static>>,
        ),
        ScriptError,
    > {
        let fail = |ctx: &Ctx<'_>| self.thrown(ctx, ctx.catch());
        let host = native_functions(ctx, &self.mailbox).map_err(|_| fail(ctx))?;
        let mut prelude_options = EvalOptions::default();
        prelude_options.filename = Some("prelude".into());
        let prelude: Function =
            ctx.eval_with_options(PRELUDE, prelude_options).map_err(|_| fail(ctx))?;
        let made: Array = prelude.call((host,)).map_err(|_| fail(ctx))?;
        let deliver: Function = made.get(0).map_err(|_| fail(ctx))?;
        let finish: Function = made.get(1).map_err(|_| fail(ctx))?;
        let mut script_options = EvalOptions::default();
        script_options.filename = Some(SCRIPT_FILE.into());
        // A `#!` line, as a file run as a program starts, is a comment here
        // (so that the lines keep their numbers).
        let (shebang, code) = match code.strip_prefix("#!") {
            Some(_) => ("//\n", code.split_once('\n').map_or("", |(_, rest)| rest)),
            None => ("", code),
        };
        let wrapped = format!("(async () => {{\n{shebang}{code}\n}})()");
        let promise: Promise = ctx.eval_with_options(wrapped, script_options).map_err(|_| {
            let mut error = fail(ctx);
            if let Some(message) = error.message.strip_prefix("SyntaxError: ") {
                error.kind = ScriptErrorKind::Syntax;
                error.message = message.to_owned();
            }
            error
        })?;
        Ok((
            Persistent::save(ctx, deliver),
            Persistent::save(ctx, finish),
            Persistent::save(ctx, promise),
        ))
    }

    /// The loop (see the module docs); ends when the promise settled or the
    /// script must stop.
    fn drive(
        &mut self,
        deliver: &Persistent<Function<'static>>,
        promise: &Persistent<Promise<'static>>,
        workers: &mut Workers<'_, '_>,
    ) -> Ending {
        loop {
            if let Err(error) = self.run_jobs() {
                return Ending::Failed(error);
            }
            let settled = self.context.with(|ctx| {
                promise.clone().restore(&ctx).map(|promise| {
                    !matches!(promise.state(), rquickjs::promise::PromiseState::Pending)
                })
            });
            match settled {
                Ok(true) => return Ending::Settled,
                Ok(false) => {}
                Err(_) => return Ending::Failed(self.stopped("the script's promise was lost")),
            }
            // The calls the script made since the last look.
            let requests: Vec<(u32, Request)> =
                self.mailbox.borrow_mut().requests.drain(..).collect();
            let mut answered = false;
            let mut to_make: Vec<Call> = Vec::new();
            for (id, request) in requests {
                let at = self.started.elapsed();
                let admitted = self.gate.admit(&self.mailbox.borrow().catalog, id, request, at);
                match admitted {
                    Ok(call) => to_make.push(call),
                    Err(refusal) => {
                        answered = true;
                        let Refusal { id, record, message, kind } = *refusal;
                        if let Err(error) = self.deliver_failure(deliver, id, &message, kind) {
                            return Ending::Failed(error);
                        }
                        self.record(record);
                    }
                }
            }
            self.waiting.extend(to_make);
            let busy = self.in_flight.len();
            if busy == 0 && self.waiting.len() == 1 && !answered {
                // A lone call: made here, the script has nothing else to do.
                let call = self.waiting.pop_front().expect("one call");
                let options = self.inline_options();
                let began = Instant::now();
                let outcome = perform(self.host, &call.request, &options);
                let done = Done { id: call.id, outcome, elapsed: began.elapsed() };
                self.in_flight.push((call, began - self.started));
                if let Err(error) = self.finish_call(deliver, done) {
                    return Ending::Failed(error);
                }
                continue;
            }
            while self.in_flight.len() < self.limits.max_in_flight.max(1) {
                let Some(call) = self.waiting.pop_front() else { break };
                let job = Job {
                    id: call.id,
                    request: call.request.clone(),
                    options: self.worker_options(),
                };
                workers.send(job, self.in_flight.len());
                self.in_flight.push((call, self.started.elapsed()));
            }
            if answered {
                continue;
            }
            if self.in_flight.is_empty() {
                if self.runtime.is_job_pending() {
                    continue;
                }
                return Ending::Failed(ScriptError {
                    kind: ScriptErrorKind::Threw,
                    message: "the script waits for a promise that nothing will settle".into(),
                    line: None,
                    column: None,
                    cause: None,
                });
            }
            let left = self.deadline.saturating_duration_since(Instant::now());
            let never = crossbeam_channel::never();
            let cancelled = self.options.cancel.as_ref().map_or(&never, |cancel| cancel.receiver());
            select! {
                recv(workers.done) -> done => {
                    if let Ok(done) = done {
                        if let Err(error) = self.finish_call(deliver, done) {
                            return Ending::Failed(error);
                        }
                    }
                }
                recv(cancelled) -> _ => return Ending::Failed(self.stopped("cancelled by the host")),
                default(left) => return Ending::Failed(self.stopped("")),
            }
        }
    }

    /// A call ended: its record, and its outcome handed to the script.
    fn finish_call(
        &mut self,
        deliver: &Persistent<Function<'static>>,
        done: Done,
    ) -> Result<(), ScriptError> {
        let Some(index) = self.in_flight.iter().position(|(call, _)| call.id == done.id) else {
            return Ok(());
        };
        let (call, started) = self.in_flight.swap_remove(index);
        let (delivered, outcome) = match done.outcome {
            Ok(value) => {
                let text = serde_json::to_string(&value).unwrap_or_else(|_| "null".into());
                (self.deliver(deliver, call.id, true, text), NestedOutcome::Returned(value))
            }
            Err(error) => {
                let message = format!("{}: {}", call.request.name(), error.chain());
                let kind = failure_kind(&error);
                let delivered = self.deliver_failure(deliver, call.id, &message, kind);
                (delivered, NestedOutcome::Failed(Arc::new(error)))
            }
        };
        let name = call.request.name().to_owned();
        self.record(NestedCall {
            name,
            server: call.server,
            arguments: call.request.into_arguments(),
            started,
            elapsed: done.elapsed,
            outcome,
        });
        delivered
    }

    /// Rejects call `id` with `message`; the error's `call` is the index
    /// its record is about to get.
    fn deliver_failure(
        &mut self,
        deliver: &Persistent<Function<'static>>,
        id: u32,
        message: &str,
        kind: ScriptErrorKind,
    ) -> Result<(), ScriptError> {
        let payload = json!({"message": message, "kind": kind.as_str(), "call": self.calls.len()});
        self.deliver(deliver, id, false, payload.to_string())
    }

    /// Calls the prelude's `deliver(id, ok, payload)`.
    fn deliver(
        &self,
        deliver: &Persistent<Function<'static>>,
        id: u32,
        ok: bool,
        payload: String,
    ) -> Result<(), ScriptError> {
        self.context.with(|ctx| {
            let deliver = deliver.clone().restore(&ctx).map_err(|_| self.stopped("lost"))?;
            deliver.call::<_, ()>((id, ok, payload)).map_err(|_| self.thrown(&ctx, ctx.catch()))
        })
    }

    fn record(&mut self, call: NestedCall) {
        self.gate.ended(&call);
        self.calls.push(call);
    }

    /// Runs the engine's pending jobs (promise reactions) until none is left.
    fn run_jobs(&self) -> Result<(), ScriptError> {
        loop {
            match self.runtime.execute_pending_job() {
                Ok(true) => {}
                Ok(false) => return Ok(()),
                Err(job) => {
                    return Err(job.0.with(|ctx| self.thrown(&ctx, ctx.catch())));
                }
            }
        }
    }

    /// The script's value, or its error, once its promise settled.
    fn outcome(
        &self,
        promise: &Persistent<Promise<'static>>,
        finish: &Persistent<Function<'static>>,
    ) -> Result<Option<Value>, ScriptError> {
        self.context.with(|ctx| {
            let promise = promise.clone().restore(&ctx).map_err(|_| self.stopped("lost"))?;
            match promise.result::<JsValue>() {
                Some(Ok(value)) => {
                    let finish = finish.clone().restore(&ctx).map_err(|_| self.stopped("lost"))?;
                    let shown: Array =
                        finish.call((value,)).map_err(|_| self.thrown(&ctx, ctx.catch()))?;
                    let kind: String = shown.get(0).unwrap_or_default();
                    let text: String = shown.get(1).unwrap_or_default();
                    match kind.as_str() {
                        "string" => Ok(Some(Value::String(text))),
                        "json" => Ok(Some(
                            serde_json::from_slice(text.as_bytes()).unwrap_or(Value::String(text)),
                        )),
                        "error" => Err(ScriptError {
                            kind: ScriptErrorKind::Threw,
                            message: text,
                            line: None,
                            column: None,
                            cause: None,
                        }),
                        _ => Ok(None),
                    }
                }
                Some(Err(_)) => Err(self.thrown(&ctx, ctx.catch())),
                None => Err(self.stopped("the script did not finish")),
            }
        })
    }

    /// The calls still in flight when the script ended, recorded as
    /// cancelled, and those it asked for that never started.
    fn settle_abandoned(&mut self) {
        let asked: Vec<(u32, Request)> = self.mailbox.borrow_mut().requests.drain(..).collect();
        let never_started = self
            .waiting
            .drain(..)
            .chain(asked.into_iter().map(|(id, request)| Call { id, request, server: None }));
        for call in never_started.collect::<Vec<_>>() {
            self.record(NestedCall {
                name: call.request.name().to_owned(),
                server: call.server,
                arguments: call.request.arguments(),
                started: self.started.elapsed(),
                elapsed: Duration::ZERO,
                outcome: NestedOutcome::Refused("not made: the script ended first".into()),
            });
        }
        for (call, started) in std::mem::take(&mut self.in_flight) {
            let record = NestedCall {
                name: call.request.name().to_owned(),
                server: call.server,
                arguments: call.request.arguments(),
                started,
                elapsed: self.started.elapsed().saturating_sub(started),
                outcome: NestedOutcome::Refused(
                    "the script ended before the call did; it was cancelled".into(),
                ),
            };
            self.record(record);
        }
    }

    /// Why the script was stopped: its deadline, the host's cancel, or
    /// `what` when it is neither.
    fn stopped(&self, what: &str) -> ScriptError {
        let cancelled = self.options.cancel.as_ref().is_some_and(CancelHandle::is_cancelled);
        let (kind, message) = if cancelled {
            (ScriptErrorKind::Cancelled, "cancelled by the host".to_owned())
        } else if Instant::now() >= self.deadline || what.is_empty() {
            (
                ScriptErrorKind::Timeout,
                format!("the script ran past its time limit ({})", seconds(self.limits.timeout)),
            )
        } else {
            (ScriptErrorKind::Threw, what.to_owned())
        };
        ScriptError { kind, message, line: None, column: None, cause: None }
    }

    /// What a thrown value means; the engine's interrupt is the deadline
    /// or the host's cancel.
    fn thrown<'js>(&self, ctx: &Ctx<'js>, thrown: JsValue<'js>) -> ScriptError {
        // Out of memory, the engine may have had no room left for an error.
        let nothing = thrown.is_null() || thrown.is_undefined();
        let mut error = match error_of(ctx, thrown, &self.calls) {
            Some(error) => error,
            None => return self.stopped(""),
        };
        if nothing && heap_nearly_full(ctx) {
            error.kind = ScriptErrorKind::Limit;
            error.message = "out of memory".into();
        } else if nothing {
            // The heap may be freed again by now: say both.
            error.message = format!(
                "the script threw {}, as a script also ends that runs out of memory \
                 (the heap limit is {} MiB)",
                error.message,
                self.limits.memory >> 20
            );
        }
        if error.kind == ScriptErrorKind::Limit && error.message.contains("out of memory") {
            error.message =
                format!("out of memory: the heap limit is {} MiB", self.limits.memory >> 20);
        }
        // Past the script's last line is the wrapper's: the script ended early.
        if let Some(line) = error.line.filter(|line| *line > self.source_lines) {
            let _ = line;
            error.line = Some(self.source_lines.max(1));
            error.column = None;
            error.message =
                format!("{} (at the end of the script: is something left open?)", error.message);
        }
        error
    }

    /// A lone call, on this thread: the host's cancel handle (none keeps
    /// the hub's fastest path), within the script's deadline.
    fn inline_options(&self) -> CallOptions {
        let mut options = CallOptions::default().with_deadline(self.deadline);
        options.cancel = self.options.cancel.clone();
        options.progress = self.options.progress.clone();
        options
    }

    /// A call on a worker: cancelled when the script ends first.
    fn worker_options(&self) -> CallOptions {
        let mut options = CallOptions::default()
            .with_deadline(self.deadline)
            .with_cancel(self.calls_cancel.clone());
        options.progress = self.options.progress.clone();
        options
    }
}

impl ScriptRun {
    /// A run that failed before the script started.
    fn failed(error: ScriptError) -> ScriptRun {
        ScriptRun {
            value: None,
            console: String::new(),
            images: Vec::new(),
            calls: Vec::new(),
            error: Some(error),
            elapsed: Duration::ZERO,
        }
    }
}
