//! The scope options every command that picks a file shares: `-s/--scope
//! user|project` and the older spellings other clients taught people.

use lexopt::prelude::*;

/// A scope option: `-s/--scope user|project`, or one of the older
/// spellings `-l`/`--local`/`--project` (project) and `--user`.
pub(crate) enum ScopeFlag {
    /// `-s`/`--scope`: the scope is the option's value.
    Valued,
    Fixed(tether::Scope),
}

pub(crate) fn scope_flag(arg: &lexopt::Arg) -> Option<ScopeFlag> {
    match arg {
        Short('s') | Long("scope") => Some(ScopeFlag::Valued),
        Short('l') | Long("local") | Long("project") => {
            Some(ScopeFlag::Fixed(tether::Scope::Project))
        }
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
    // `local` is what Claude Code calls the project scope.
    let value = if value == "local" { "project" } else { value };
    value.parse().map_err(|err| format!("--scope: {err}").into())
}
