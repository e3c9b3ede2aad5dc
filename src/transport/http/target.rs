//! Where a remote server is and how to speak to it: [`HttpTarget`], what
//! a host or an entry gives (the URL, the transport, the headers and the
//! credentials), and signing in to it as `tether login` does.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::ENDPOINT_WAIT;
use crate::auth::{AuthorizationHandler, OAuth, OAuthSettings, TokenProvider, TokenStore};
use crate::config::HttpKind;
use crate::error::Error;

/// A remote server: where, how, and with which credentials.
#[derive(Clone)]
#[non_exhaustive]
pub struct HttpTarget {
    /// The endpoint URL (`http://` or `https://`).
    pub url: String,
    /// Which transport; `Auto` tries Streamable HTTP, then the legacy one.
    pub kind: HttpKind,
    /// Headers on every request (values may be secrets).
    pub headers: Vec<(String, String)>,
    /// The headers a `!command` gave (name, command line), run again once
    /// when the server refuses a request with 401 or 403.
    pub(crate) header_commands: Vec<(String, String)>,
    /// Sent as `Authorization: Bearer …` unless `headers` has an Authorization.
    pub bearer_token: Option<String>,
    /// How long a legacy server may take to send its `endpoint` event.
    pub endpoint_wait: Duration,
    /// How to sign in with OAuth when the server answers 401 and no
    /// `Authorization` is configured.
    pub oauth: OAuthSettings,
    /// Who has a person sign in; without one, a server that wants a
    /// sign-in fails with [`Error::LoginRequired`].
    pub authorization: Option<Arc<dyn AuthorizationHandler>>,
    /// Where sign-ins are kept between runs (`mcp-auth.json`); none keeps
    /// them for this connection only.
    pub token_store: Option<PathBuf>,
    /// The host's token provider (`"auth": {"provider": NAME}`), asked
    /// before every request, with the server's name.
    pub token_provider: Option<(String, Arc<dyn TokenProvider>)>,
    /// A PEM file of CAs to trust for this server, besides the bundled
    /// roots and those of `SSL_CERT_FILE`/`SSL_CERT_DIR` (`caFile`).
    pub ca_file: Option<PathBuf>,
}

impl HttpTarget {
    /// The sign-in state of this server, kept under `server` in the token
    /// store, if there is one.
    pub(crate) fn oauth_for(&self, server: &str) -> OAuth {
        let store =
            self.token_store.as_deref().map(|path| TokenStore::new(path, server, &self.url));
        OAuth::new(
            &self.url,
            &self.oauth,
            self.authorization.clone(),
            self.ca_file.as_deref(),
            store,
        )
    }

    /// A target with no headers or credentials.
    pub fn new(url: &str, kind: HttpKind) -> HttpTarget {
        HttpTarget {
            url: url.to_owned(),
            kind,
            headers: Vec::new(),
            header_commands: Vec::new(),
            bearer_token: None,
            endpoint_wait: ENDPOINT_WAIT,
            oauth: OAuthSettings::default(),
            authorization: None,
            token_store: None,
            token_provider: None,
            ca_file: None,
        }
    }

    /// The same target, keeping its sign-ins in this file (mode 0600).
    pub fn with_token_store(mut self, path: &std::path::Path) -> HttpTarget {
        self.token_store = Some(path.to_owned());
        self
    }

    /// The same target with these OAuth settings.
    pub fn with_oauth(mut self, oauth: OAuthSettings) -> HttpTarget {
        self.oauth = oauth;
        self
    }

    /// The same target with a handler that has a person sign in.
    pub fn with_authorization_handler(
        mut self,
        handler: Arc<dyn AuthorizationHandler>,
    ) -> HttpTarget {
        self.authorization = Some(handler);
        self
    }

    /// True when the entry itself says how to authorize (a bearer token or
    /// an `Authorization` header): then OAuth is not offered.
    pub(super) fn has_static_authorization(&self) -> bool {
        self.bearer_token.is_some()
            || self.token_provider.is_some()
            || self.has_authorization_header()
    }

    /// True when the entry's headers include an `Authorization`.
    pub(super) fn has_authorization_header(&self) -> bool {
        self.headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("authorization"))
    }
}

impl fmt::Debug for HttpTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Header values and the token are secrets: names only.
        f.debug_struct("HttpTarget")
            .field("url", &self.url)
            .field("kind", &self.kind)
            .field("headers", &self.headers.iter().map(|(name, _)| name).collect::<Vec<_>>())
            .field("bearer_token", &self.bearer_token.as_ref().map(|_| "***"))
            .field("oauth", &self.oauth)
            .field("authorization", &self.authorization.as_ref().map(|_| "handler"))
            .field("token_store", &self.token_store)
            .field("token_provider", &self.token_provider.as_ref().map(|(name, _)| name))
            .field("ca_file", &self.ca_file)
            .finish()
    }
}

/// Signs in to the server `target` describes now, as `tether login` does,
/// whether or not it asked, and keeps the result in the target's token
/// store under `server`.
///
/// # Errors
/// The server offers no OAuth sign-in, or signing in failed or was refused.
pub fn sign_in(server: &str, target: &HttpTarget) -> Result<(), Error> {
    target.oauth_for(server).sign_in_afresh()
}
