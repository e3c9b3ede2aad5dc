//! The command line's host: it offers the project folder (or `--root`
//! folders) as roots, and answers a server's elicitation on the terminal.
//!
//! A form asks for each field of the server's schema (with its default),
//! then whether to send it; a URL request shows the whole URL and asks before
//! opening it with the desktop opener (no shell). Without a terminal on
//! both stdin and stderr, elicitation is not even declared to servers, so
//! they never ask. A question the server withdraws while it waits for its
//! answer is said, and not answered. Sampling is declined: there is no
//! model here.

use std::io::{self, BufRead, IsTerminal, Write};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{json, Map, Value};

use tether::{Host, Root, RpcError};

use super::escape::{escaped, escaped_body};
use super::form;
use super::output::lock;

/// Answers on the terminal, one question at a time, or from a script's
/// answers (`--answers`, `--accept-defaults`).
pub(super) struct TerminalHost {
    interactive: bool,
    /// A script's answers to forms: then no form is asked on the terminal.
    scripted: Option<Scripted>,
    /// The folders offered to servers (`roots/list`).
    roots: Vec<Root>,
    /// Two servers asking at once take turns.
    asking: Mutex<()>,
    /// Set when the server asking now gave its question up.
    withdrawn: AtomicBool,
}

/// `--answers JSON` (the values of forms' fields, by name) and
/// `--accept-defaults` (each field's default where no answer is given).
#[derive(Debug, Clone, Default)]
pub(super) struct Scripted {
    pub(super) answers: Option<Map<String, Value>>,
    pub(super) accept_defaults: bool,
}

impl TerminalHost {
    pub(super) fn new(roots: Vec<Root>, scripted: Option<Scripted>) -> TerminalHost {
        TerminalHost {
            scripted,
            interactive: io::stdin().is_terminal() && io::stderr().is_terminal(),
            roots,
            asking: Mutex::new(()),
            withdrawn: AtomicBool::new(false),
        }
    }
}

impl Host for TerminalHost {
    fn roots(&self) -> Vec<Root> {
        self.roots.clone()
    }

    fn handles_elicitation(&self) -> bool {
        self.interactive || self.scripted.is_some()
    }

    fn elicitation_modes(&self) -> tether::ElicitationModes {
        // A script answers forms; only a person opens pages.
        tether::ElicitationModes::new(true, self.interactive)
    }

    fn elicit(&self, server: &str, params: &Value) -> Result<Value, RpcError> {
        let is_form = params.get("mode").and_then(Value::as_str).unwrap_or("form") == "form";
        if let (Some(scripted), true) = (&self.scripted, is_form) {
            let schema = params.get("requestedSchema").unwrap_or(&Value::Null);
            let fields = form::fields(schema);
            return Ok(
                match form::fill(&fields, scripted.answers.as_ref(), scripted.accept_defaults) {
                    Ok(content) => json!({"action": "accept", "content": content}),
                    Err(why) => {
                        eprintln!("Server {server:?} asked a form; declined: {why}");
                        json!({"action": "decline"})
                    }
                },
            );
        }
        if !self.interactive {
            // Only a server that ignored what tether declared gets here.
            if let Some(url) = params.get("url").and_then(Value::as_str) {
                eprintln!(
                    "Server {server:?} asked to open a page; declined (no terminal): {}",
                    escaped(url)
                );
            }
            return Ok(json!({"action": "decline"}));
        }
        let _turn = lock(&self.asking);
        self.withdrawn.store(false, Ordering::SeqCst);
        let message = params.get("message").and_then(Value::as_str).unwrap_or("");
        eprintln!("\nServer {server:?} asks: {}", escaped_body(message));
        let answer = if params.get("mode").and_then(Value::as_str) == Some("url") {
            ask_url(params, &self.withdrawn)
        } else {
            ask_form(params.get("requestedSchema").unwrap_or(&Value::Null), &self.withdrawn)
        };
        Ok(answer.unwrap_or_else(|| json!({"action": "cancel"})))
    }

    fn cancelled(&self, server: &str, _method: &str, reason: Option<&str>) {
        self.withdrawn.store(true, Ordering::SeqCst);
        let reason = reason.map(|reason| format!(": {}", escaped_body(reason))).unwrap_or_default();
        eprintln!("\nServer {server:?} withdrew its question{reason}");
    }
}

/// How often a question waiting for its answer looks whether it was withdrawn.
const WITHDRAWN_POLL: Duration = Duration::from_millis(100);

/// A line from the terminal; `None` at its end, or once the question is
/// withdrawn (the line typed so far is left unread).
fn read_answer(question: &str, withdrawn: &AtomicBool) -> Option<String> {
    read_line_unless(question, &|| withdrawn.load(Ordering::SeqCst))
}

/// A line from the terminal; `None` at its end, or once `stop` says so
/// (asked every [`WITHDRAWN_POLL`] or so; the line typed so far is left
/// unread).
fn read_line_unless(question: &str, stop: &dyn Fn() -> bool) -> Option<String> {
    eprint!("{question}");
    let _ = io::stderr().flush();
    loop {
        if stop() {
            return None;
        }
        let mut poll =
            libc::pollfd { fd: io::stdin().as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let millis = WITHDRAWN_POLL.as_millis() as libc::c_int;
        // SAFETY: one valid pollfd, for the duration of the call.
        if unsafe { libc::poll(&mut poll, 1, millis) } != 0 {
            break;
        }
    }
    let mut line = String::new();
    match io::stdin().lock().read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim().to_owned()),
    }
}

fn ask_url(params: &Value, withdrawn: &AtomicBool) -> Option<Value> {
    let url = params.get("url").and_then(Value::as_str).unwrap_or("");
    // Shown escaped: `https://evil.example/\e[2K\rhttps://accounts…` must
    // not pass for the second address. A URL has no control characters, so
    // one that does is refused outright.
    let shown = escaped(url);
    eprintln!("It wants you to open this URL:\n  {shown}");
    if shown != url {
        eprintln!("That URL has control characters in it; tether will not open it.");
        return Some(json!({"action": "decline"}));
    }
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        eprintln!("That is not an http(s) URL; tether will not open it.");
        return Some(json!({"action": "decline"}));
    }
    let open = read_answer("Open it in your browser? [y/N] ", withdrawn)?;
    if open.eq_ignore_ascii_case("y") || open.eq_ignore_ascii_case("yes") {
        open_in_browser(url);
    }
    loop {
        let answer =
            read_answer("When you are done: (a)ccept, (d)ecline or (c)ancel [a]: ", withdrawn)?;
        match choice(&answer) {
            Some(Choice::Accept) => return Some(json!({"action": "accept"})),
            Some(Choice::Decline) => return Some(json!({"action": "decline"})),
            Some(Choice::Cancel) => return Some(json!({"action": "cancel"})),
            None if answer.trim().is_empty() => return Some(json!({"action": "accept"})),
            None => eprintln!("  answer a (or y), d (or n) or c"),
        }
    }
}

/// Before a call the server refused until the person opens pages
/// (`-32042`): shows each page, offers to open it, then waits for the server
/// to say they are done (`done`, asked about a tenth of a second at a time)
/// or for Enter. True when the call should be made again; false without a
/// terminal, when a page is not a plain http(s) URL, at the terminal's end,
/// or after [`PAGES_WAIT`].
pub(super) fn open_pages(
    server: &str,
    message: &str,
    pages: &[tether::UrlElicitation],
    done: &dyn Fn(Duration) -> bool,
) -> bool {
    if !(io::stdin().is_terminal() && io::stderr().is_terminal()) {
        return false;
    }
    let what = if pages.len() == 1 { "a page" } else { "pages" };
    eprintln!("\nServer {server:?} asks you to open {what} first: {}", escaped_body(message));
    for page in pages {
        let shown = escaped(&page.url);
        if !page.message.is_empty() && page.message != message {
            eprintln!("  {}", escaped_body(&page.message));
        }
        eprintln!("  {shown}");
        // As for a URL the server asks to open while it works (`ask_url`).
        if shown != page.url
            || !(page.url.starts_with("https://") || page.url.starts_with("http://"))
        {
            eprintln!("That is not a plain http(s) URL; tether will not open it.");
            return false;
        }
        let never = || false;
        let Some(open) = read_line_unless("Open it in your browser? [y/N] ", &never) else {
            return false;
        };
        if open.eq_ignore_ascii_case("y") || open.eq_ignore_ascii_case("yes") {
            open_in_browser(&page.url);
        }
    }
    let started = std::time::Instant::now();
    let finished = || started.elapsed() > PAGES_WAIT || done(WITHDRAWN_POLL);
    let typed = read_line_unless(
        "Waiting for the server to say you are done; press Enter to try again now: ",
        &finished,
    );
    match typed {
        Some(_) => true,
        None if done(Duration::ZERO) => {
            eprintln!("\nThe server says you are done; trying again.");
            true
        }
        None => {
            eprintln!();
            false
        }
    }
}

/// The longest wait for the pages of a `-32042` to be done.
const PAGES_WAIT: Duration = Duration::from_secs(600);

/// Opens `url` with `$BROWSER` (a program and its own arguments, split on
/// white space), else the desktop's opener; the URL is the last argument,
/// and no shell is involved.
pub(super) fn open_in_browser(url: &str) {
    let chosen = std::env::var("BROWSER").ok().filter(|browser| !browser.trim().is_empty());
    let chosen = chosen
        .unwrap_or_else(|| if cfg!(target_os = "macos") { "open" } else { "xdg-open" }.to_owned());
    let mut words = chosen.split_whitespace();
    let opener = words.next().unwrap_or("xdg-open");
    let started = Command::new(opener)
        .args(words)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    match started {
        Ok(mut child) => {
            // Reap it on a thread so that no zombie is left.
            let _ = std::thread::Builder::new()
                .name("tether-opener".into())
                .spawn(move || child.wait());
        }
        Err(err) => eprintln!("Could not run {opener} ({err}); open the URL yourself."),
    }
}

fn ask_form(schema: &Value, withdrawn: &AtomicBool) -> Option<Value> {
    let mut content = Map::new();
    for field in form::fields(schema) {
        if let Some(description) = field.description {
            eprintln!("  {}", escaped_body(description));
        }
        loop {
            let answer = read_answer(&field.question(), withdrawn)?;
            if answer.trim().is_empty() {
                match field.default {
                    Some(default) => {
                        content.insert(field.name.to_owned(), default.clone());
                        break;
                    }
                    None if !field.required => break,
                    None => {
                        eprintln!("  This one is required.");
                        continue;
                    }
                }
            }
            match field.parse(&answer) {
                Ok(value) => {
                    content.insert(field.name.to_owned(), value);
                    break;
                }
                Err(why) => eprintln!("  {why}"),
            }
        }
    }
    loop {
        let answer = read_answer("Send this? (a)ccept, (d)ecline or (c)ancel [a]: ", withdrawn)?;
        match choice(&answer) {
            Some(Choice::Accept) => return Some(json!({"action": "accept", "content": content})),
            Some(Choice::Decline) => return Some(json!({"action": "decline"})),
            Some(Choice::Cancel) => return Some(json!({"action": "cancel"})),
            None if answer.trim().is_empty() => {
                return Some(json!({"action": "accept", "content": content}))
            }
            None => eprintln!("  answer a (or y), d (or n) or c"),
        }
    }
}

enum Choice {
    Accept,
    Decline,
    Cancel,
}

/// What a person typed at an accept/decline/cancel question; `y` and `yes`
/// accept, `n` and `no` decline; anything else is no answer.
fn choice(answer: &str) -> Option<Choice> {
    match answer.trim().to_ascii_lowercase().as_str() {
        "a" | "accept" | "y" | "yes" => Some(Choice::Accept),
        "d" | "decline" | "n" | "no" => Some(Choice::Decline),
        "c" | "cancel" => Some(Choice::Cancel),
        _ => None,
    }
}
