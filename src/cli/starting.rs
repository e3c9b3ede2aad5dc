//! Starting the servers a command names, and saying how the start went:
//! the one server asked for (or why it cannot be started), which servers
//! did not connect, and the exit code a failed start gives.

use std::sync::atomic::Ordering;

use tether::{Config, Error, Hub, ServerState, ServerStatus};

use super::output::{report, EXIT_SERVER, EXIT_USAGE, INTERRUPTED};
use super::signals::SignalWatch;
use super::{escape, status};

/// Starts the hub for `server` (or every server) and fails when a named
/// server did not connect.
pub(super) fn connected_hub(
    config: Config,
    server: Option<&str>,
    signals: &SignalWatch,
) -> Result<Hub, u8> {
    let config = match server {
        None => config,
        Some(name) => only_server(&config, name)?,
    };
    let hub = signals.start_hub(config);
    if let Some(name) = server {
        if let Some(status) =
            hub.status().into_iter().find(|status| status.state != ServerState::Ready)
        {
            return Err(report_start_failure(name, &status, false));
        }
    }
    Ok(hub)
}

/// Says on stderr which servers did not connect (so a listing is known to
/// be partial); true when any did not.
pub(super) fn warn_not_connected(hub: &Hub) -> bool {
    let mut any = false;
    for status in hub.status() {
        if matches!(status.state, ServerState::Failed | ServerState::NeedsLogin) {
            any = true;
            eprintln!(
                "warning: server {:?} is not connected: {}",
                status.name,
                escape::escaped(&status::error_text(&status).unwrap_or_else(|| "?".into()))
            );
        }
    }
    any
}

/// A configuration with only this server, or the exit code of why not
/// (unknown, invalid, untrusted or disabled; each said on stderr).
pub(super) fn only_server(config: &Config, server: &str) -> Result<Config, u8> {
    let Some(server_config) = config.server(server).cloned() else {
        if let Some(failed) =
            config.failed.iter().find(|entry| Config::same_name(&entry.name, server))
        {
            errln!("server {server:?} has an invalid entry: {}", escape::escaped(&failed.error));
            return Err(EXIT_USAGE);
        }
        if let Some(untrusted) =
            config.untrusted.iter().find(|entry| Config::same_name(&entry.name, server))
        {
            let project = untrusted
                .source
                .parent()
                .map_or_else(|| ".".into(), |dir| dir.display().to_string());
            let why = match untrusted.why {
                tether::Unapproved::Changed => "changed since its project was trusted",
                tether::Unapproved::Added => "was added since its project was trusted",
                _ => "is in a project that is not trusted",
            };
            errln!(
                "server {server:?} {why}; it would run: {}",
                escape::escaped(&untrusted.command_line)
            );
            detail!("hint: review it, and if you trust it, run: tether trust {project}");
            return Err(EXIT_USAGE);
        }
        return Err(unknown_server(config, server));
    };
    if !server_config.enabled {
        errln!(
            "server {:?} is disabled (\"enabled\": false); turn it on with: tether enable {}",
            server_config.name,
            server_config.name
        );
        return Err(EXIT_USAGE);
    }
    Ok(Config::new().with_server(server_config))
}

/// Says why the server named did not start (quietly when interrupted),
/// with a hint and its stderr's last lines; returns the exit code.
/// `cut_by_ceiling`: a `--timeout` shorter than its start timeout applied.
pub(super) fn report_start_failure(name: &str, status: &ServerStatus, cut_by_ceiling: bool) -> u8 {
    if INTERRUPTED.load(Ordering::SeqCst) {
        return EXIT_SERVER;
    }
    errln!(
        "server {name:?} failed to start: {}",
        escape::escaped(&status::error_text(status).unwrap_or_else(|| "unknown error".into()))
    );
    let start_timed_out = status.error.as_deref().is_some_and(|error| {
        matches!(
            error.root(),
            Error::Timeout(tether::Timeout { step: tether::Step::Start { .. }, .. })
        )
    });
    if start_timed_out && cut_by_ceiling {
        // The limit was the --timeout given, not the entry's startTimeout.
        detail!("hint: it was still starting when --timeout ran out; pass a longer --timeout");
    } else if let Some(hint) = status::hint(status) {
        detail!("hint: {}", escape::escaped(&hint));
    }
    if let Some(tail) = &status.stderr_tail {
        for line in status::last_lines(tail, 10) {
            detail!("stderr: {}", escape::escaped(line));
        }
    }
    start_failure_code(status)
}

/// The exit code of a server that did not start: 2 when its configuration
/// is at fault (an unset `bearerTokenEnv`, say), 3 when the server is.
pub(super) fn start_failure_code(status: &ServerStatus) -> u8 {
    if status.error.as_deref().is_some_and(|error| !error.is_server_failure()) {
        EXIT_USAGE
    } else {
        EXIT_SERVER
    }
}

/// Says that no server has this name, and which one is close.
pub(super) fn unknown_server(config: &Config, name: &str) -> u8 {
    let code = report(&Error::UnknownServer(name.to_owned()));
    // A file that could not be read hides every server in it.
    let unread = config.failed.iter().find(|entry| {
        entry.source.as_ref().and_then(|source| source.file_name()).and_then(|n| n.to_str())
            == Some(entry.name.as_str())
    });
    if let Some(unread) = unread {
        detail!("hint: {}", escape::escaped(&unread.error));
    } else if let Some(close) = config.closest_name(name) {
        detail!("hint: did you mean {close:?}?");
    }
    code
}
