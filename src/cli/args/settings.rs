//! The commands about the configuration and sign-ins that are not `add`:
//! `get`, `expose`, `trust`/`untrust`, `login`, `logs`, and the
//! `NAME [-s SCOPE]` that `remove`, `enable` and `disable` take.

use std::path::PathBuf;

use lexopt::prelude::*;

use super::scope::{scope_flag, scope_of};
use super::{number, Command};

pub(super) fn parse_expose(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
    let (mut positional, mut tool, mut scope) = (Vec::new(), None, None);
    while let Some(arg) = parser.next()? {
        if let Some(flag) = scope_flag(&arg) {
            scope = Some(scope_of(flag, parser)?);
            continue;
        }
        match arg {
            Long("tool") => tool = Some(parser.value()?.string()?),
            Value(word) if positional.len() < 2 => positional.push(word.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    let mut positional = positional.into_iter();
    match (positional.next(), positional.next()) {
        (Some(name), Some(mode)) => {
            let mode = mode.parse().map_err(|err: tether::UnknownWord| {
                format!("{:?} is not an exposure; use one of {}", err.given, err.expected)
            })?;
            Ok(Command::Expose { name, mode, tool, scope })
        }
        _ => {
            Err("usage: tether expose SERVER direct|deferred|hidden|codemode [--tool PATTERN] [-s user|project]"
                .into())
        }
    }
}

pub(super) fn parse_login(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
    let (mut name, mut overrides) = (None, tether::OAuthSettings::default());
    while let Some(arg) = parser.next()? {
        match arg {
            Long("callback-port") => {
                let port: u16 = number(parser, "--callback-port", "a port number")?;
                overrides.callback_port = Some(port);
            }
            Long("client-id") => overrides.client_id = Some(parser.value()?.string()?),
            Long("client-secret") => overrides.client_secret = Some(parser.value()?.string()?),
            Value(word) if name.is_none() => name = Some(word.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    let name = name.ok_or(
        "usage: tether login NAME [--callback-port PORT] [--client-id ID [--client-secret S]]",
    )?;
    if overrides.client_secret.is_some() && overrides.client_id.is_none() {
        return Err("--client-secret goes with --client-id".into());
    }
    Ok(Command::Login { name, overrides })
}

pub(super) fn parse_logs(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
    let (mut server, mut lines, mut follow) = (None, 50, false);
    while let Some(arg) = parser.next()? {
        match arg {
            // Not -s: everywhere else that is the scope.
            Long("server") => server = Some(parser.value()?.string()?),
            Value(name) if server.is_none() => server = Some(name.string()?),
            Short('n') | Long("lines") => lines = number(parser, "--lines", "a number of lines")?,
            Short('f') | Long("follow") => follow = true,
            _ => return Err(arg.unexpected()),
        }
    }
    Ok(Command::Logs { server, lines, follow })
}

/// `NAME [-s user|project]`: `remove`, `enable`, `disable`.
pub(super) fn name_and_scope(
    parser: &mut lexopt::Parser,
    command: &str,
) -> Result<(String, Option<tether::Scope>), lexopt::Error> {
    let (mut name, mut scope) = (None, None);
    while let Some(arg) = parser.next()? {
        if let Some(flag) = scope_flag(&arg) {
            scope = Some(scope_of(flag, parser)?);
            continue;
        }
        match arg {
            Value(word) if name.is_none() => name = Some(word.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    let name = name.ok_or_else(|| format!("usage: tether {command} NAME [-s user|project]"))?;
    Ok((name, scope))
}

pub(super) fn parse_get(parser: &mut lexopt::Parser) -> Result<Command, lexopt::Error> {
    let (mut name, mut json) = (None, false);
    while let Some(arg) = parser.next()? {
        match arg {
            Long("json") => json = true,
            Value(word) if name.is_none() => name = Some(word.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    let name = name.ok_or("usage: tether get NAME [--json]")?;
    Ok(Command::Get { name, json })
}

pub(super) fn parse_trust(
    parser: &mut lexopt::Parser,
    trusted: bool,
) -> Result<Command, lexopt::Error> {
    let (mut dir, mut yes) = (None, false);
    while let Some(arg) = parser.next()? {
        match arg {
            Short('y') | Long("yes") if trusted => yes = true,
            Value(word) if dir.is_none() => dir = Some(PathBuf::from(word)),
            _ => return Err(arg.unexpected()),
        }
    }
    Ok(Command::Trust { dir, trusted, yes })
}
