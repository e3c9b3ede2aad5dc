//! `tether serve`: the configured servers (or the named ones) served as one
//! MCP server on stdin and stdout, through the library's `Downstream`; and
//! the serving `tether proxy` shares.
//!
//! stdout carries the protocol alone, so nothing here writes to it but the
//! serving (and `--check`, which serves nothing). The hub starts in the
//! background, so the client's `initialize` is answered at once; the
//! signal watch ends every server on SIGINT, SIGTERM or SIGHUP, and the end
//! of stdin ends the command.

use std::io;

use tether::{Config, Downstream, HubOptions, NameStyle, ServeOptions, ServerState};

use super::output::{report, EXIT_OK, EXIT_TOOL_ERROR};
use super::signals::SignalWatch;
use super::starting::unknown_server;
use super::{output, status};

pub(super) fn serve(
    mut config: Config,
    names: &[String],
    status_tool: bool,
    check: bool,
    signals: &SignalWatch,
) -> u8 {
    for name in names {
        if config.server(name).is_none() {
            return unknown_server(&config, name);
        }
    }
    if !names.is_empty() {
        config
            .servers
            .retain(|server| names.iter().any(|name| Config::same_name(&server.name, name)));
    }
    let only = match names {
        [one] => Some(one.as_str()),
        _ => None,
    };
    let options = ServeOptions::default().with_status_tool(status_tool);
    serve_config(config, signals.options.clone(), only, options, check, signals)
}

/// Serves `config`'s servers (`only`: that one with its own names), or with
/// `check` starts them, says how each is, and exits.
pub(super) fn serve_config(
    config: Config,
    hub_options: HubOptions,
    only: Option<&str>,
    mut options: ServeOptions,
    check: bool,
    signals: &SignalWatch,
) -> u8 {
    if check {
        // With these options (a proxy's sign-in handler), waiting for each
        // server at most its start timeout.
        let hub = signals.start_hub_now(config, hub_options);
        hub.wait_started();
        let statuses = hub.status();
        output::emit(&status::render_list(&statuses));
        let all = statuses
            .iter()
            .all(|status| matches!(status.state, ServerState::Ready | ServerState::Disabled));
        return if all { EXIT_OK } else { EXIT_TOOL_ERROR };
    }
    // One server keeps its own names; many are SERVER__TOOL.
    let style = match only {
        Some(server) => {
            options = options.with_passthrough(server);
            NameStyle::Prefixed
        }
        None => NameStyle::Short,
    };
    let downstream = Downstream::new();
    let hub_options = hub_options.with_host(downstream.host()).with_name_style(style);
    let hub = signals.start_hub_now(config, hub_options);
    match downstream.serve(&hub, io::stdin().lock(), io::stdout(), &options) {
        Ok(()) => EXIT_OK,
        Err(err) => report(&err),
    }
}
