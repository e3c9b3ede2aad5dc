//! [`HubOptions`]: how a hub starts its servers and names their tools, and
//! what the host lends every connection (its host, log sink, sign-in
//! handler, token store and providers).

use std::sync::Arc;

use super::events::LogSink;
use crate::auth::{AuthorizationHandler, TokenProvider};
use crate::client::{ClientInfo, Declared};
use crate::codemode::CallHook;
use crate::config::ConfigLoader;
use crate::host::{DefaultHost, Host};
use crate::model::registry::NameStyle;
use crate::transport::FromHost;

/// How the hub starts and names things: the defaults, changed with the
/// `with_` methods.
#[derive(Clone)]
#[non_exhaustive]
pub struct HubOptions {
    /// Return from `Hub::start` at once; servers connect in the background.
    pub background: bool,
    /// `mcp__server__tool` or `server__tool`.
    pub name_style: NameStyle,
    /// Answers server→client requests.
    pub host: Arc<dyn Host>,
    /// Where servers' log messages go (the CLI's is `mcp.log`).
    pub log_sink: Option<Arc<dyn LogSink>>,
    /// How `refresh` reads the configuration again; without it, `refresh`
    /// only restarts servers that stopped.
    pub reload: Option<ConfigLoader>,
    /// Sees each call a codemode script makes, and may deny it.
    pub call_hook: Option<Arc<dyn CallHook>>,
    /// Where the era each server was found to speak is kept across runs
    /// (the CLI's `eras.json`); without it, only while the hub lives.
    pub era_file: Option<std::path::PathBuf>,
    /// How the hub's clients name themselves, and the capabilities they
    /// declare beyond the host's.
    pub declared: Declared,
    /// What every connection is lent: who has a person sign in to remote
    /// servers (without one, a server that wants OAuth fails with
    /// [`Error::LoginRequired`], `needsLogin`), where sign-ins are kept, the
    /// host's token providers, and a stdio server's exit grace.
    pub(super) lent: FromHost,
}

impl Default for HubOptions {
    fn default() -> Self {
        HubOptions {
            background: false,
            name_style: NameStyle::default(),
            host: Arc::new(DefaultHost),
            log_sink: None,
            reload: None,
            call_hook: None,
            era_file: None,
            declared: Declared::default(),
            lent: FromHost::default(),
        }
    }
}

impl HubOptions {
    /// How the hub's clients name themselves to servers (`clientInfo`).
    pub fn with_client_info(mut self, info: ClientInfo) -> HubOptions {
        self.declared.client_info = info;
        self
    }

    /// Declares `capabilities.experimental` to every server.
    pub fn with_experimental(mut self, experimental: serde_json::Value) -> HubOptions {
        self.declared.experimental = Some(experimental);
        self
    }

    /// Declares the extension `name` with its settings to every server.
    pub fn with_extension(mut self, name: &str, settings: serde_json::Value) -> HubOptions {
        self.declared.add_extension(name, settings);
        self
    }

    /// Return from `Hub::start` at once; servers connect in the background.
    pub fn with_background(mut self, background: bool) -> HubOptions {
        self.background = background;
        self
    }

    /// `mcp__server__tool` (the default) or `server__tool`.
    pub fn with_name_style(mut self, name_style: NameStyle) -> HubOptions {
        self.name_style = name_style;
        self
    }

    /// Keeps the era each server speaks in `path` across runs, so that it
    /// is found once (a stdio server slow to start, a handshake-era server
    /// that ignores the probe), not at every start.
    pub fn with_era_file(mut self, path: &std::path::Path) -> HubOptions {
        self.era_file = Some(path.to_owned());
        self
    }

    /// Who answers server→client requests.
    pub fn with_host(mut self, host: Arc<dyn Host>) -> HubOptions {
        self.host = host;
        self
    }

    /// Where servers' log messages go.
    pub fn with_log_sink(mut self, log_sink: Arc<dyn LogSink>) -> HubOptions {
        self.log_sink = Some(log_sink);
        self
    }

    /// How `refresh` reads the configuration again.
    pub fn with_reload(mut self, reload: ConfigLoader) -> HubOptions {
        self.reload = Some(reload);
        self
    }

    /// Sees each call a codemode script makes (with the `codemode` call as
    /// its parent) and may deny it; also told when each call ended.
    pub fn with_call_hook(mut self, hook: Arc<dyn CallHook>) -> HubOptions {
        self.call_hook = Some(hook);
        self
    }

    /// How long a stdio server may take to exit once its stdin closes,
    /// before SIGTERM, unless its entry says (`shutdownTimeout`); 2 s by
    /// default. A one-shot command wants it short.
    pub fn with_shutdown_grace(mut self, grace: std::time::Duration) -> HubOptions {
        self.lent.shutdown_grace = Some(grace);
        self
    }

    /// Keep OAuth sign-ins in this file (mode 0600) between runs.
    pub fn with_token_store(mut self, path: &std::path::Path) -> HubOptions {
        self.lent.token_store = Some(path.to_owned());
        self
    }

    /// Registers a token provider that entries name with
    /// `"auth": {"provider": NAME}` (user and host entries only).
    pub fn with_token_provider(
        mut self,
        name: &str,
        provider: Arc<dyn TokenProvider>,
    ) -> HubOptions {
        self.lent.providers.retain(|(known, _)| known != name);
        self.lent.providers.push((name.to_owned(), provider));
        self
    }

    /// Who has a person sign in to servers that want OAuth.
    pub fn with_authorization_handler(
        mut self,
        handler: Arc<dyn AuthorizationHandler>,
    ) -> HubOptions {
        self.lent.authorization = Some(handler);
        self
    }
}
