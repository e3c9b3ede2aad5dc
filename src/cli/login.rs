//! `tether login` and `tether logout`, and the CLI's authorization handler.
//!
//! The handler listens on `127.0.0.1` (the entry's `oauth.callbackPort`, or
//! a free port; a busy fixed port is an error, never a silent switch),
//! prints the authorization URL, opens it with `$BROWSER` or the desktop's
//! opener (a program and one argument: never a shell), and takes the first
//! of: the browser's redirect to the listener, or the redirected URL pasted
//! on stdin (for a browser on another machine, over SSH). Discovery,
//! registration, PKCE and tokens are the library's.

use std::io::{self, BufRead, IsTerminal, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use tether::{
    AuthorizationHandler, Config, Error, HttpKind, HttpTarget, OAuthSettings, TransportConfig,
};

use super::output::{lock, report, EXIT_OK, EXIT_USAGE};
use super::terminal::open_in_browser;

/// How long a sign-in may wait for the person.
const SIGN_IN_WAIT: Duration = Duration::from_secs(300);
/// Connections to the redirect listener read at once; more are closed.
const CALLBACK_CONNECTIONS: usize = 16;
/// How long one connection may take to send its request's head.
const CALLBACK_READ_WAIT: Duration = Duration::from_secs(5);

/// The CLI's authorization handler: a loopback listener and a paste.
pub(super) struct LoopbackHandler {
    listener: TcpListener,
    /// How long the person may take.
    wait: Duration,
    redirect_uri: String,
    server: String,
    /// Whether stdin may carry a pasted URL.
    paste: Mutex<bool>,
}

impl LoopbackHandler {
    /// Listens at `callback_url`'s port, or `callback_port`, or a free one.
    ///
    /// # Errors
    /// The port is taken or cannot be listened on.
    pub(super) fn new(server: &str, oauth: &OAuthSettings) -> io::Result<LoopbackHandler> {
        let url_port = oauth.callback_url.as_deref().and_then(port_of);
        let port = url_port.or(oauth.callback_port).unwrap_or(0);
        // Where the browser will be sent: [::1] when the callback URL says so.
        let host = match &oauth.callback_url {
            Some(url) if url.contains("://[::1]") => "::1",
            _ => "127.0.0.1",
        };
        let listener = TcpListener::bind((host, port)).map_err(|err| {
            io::Error::new(
                err.kind(),
                format!("cannot listen for the sign-in's redirect on {host}:{port}: {err}"),
            )
        })?;
        listener.set_nonblocking(true)?;
        let bound = listener.local_addr()?.port();
        let redirect_uri = match &oauth.callback_url {
            Some(url) if url_port.is_some() => url.clone(),
            // RFC 8252: a loopback redirect URI without a port gets ours.
            Some(url) => fill_port(url, bound),
            None => format!("http://127.0.0.1:{bound}/callback"),
        };
        Ok(LoopbackHandler {
            listener,
            wait: SIGN_IN_WAIT,
            redirect_uri,
            server: server.to_owned(),
            paste: Mutex::new(io::stdin().is_terminal()),
        })
    }
}

impl AuthorizationHandler for LoopbackHandler {
    fn redirect_uri(&self) -> String {
        self.redirect_uri.clone()
    }

    fn authorize(&self, url: &str) -> Result<String, Error> {
        self.authorize_as(&format!("{:?}", self.server), url)
    }
}

impl LoopbackHandler {
    /// [`AuthorizationHandler::authorize`], naming the server as `label`.
    fn authorize_as(&self, label: &str, url: &str) -> Result<String, Error> {
        eprintln!(
            "To sign in to {}, open this URL in a browser:\n\n  {}\n",
            super::escape::escaped(label),
            super::escape::escaped(url)
        );
        open_in_browser(url);
        let mut paste = lock(&self.paste);
        if *paste {
            eprintln!("(Or paste the URL the browser ends up at here, then press Enter.)");
        }
        // Ctrl-C is a person's at a terminal, not a host's that started
        // `tether proxy` with its stdin for the protocol.
        let give_up = if *paste { "; Ctrl-C to give up" } else { "" };
        eprintln!("Waiting for the sign-in to finish (at most {}{give_up})…", minutes(self.wait));
        // Only the redirect to this request counts: the redirect URI's path
        // with this request's state. Anything else (another page poking the
        // port, an older sign-in) is answered and ignored.
        let state = query_value(url, "state");
        let expected = Expected { path: path_of(&self.redirect_uri), state };
        let deadline = Instant::now() + self.wait;
        // Each connection is read on a thread of its own, within its own
        // deadline, so that one that sends slowly (another local process)
        // delays nobody; the first redirect to this request wins.
        let (found, redirects) = crossbeam_channel::bounded::<String>(CALLBACK_CONNECTIONS);
        std::thread::scope(|scope| {
            // Each reader with a copy of its connection, to end it early.
            let mut readers: Vec<(std::thread::ScopedJoinHandle<'_, ()>, TcpStream)> = Vec::new();
            let outcome = loop {
                if Instant::now() >= deadline {
                    break Err(Error::Auth(format!(
                        "nobody completed the sign-in within {}",
                        minutes(self.wait)
                    )));
                }
                match self.listener.accept() {
                    Ok((stream, _)) => {
                        readers.retain(|(reader, _)| !reader.is_finished());
                        // Past the limit, a connection is closed unread.
                        let copy = stream.try_clone();
                        if let (true, Ok(copy)) = (readers.len() < CALLBACK_CONNECTIONS, copy) {
                            let found = found.clone();
                            let (redirect_uri, expected) = (&self.redirect_uri, &expected);
                            let reader = std::thread::Builder::new()
                                .name("tether-callback".into())
                                .spawn_scoped(scope, move || {
                                    if let Some(url) =
                                        answer_redirect(stream, redirect_uri, expected)
                                    {
                                        let _ = found.try_send(url);
                                    }
                                });
                            if let Ok(reader) = reader {
                                readers.push((reader, copy));
                            }
                        }
                        continue;
                    }
                    Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                    Err(err) => {
                        break Err(Error::Auth(format!("the redirect listener failed: {err}")))
                    }
                }
                if let Ok(url) = redirects.try_recv() {
                    break Ok(url);
                }
                if *paste && stdin_ready(Duration::from_millis(50)) {
                    let mut line = String::new();
                    match io::stdin().lock().read_line(&mut line) {
                        Ok(0) | Err(_) => *paste = false,
                        Ok(_) if expected.matches(line.trim()) => break Ok(line.trim().to_owned()),
                        Ok(_) => eprintln!("That is not this sign-in's redirected URL."),
                    }
                } else if let Ok(url) = redirects.recv_timeout(Duration::from_millis(50)) {
                    break Ok(url);
                }
            };
            // The readers still at it end now: their reads return at once.
            for (_, stream) in &readers {
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
            outcome
        })
    }
}

/// The handler `list`, `call` and the rest use on a terminal: one loopback
/// listener on a free port, made when a server first wants a sign-in.
pub(super) struct TerminalSignIn {
    handler: OnceLock<Result<LoopbackHandler, String>>,
    /// Each remote server's URL and name: the sign-in names the server
    /// whose URL is the request's `resource`.
    servers: Vec<(String, String)>,
    /// Where the listener listens (`callbackPort`, `callbackUrl`).
    settings: OAuthSettings,
    /// How long the person may take.
    wait: Duration,
    /// The port of the kept client's redirect URI, tried first when no
    /// port is configured.
    preferred_port: Mutex<Option<u16>>,
}

impl TerminalSignIn {
    pub(super) fn new(config: &tether::Config) -> TerminalSignIn {
        let servers = config
            .servers
            .iter()
            .filter_map(|server| match &server.transport {
                tether::TransportConfig::Http(http) => {
                    Some((http.url.clone(), server.name.clone()))
                }
                _ => None,
            })
            .collect();
        TerminalSignIn {
            handler: OnceLock::new(),
            servers,
            settings: OAuthSettings::default(),
            wait: SIGN_IN_WAIT,
            preferred_port: Mutex::new(None),
        }
    }

    /// The same, listening where `settings` say and waiting at most `wait`
    /// for the person (`tether proxy`).
    #[cfg_attr(not(feature = "serve"), allow(dead_code))]
    pub(super) fn with(mut self, settings: OAuthSettings, wait: Duration) -> TerminalSignIn {
        self.settings = settings;
        self.wait = wait;
        self
    }

    fn handler(&self) -> Result<&LoopbackHandler, Error> {
        self.handler
            .get_or_init(|| {
                let configured =
                    self.settings.callback_port.is_some() || self.settings.callback_url.is_some();
                let preferred = (*lock(&self.preferred_port)).filter(|_| !configured);
                let earlier = preferred.and_then(|port| {
                    let mut settings = self.settings.clone();
                    settings.callback_port = Some(port);
                    LoopbackHandler::new("the server", &settings)
                        .inspect_err(|err| {
                            log::warn!("{err}; listening on another port (registering again)")
                        })
                        .ok()
                });
                earlier
                    .map_or_else(|| LoopbackHandler::new("the server", &self.settings), Ok)
                    .map(|mut handler| {
                        handler.wait = self.wait;
                        handler
                    })
                    .map_err(|err| err.to_string())
            })
            .as_ref()
            .map_err(|err| Error::Auth(err.clone()))
    }
}

impl AuthorizationHandler for TerminalSignIn {
    fn redirect_uri(&self) -> String {
        self.handler()
            .map_or_else(|_| "http://127.0.0.1/callback".into(), |handler| handler.redirect_uri())
    }

    fn authorize(&self, url: &str) -> Result<String, Error> {
        let resource = query_value(url, "resource").unwrap_or_default();
        let named = self.servers.iter().find(|(at, _)| {
            !resource.is_empty()
                && at.trim_end_matches('/').starts_with(resource.trim_end_matches('/'))
        });
        let label = match named {
            Some((_, name)) => format!("{name:?}"),
            None if !resource.is_empty() => resource,
            None => "the server".to_owned(),
        };
        self.handler()?.authorize_as(&label, url)
    }

    fn prefer_redirect_uri(&self, uri: &str) {
        // Only a loopback callback of tether's own shape.
        if uri.starts_with("http://127.0.0.1:") && uri.ends_with("/callback") {
            *lock(&self.preferred_port) = port_of(uri);
        }
    }
}

/// `5 minutes`, `1 minute`, `30 s`.
fn minutes(wait: Duration) -> String {
    match wait.as_secs() {
        60 => "1 minute".into(),
        secs if secs % 60 == 0 => format!("{} minutes", secs / 60),
        secs => format!("{secs} s"),
    }
}

/// Reads one request from the browser; answers it and returns the full
/// redirected URL when it is the redirect.
fn answer_redirect(
    mut stream: TcpStream,
    redirect_uri: &str,
    expected: &Expected,
) -> Option<String> {
    let _ = stream.set_nonblocking(false);
    // One deadline for the whole head: a byte a second does not extend it.
    let deadline = Instant::now() + CALLBACK_READ_WAIT;
    let mut head = Vec::new();
    let mut buffer = [0u8; 1024];
    while !head.windows(4).any(|window| window == b"\r\n\r\n") && head.len() < 16 * 1024 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return None;
        }
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buffer[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head);
    let target = head.lines().next()?.split_whitespace().nth(1)?.to_owned();
    let is_redirect = expected.matches(&target);
    let page = if is_redirect {
        "Signed in: you can close this window and go back to tether."
    } else {
        "Waiting for the sign-in's redirect."
    };
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
        page.len()
    );
    let origin = redirect_uri.split('/').take(3).collect::<Vec<_>>().join("/");
    is_redirect.then(|| format!("{origin}{target}"))
}

/// What the redirect of one authorization request looks like.
struct Expected {
    path: String,
    state: Option<String>,
}

impl Expected {
    /// True for a URL (or request target) at the redirect path with this
    /// request's state and a `code` or an `error`.
    fn matches(&self, url: &str) -> bool {
        let answered = query_value(url, "code").is_some() || query_value(url, "error").is_some();
        answered && path_of(url) == self.path && query_value(url, "state") == self.state
    }
}

/// The path of a URL or of a request target (`/callback?…`).
fn path_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let rest = rest.split(['?', '#']).next().unwrap_or(rest);
    let path =
        if url.contains("://") { rest.find('/').map_or("/", |at| &rest[at..]) } else { rest };
    if path.is_empty() {
        "/".to_owned()
    } else {
        path.to_owned()
    }
}

/// One query parameter, percent-decoded.
fn query_value(url: &str, name: &str) -> Option<String> {
    let query = url.split_once('?')?.1.split('#').next()?;
    query.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (key == name).then(|| {
            percent_encoding::percent_decode_str(&value.replace('+', " "))
                .decode_utf8_lossy()
                .into_owned()
        })
    })
}

/// True when stdin has something to read (or ended) within `wait`.
fn stdin_ready(wait: Duration) -> bool {
    let mut poll = libc::pollfd { fd: io::stdin().as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one pollfd for a descriptor this process owns.
    let ready = unsafe { libc::poll(&mut poll, 1, wait.as_millis() as libc::c_int) };
    ready > 0
}

fn port_of(url: &str) -> Option<u16> {
    let authority = url.split_once("://")?.1.split(['/', '?', '#']).next()?;
    authority.rsplit_once(':').and_then(|(host, port)| {
        (!host.is_empty() && !port.contains(']')).then(|| port.parse().ok()).flatten()
    })
}

fn fill_port(url: &str, port: u16) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    format!("{scheme}://{}:{port}{}", &rest[..end], &rest[end..])
}

/// `tether login NAME`: signs in now and keeps the tokens.
pub(super) fn login(config: &Config, store: &Path, name: &str, overrides: &OAuthSettings) -> u8 {
    let Some(entry) = config.server(name) else {
        return super::starting::unknown_server(config, name);
    };
    let TransportConfig::Http(http) = &entry.transport else {
        errln!("server {name:?} runs as a program (stdio); only HTTP servers sign in");
        return EXIT_USAGE;
    };
    let mut oauth = http.oauth.as_deref().cloned().unwrap_or_default();
    if overrides.client_id.is_some() {
        oauth.client_id = overrides.client_id.clone();
        oauth.client_secret = overrides.client_secret.clone();
    }
    if overrides.callback_port.is_some() {
        oauth.callback_port = overrides.callback_port;
    }
    let handler = match LoopbackHandler::new(&entry.name, &oauth) {
        Ok(handler) => handler,
        Err(err) => {
            errln!("{}", super::escape::escaped(&err.to_string()));
            return EXIT_USAGE;
        }
    };
    let kind = if http.kind == HttpKind::Sse { HttpKind::Sse } else { HttpKind::Streamable };
    let target = HttpTarget::new(&http.url, kind)
        .with_oauth(oauth)
        .with_authorization_handler(std::sync::Arc::new(handler))
        .with_token_store(store);
    match tether::sign_in(&entry.name, &target) {
        Ok(()) => {
            outln!("Signed in to {:?}; the sign-in is kept in {}.", entry.name, store.display());
            EXIT_OK
        }
        Err(err) => report(&err),
    }
}

/// `tether logout NAME`: forgets the server's tokens and registered client.
pub(super) fn logout(config: &Config, store: &Path, name: &str) -> u8 {
    let name = config.server(name).map_or(name, |entry| entry.name.as_str());
    match tether::forget_credentials(store, name) {
        Ok(true) => {
            outln!("Signed out of {name:?}.");
            EXIT_OK
        }
        // Not configured and nothing kept: a typo, most likely. (A server
        // removed from the configuration can still be signed out of.)
        Ok(false) if !config.knows(name) => super::starting::unknown_server(config, name),
        Ok(false) => {
            outln!("Nothing was kept for {name:?}.");
            EXIT_OK
        }
        Err(err) => report(&err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callback_urls_get_their_port() {
        assert_eq!(port_of("http://127.0.0.1:8912/cb"), Some(8912));
        assert_eq!(port_of("http://localhost/cb"), None);
        assert_eq!(port_of("http://[::1]/cb"), None);
        assert_eq!(fill_port("http://localhost/cb?x=1", 5), "http://localhost:5/cb?x=1");
    }

    #[test]
    fn only_this_requests_redirect_counts() {
        let expected = Expected { path: "/callback".into(), state: Some("s 1".into()) };
        assert!(expected.matches("/callback?code=abc&state=s%201"));
        assert!(expected.matches("http://127.0.0.1:5/callback?state=s+1&error=access_denied"));
        assert!(!expected.matches("/callback?code=abc&state=other"));
        assert!(!expected.matches("/callback?code=abc"));
        assert!(!expected.matches("/?error=access_denied&state=s%201"));
        assert!(!expected.matches("/callback?state=s%201"));
    }
}
