//! The scope options every command that picks a file shares: `-s/--scope
//! user|project|local` and the short spellings other clients taught people.

use lexopt::prelude::*;

/// A scope option: `-s/--scope user|project|local`, or one of the short
/// spellings `--project`, `--user`, `-l`/`--local` (as Claude Code means
/// local: the user's own, for this project alone).
pub(crate) enum ScopeFlag {
    /// `-s`/`--scope`: the scope is the option's value.
    Valued,
    Fixed(tether::Scope),
}

pub(crate) fn scope_flag(arg: &lexopt::Arg) -> Option<ScopeFlag> {
    match arg {
        Short('s') | Long("scope") => Some(ScopeFlag::Valued),
        Long("project") => Some(ScopeFlag::Fixed(tether::Scope::Project)),
        Short('l') | Long("local") => Some(ScopeFlag::Fixed(tether::Scope::Local)),
        Long("user") => Some(ScopeFlag::Fixed(tether::Scope::User)),
        _ => None,
    }
}

/// The scope a [`ScopeFlag`] names, reading its value when it takes one.
pub(crate) fn scope_of(
    flag: ScopeFlag,
    parser: &mut lexopt::Parser,
) -> Result<tether::Scope, lexopt::Error> {
    match flag {
        ScopeFlag::Valued => parse_scope(&parser.value()?.string()?),
        ScopeFlag::Fixed(scope) => Ok(scope),
    }
}

fn parse_scope(value: &str) -> Result<tether::Scope, lexopt::Error> {
    value.parse().map_err(|err| format!("--scope: {err}").into())
}
