//! OAuth 2.1 for remote servers (SPEC §7).
//!
//! The HTTP transport asks [`OAuth`] for a token before each request and
//! hands it every 401 and 403 it gets; `OAuth` finds the authorization
//! server (`discovery.rs`), gets the client an identity and runs a grant
//! (`flow.rs`: the authorization code with PKCE through the host's
//! [`AuthorizationHandler`], or client credentials), and keeps, refreshes
//! and steps up the tokens. It knows nothing of the hub or the registry.
//!
//! One mutex guards plain data (tokens, the client's identity, what
//! discovery found). A sign-in in progress is a flag in it that other
//! requests wait on (bounded), never a lock held across the requests the
//! sign-in makes. Tokens and secrets never reach logs, errors or `Debug`.

pub(crate) mod challenge;
mod discovery;
mod flow;
mod store;
mod web;

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

pub(crate) use challenge::Challenge;
use discovery::Discovered;
use flow::{ClientIdentity, Tokens};
pub(crate) use store::TokenStore;
pub use store::{forget_credentials, sign_in_state, SignIn};
use web::Web;

pub use crate::config::{EnterpriseIdentity, OAuthSettings};
use crate::error::Error;
use crate::sync::{lock, wait_timeout};

/// How long a request waits for a sign-in that another one started (a
/// person may be typing a password).
const SIGN_IN_WAIT: Duration = Duration::from_secs(600);

/// The host's part of a sign-in: a person (or a program acting for one)
/// opens the authorization URL and the handler hands back where the
/// authorization server sent the browser afterwards. Discovery,
/// registration, PKCE, the token requests, refresh and step-up stay in the
/// library.
pub trait AuthorizationHandler: Send + Sync {
    /// The redirect URI the handler receives the answer at; it is
    /// registered and sent with the authorization request.
    fn redirect_uri(&self) -> String;

    /// Has `url` (an authorization request) opened, and returns the URL
    /// the authorization server redirected to, with its `code` and `state`
    /// (or `error`).
    ///
    /// # Errors
    /// The sign-in was cancelled or could not be completed.
    fn authorize(&self, url: &str) -> Result<String, Error>;

    /// The redirect URI the kept client was registered with, said before
    /// [`AuthorizationHandler::redirect_uri`] is asked: a handler that
    /// picks its own port may listen there again, so that the registration
    /// still fits (otherwise the client is registered again).
    fn prefer_redirect_uri(&self, uri: &str) {
        let _ = uri;
    }
}

/// A token the host gets by its own means (a keychain, a company's SSO
/// helper), registered on the hub under a name that entries name with
/// `"auth": {"provider": NAME}`. Asked for a token before every request.
pub trait TokenProvider: Send + Sync {
    /// The current access token for `server` (the configured name).
    ///
    /// # Errors
    /// No token can be had now; the request fails with this error.
    fn token(&self, server: &str) -> Result<String, Error>;
}

/// One server's sign-in state, shared by its connection's threads.
pub(crate) struct OAuth {
    server_url: String,
    settings: OAuthSettings,
    handler: Option<Arc<dyn AuthorizationHandler>>,
    store: Option<TokenStore>,
    web: Web,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    tokens: Option<Tokens>,
    client: Option<ClientIdentity>,
    discovered: Option<Discovered>,
    /// Every scope asked for so far: step-up adds to it, never removes.
    scopes: Vec<String>,
    /// A sign-in or refresh is under way on some thread.
    busy: bool,
    /// Sign-ins and refreshes ended so far, and how the last one failed:
    /// requests that waited for it take its outcome instead of starting
    /// another (one prompt, not one per waiting request).
    ended: u64,
    last_failure: Option<Failure>,
}

/// How a sign-in failed, for the requests that waited for it.
#[derive(Clone)]
enum Failure {
    LoginRequired(String),
    Other(String),
}

impl Failure {
    fn of(error: &Error) -> Failure {
        match error.root() {
            Error::LoginRequired { url } => Failure::LoginRequired(url.clone()),
            other => Failure::Other(other.to_string()),
        }
    }

    fn error(&self) -> Error {
        match self {
            Failure::LoginRequired(url) => Error::LoginRequired { url: url.clone() },
            Failure::Other(message) => Error::Auth(message.clone()),
        }
    }
}

/// Ends the sign-in under way if its work panicked, so that nobody waits
/// for it.
struct Busy<'a> {
    oauth: &'a OAuth,
    finished: bool,
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        if !self.finished {
            let mut state = lock(&self.oauth.state);
            state.busy = false;
            state.ended += 1;
            state.last_failure = Some(Failure::Other("the sign-in was interrupted".into()));
            drop(state);
            self.oauth.changed.notify_all();
        }
    }
}

impl OAuth {
    /// The sign-in state of the server at `server_url`, kept in `store`
    /// (with what an earlier run kept there); `ca_file` is trusted for the
    /// authorization servers too.
    pub(crate) fn new(
        server_url: &str,
        settings: &OAuthSettings,
        handler: Option<Arc<dyn AuthorizationHandler>>,
        ca_file: Option<&Path>,
        store: Option<TokenStore>,
    ) -> OAuth {
        // What an earlier run stored for this server at this URL.
        let state = match store.as_ref().and_then(TokenStore::load) {
            Some(record) => State {
                tokens: record.tokens(),
                client: record.client,
                discovered: record.discovered,
                scopes: record.scopes,
                ..State::default()
            },
            None => State::default(),
        };
        OAuth {
            server_url: server_url.to_owned(),
            settings: settings.clone(),
            handler,
            store,
            web: Web::new(ca_file),
            state: Mutex::new(state),
            changed: Condvar::new(),
        }
    }

    /// Signs in now, as `tether login` does, whether or not the server
    /// asked: afresh, looking again where to.
    ///
    /// # Errors
    /// The server offers no OAuth sign-in, or signing in failed or was
    /// refused.
    pub(crate) fn sign_in_afresh(&self) -> Result<(), Error> {
        let challenge = self.probe()?;
        {
            let mut state = lock(&self.state);
            state.tokens = None;
            state.discovered = None;
        }
        self.exclusively(None, Run::Afresh, |state| self.sign_in(state, &challenge))
    }

    /// True when [`OAuth::token`] would answer at once, asking nobody (no
    /// token yet, or one not due for its refresh ahead).
    pub(crate) fn token_at_hand(&self) -> bool {
        let state = lock(&self.state);
        state
            .tokens
            .as_ref()
            .is_none_or(|tokens| !tokens.is_expiring() || tokens.refresh.is_none() || state.busy)
    }

    /// The access token as it is, never refreshed here.
    pub(crate) fn token_now(&self) -> Option<String> {
        lock(&self.state).tokens.as_ref().map(|tokens| tokens.access.clone())
    }

    /// The access token to send, if there is one; refreshed first when it
    /// is about to expire and can be.
    pub(crate) fn token(&self) -> Option<String> {
        let expiring = {
            let state = lock(&self.state);
            let tokens = state.tokens.as_ref()?;
            if !tokens.is_expiring() || tokens.refresh.is_none() || state.busy {
                return Some(tokens.access.clone());
            }
            tokens.access.clone()
        };
        // Refreshing ahead is a courtesy: on failure the old token goes out
        // and a 401 starts a sign-in.
        let _ = self.exclusively(Some(&expiring), Run::Courtesy, |state| self.refresh(state));
        lock(&self.state).tokens.as_ref().map(|tokens| tokens.access.clone())
    }

    /// Asks the server, unauthenticated, what it wants: its challenge when
    /// it answers 401; otherwise the sign-in it advertises, if any.
    fn probe(&self) -> Result<Challenge, Error> {
        let initialize = serde_json::json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": crate::protocol::LATEST_PROTOCOL_VERSION,
                       "capabilities": {}, "clientInfo": {"name": "tether", "version": env!("CARGO_PKG_VERSION")}},
        });
        match self.web.post_mcp(&self.server_url, &initialize)? {
            (401, Some(header)) => Ok(Challenge::parse(&header)),
            (401, None) => Ok(Challenge::default()),
            _ if discovery::offers_sign_in(&self.web, &self.server_url) => Ok(Challenge::default()),
            (status, _) => Err(Error::Auth(format!(
                "the server answers without a sign-in (HTTP {status}) and advertises none"
            ))),
        }
    }

    /// Deals with a 401 or 403 (`challenge` is its `WWW-Authenticate`) to a
    /// request sent with `sent` as its token: refreshes, signs in or steps
    /// up. `Ok` means there is a new token to retry with.
    ///
    /// # Errors
    /// [`Error::Auth`] when signing in fails or is refused,
    /// [`Error::LoginRequired`] when it needs a person and there is no
    /// authorization handler.
    pub(crate) fn on_challenge(
        &self,
        status: u16,
        challenge: &Challenge,
        sent: Option<&str>,
    ) -> Result<(), Error> {
        self.exclusively(sent, Run::Needed, |state| {
            if status == 401 && state.tokens.as_ref().is_some_and(|t| t.refresh.is_some()) {
                match self.refresh(state) {
                    Ok(()) => return Ok(()),
                    Err(err) => log::info!("refreshing the token failed ({err}); signing in again"),
                }
            }
            self.sign_in(state, challenge)
        })
    }

    /// Runs `work` as the one sign-in under way, on a copy of the state
    /// taken out of the lock (so no lock is held across its requests). If
    /// another thread is at it, waits for that one instead; if the token
    /// changed since `sent` was sent, there is nothing to do.
    ///
    /// Other processes share the token store, so `work` also runs under
    /// the store's lock for this server, and first reads the store again:
    /// a process that lost the race finds the token the winner got (and,
    /// with a rotating refresh token, the one refresh token still good)
    /// instead of spending its own copy of a refresh token already used.
    fn exclusively(
        &self,
        sent: Option<&str>,
        run: Run,
        work: impl FnOnce(&mut Working) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let courtesy = run == Run::Courtesy;
        let deadline = Instant::now() + SIGN_IN_WAIT;
        let mut state = lock(&self.state);
        let ended_before = state.ended;
        while state.busy {
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::Auth("another sign-in to this server did not finish".into()));
            }
            state = wait_timeout(&self.changed, state, deadline - now);
        }
        let current = state.tokens.as_ref().map(|tokens| tokens.access.as_str());
        if current.is_some() && current != sent {
            return Ok(()); // Someone else got a new token meanwhile.
        }
        if state.ended != ended_before {
            // The sign-in this request waited for failed: its outcome is ours.
            if let Some(failure) = &state.last_failure {
                return Err(failure.error());
            }
        }
        state.busy = true;
        // Copies: other requests go on with the current token meanwhile.
        let mut working = Working {
            tokens: state.tokens.clone(),
            client: state.client.clone(),
            discovered: state.discovered.clone(),
            scopes: state.scopes.clone(),
        };
        drop(state);
        let mut busy = Busy { oauth: self, finished: false };
        let grant_lock = self.store.as_ref().and_then(|store| {
            let wait = deadline.saturating_duration_since(Instant::now());
            store
                .lock_grants(wait)
                .inspect_err(|err| log::warn!("signing in without the token store's lock: {err}"))
                .ok()
        });
        let adopted = run != Run::Afresh && self.adopt_stored(&mut working, sent);
        let scopes_before = working.scopes.clone();
        let client_before = working.client.clone();
        let outcome = if adopted { Ok(()) } else { work(&mut working) };
        // Kept when it worked, and when it failed having learned something:
        // scopes (a step-up left to `tether login`), or a client it
        // registered (the next try need not register another).
        let learned = working.scopes != scopes_before || working.client != client_before;
        if let (true, false, Some(store)) = (outcome.is_ok() || learned, adopted, &self.store) {
            let record = store::Record::new(
                working.tokens.as_ref(),
                working.client.as_ref(),
                working.discovered.as_ref(),
                &working.scopes,
            );
            if let Err(err) = store.save(record) {
                log::warn!("cannot keep the sign-in: {err}");
            }
        }
        drop(grant_lock);
        let mut state = lock(&self.state);
        state.tokens = working.tokens;
        state.client = working.client;
        state.discovered = working.discovered;
        state.scopes = working.scopes;
        state.busy = false;
        state.ended += 1;
        // A refresh ahead of expiry that fails is nobody's failure: the
        // token goes out and a 401 starts a sign-in.
        state.last_failure = if courtesy { None } else { outcome.as_ref().err().map(Failure::of) };
        drop(state);
        busy.finished = true;
        self.changed.notify_all();
        outcome
    }
}

/// Why a sign-in runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Run {
    /// A refresh ahead of expiry: its failure is nobody's.
    Courtesy,
    /// The server refused the token, or there is none.
    Needed,
    /// `tether login`: a new sign-in, whatever the store holds.
    Afresh,
}

impl OAuth {
    /// Takes what the token store holds now into `working`, under the
    /// store's lock: another process may have refreshed or signed in since
    /// this one read it. True when that left a token other than `sent`
    /// that is not about to expire: nothing more to do.
    fn adopt_stored(&self, working: &mut Working, sent: Option<&str>) -> bool {
        let Some(record) = self.store.as_ref().and_then(TokenStore::load) else {
            return false;
        };
        if working.client.is_none() {
            working.client.clone_from(&record.client);
        }
        if working.discovered.is_none() {
            working.discovered.clone_from(&record.discovered);
        }
        let Some(stored) = record.tokens() else { return false };
        let current = working.tokens.as_ref().map(|tokens| tokens.access.as_str());
        if current == Some(stored.access.as_str()) {
            return false;
        }
        let fresh = Some(stored.access.as_str()) != sent && !stored.is_expiring();
        if fresh {
            log::info!("another tether process renewed the sign-in; using its token");
        }
        // Newer than this process's copy either way: its refresh token is the
        // one a rotating server still honours.
        working.tokens = Some(stored);
        fresh
    }
}

/// The state a sign-in works on, out of the lock.
struct Working {
    tokens: Option<Tokens>,
    client: Option<ClientIdentity>,
    discovered: Option<Discovered>,
    scopes: Vec<String>,
}
