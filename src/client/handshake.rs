//! The handshake era's session start: `initialize`, a revision tether
//! speaks, then `notifications/initialized` and whatever the transport's
//! session needs before the first request (`Outlet::begin_session`), and
//! the host's log level to a server that logs (`logging/setLevel`).

use std::time::Instant;

use serde_json::json;

use super::{CallOptions, CancelHandle, Client};
use crate::error::Error;
use crate::host;
use crate::jsonrpc::Frame;
use crate::protocol::{LogLevel, ServerInfo, LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS};
use crate::sync::lock;
use crate::transport::outbox::Closed;
use crate::transport::SessionKind;

impl Client {
    /// The `initialize` handshake: `initialize`, a revision tether speaks,
    /// then `notifications/initialized` and whatever the transport's session
    /// needs before the first request.
    pub(super) fn handshake(&self, deadline: Instant) -> Result<ServerInfo, Error> {
        let info = self.initialize_exchange(deadline, None)?;
        self.finish_handshake(&info, deadline)?;
        Ok(info)
    }

    /// `initialize` and its answer, judged; given up (never cancelled on
    /// the wire, as the spec has it) when `cancel` is.
    pub(super) fn initialize_exchange(
        &self,
        deadline: Instant,
        cancel: Option<CancelHandle>,
    ) -> Result<ServerInfo, Error> {
        let timeout = deadline.saturating_duration_since(Instant::now());
        let params = json!({
            "protocolVersion": LATEST_PROTOCOL_VERSION,
            "capabilities": host::client_capabilities(
                &*self.options.host,
                self.options.declared.capabilities()
            ),
            "clientInfo": self.options.declared.client_info.to_json(),
        });
        let options = CallOptions {
            timeout: Some(timeout),
            max_total_timeout: Some(timeout),
            deadline: Some(deadline),
            cancel,
            ..CallOptions::default()
        };
        let result = self
            .exchange("initialize", Some(&params), &options)
            .map_err(|err| self.explain_silence(err))?;
        let info = ServerInfo::from_initialize_result(&result).map_err(Error::Protocol)?;
        if !SUPPORTED_PROTOCOL_VERSIONS.contains(&info.protocol_version.as_str()) {
            let _ = self.close();
            return Err(Error::UnsupportedProtocol(info.protocol_version));
        }
        Ok(info)
    }

    /// `notifications/initialized`, and whatever the transport's session
    /// needs before the first request.
    pub(super) fn finish_handshake(
        &self,
        info: &ServerInfo,
        deadline: Instant,
    ) -> Result<(), Error> {
        let initialized = Frame::notification("notifications/initialized", None);
        let outlet = self.router.outlet().map_err(|Closed| self.disconnected())?;
        outlet.set_session_kind(SessionKind::Handshake);
        outlet.begin_session(initialized, &info.protocol_version, deadline)?;
        self.set_log_level(info, deadline);
        Ok(())
    }

    /// `logging/setLevel` with the host's level, to a server that declares
    /// `logging` (without it, a server logs what it likes). A refusal only
    /// costs the server's log its filter: it is said, never fatal.
    fn set_log_level(&self, info: &ServerInfo, deadline: Instant) {
        let Some(level) = &self.options.log_level else { return };
        if info.capabilities.get("logging").is_none_or(serde_json::Value::is_null) {
            return;
        }
        let timeout = deadline.saturating_duration_since(Instant::now());
        let options = CallOptions {
            timeout: Some(timeout),
            max_total_timeout: Some(timeout),
            deadline: Some(deadline),
            ..CallOptions::default()
        };
        let params = json!({"level": level});
        match self.exchange("logging/setLevel", Some(&params), &options) {
            Ok(_) => *lock(&self.told_log_level) = LogLevel::from_name(level),
            Err(err) => log::info!("{}: logging/setLevel {level}: {err}", self.router.server()),
        }
    }

    /// True when a call asking for log messages from `level` on would have
    /// the server told a lower level first ([`Client::lower_log_level`]).
    #[cfg_attr(not(feature = "serve"), allow(dead_code))]
    pub(super) fn would_lower_log_level(&self, level: LogLevel) -> bool {
        lock(&self.told_log_level).is_some_and(|told| told > level)
    }

    /// Tells a handshake-era server that logs to send from `level` on, when
    /// a call asks for messages below the level it was told: the level is
    /// the session's, so it goes down and stays down (the messages each call
    /// takes are its own to filter, `Pending::log_to`). Only a handshake-era
    /// server that logs was ever told a level (`set_log_level`), so nothing
    /// else is looked at.
    pub(super) fn lower_log_level(&self, level: LogLevel) {
        {
            let mut told = lock(&self.told_log_level);
            match *told {
                Some(current) if current > level => *told = Some(level),
                _ => return,
            }
        }
        let params = json!({"level": level.as_str()});
        if let Err(err) = self.exchange("logging/setLevel", Some(&params), &CallOptions::default())
        {
            log::info!("{}: logging/setLevel {}: {err}", self.router.server(), level.as_str());
        }
    }
}
