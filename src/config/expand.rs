//! Expanding values from tether's environment: `${VAR}`, `${VAR:-default}`,
//! `$$`, `~/`, and `!command` values.
//!
//! Expansion is where secrets enter a configuration, so it is also where the
//! rules about them are enforced: which host variables an entry may name
//! (`TETHER_MCP_ENV`; for project files, only those), and that project files,
//! which anyone who can write the repository writes, never run a command. The
//! names of the variables an entry used are recorded for `secret_vars`; their
//! values never appear in an error.

use std::collections::BTreeSet;

use crate::value_command::run_command;

/// Expands values for one entry.
pub(crate) struct Expander<'a> {
    environment: &'a [(String, String)],
    /// `TETHER_MCP_ENV`, when set: the host variables configuration may name.
    allowed: Option<&'a BTreeSet<String>>,
    /// True for project entries: stricter rules.
    project: bool,
    /// Host variables this entry named.
    pub(crate) named: BTreeSet<String>,
    /// False for a disabled entry: its `!command` values are not run.
    pub(crate) run_commands: bool,
    /// True when an entry is checked before it is written: an unset
    /// variable expands to nothing (and sets `saw_unset`) instead of failing.
    pub(crate) unset_allowed: bool,
    pub(crate) saw_unset: bool,
}

impl<'a> Expander<'a> {
    pub(crate) fn new(
        environment: &'a [(String, String)],
        allowed: Option<&'a BTreeSet<String>>,
        project: bool,
    ) -> Expander<'a> {
        Expander {
            environment,
            allowed,
            project,
            named: BTreeSet::new(),
            run_commands: true,
            unset_allowed: false,
            saw_unset: false,
        }
    }

    /// Checks that this entry may hand host variable `name` to a server.
    ///
    /// # Errors
    /// Why not, naming the variable.
    pub(crate) fn check_variable(&mut self, name: &str) -> Result<(), String> {
        let allowed = self.allowed.is_some_and(|allowed| allowed.contains(name));
        if self.project && !allowed {
            return Err(format!(
                "names the host variable {name}, which a project file may use only when TETHER_MCP_ENV lists it"
            ));
        }
        if self.allowed.is_some() && !allowed {
            return Err(format!(
                "names the host variable {name}, which TETHER_MCP_ENV does not list"
            ));
        }
        self.named.insert(name.to_owned());
        Ok(())
    }

    fn lookup(&self, name: &str) -> Option<&'a str> {
        self.environment.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }

    /// Expands `${VAR}`, `${VAR:-default}` and `$$` in `value`, and `~/` at its start.
    ///
    /// # Errors
    /// An unset variable without a default, a forbidden variable, or a `${`
    /// without its `}`.
    pub(crate) fn expand(&mut self, value: &str) -> Result<String, String> {
        let value = expand_home(value, self.lookup("HOME"));
        let mut out = String::with_capacity(value.len());
        let mut rest = value.as_str();
        while let Some(at) = rest.find('$') {
            out.push_str(&rest[..at]);
            rest = &rest[at..];
            if let Some(after) = rest.strip_prefix("$$") {
                out.push('$');
                rest = after;
            } else if let Some(after) = rest.strip_prefix("${") {
                let end = after
                    .find('}')
                    .ok_or_else(|| format!("has \"${{\" without a closing \"}}\" in {value:?}"))?;
                let inside = &after[..end];
                let (name, default) = match inside.split_once(":-") {
                    Some((name, default)) => (name, Some(default)),
                    None => (inside, None),
                };
                if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    return Err(format!("has an invalid variable name {name:?}"));
                }
                self.check_variable(name)?;
                // As in the shell, `:-` also replaces a variable that is set but empty.
                match (self.lookup(name), default) {
                    (Some(""), Some(default)) => out.push_str(default),
                    (Some(found), _) => out.push_str(found),
                    (None, Some(default)) => out.push_str(default),
                    (None, None) if self.unset_allowed => self.saw_unset = true,
                    (None, None) => {
                        return Err(format!(
                            "uses ${{{name}}}, which is not set (give a default: ${{{name}:-…}})"
                        ))
                    }
                }
                rest = &after[end + 1..];
            } else {
                // A lone `$` is literal.
                out.push('$');
                rest = &rest[1..];
            }
        }
        out.push_str(rest);
        Ok(out)
    }

    /// Expands an `env` or `headers` value: `!command args` runs the command
    /// (no shell) and takes its trimmed output; anything else as [`Expander::expand`].
    ///
    /// # Errors
    /// As `expand`, or a command that fails, times out, or is in a project file.
    pub(crate) fn expand_secret(&mut self, value: &str) -> Result<String, String> {
        match value.strip_prefix('!') {
            Some(command_line) => {
                if self.project {
                    return Err("runs a !command, which project files may not do".to_owned());
                }
                if !self.run_commands {
                    // A disabled server starts nothing, so its secrets are not fetched.
                    return Ok(String::new());
                }
                run_command(command_line)
            }
            None => self.expand(value),
        }
    }
}

/// True when a value is taken from the environment or a command rather than
/// written literally into the file.
pub(crate) fn is_indirect(value: &str) -> bool {
    value.starts_with('!') || value.contains("${")
}

/// `~/` at the start means home.
pub(crate) fn expand_home(value: &str, home: Option<&str>) -> String {
    match (value.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => format!("{}/{rest}", home.trim_end_matches('/')),
        _ => value.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Vec<(String, String)> {
        vec![
            ("HOME".into(), "/home/me".into()),
            ("TOKEN".into(), "s3cret".into()),
            ("EMPTY".into(), "".into()),
        ]
    }

    fn check(input: &str, expected: Result<&str, &str>) {
        let environment = env();
        let mut expander = Expander::new(&environment, None, false);
        match (expander.expand(input), expected) {
            (Ok(got), Ok(want)) => assert_eq!(got, want),
            (Err(got), Err(want)) => assert!(got.contains(want), "{got:?} lacks {want:?}"),
            (got, want) => panic!("{input:?}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn variables_defaults_and_dollars() {
        check("Bearer ${TOKEN}", Ok("Bearer s3cret"));
        check("${UNSET:-fallback}/x", Ok("fallback/x"));
        check("${EMPTY:-used}", Ok("used"));
        check("${EMPTY}", Ok(""));
        check("$$HOME costs $5", Ok("$HOME costs $5"));
        check("~/bin/server", Ok("/home/me/bin/server"));
        check("a~/b", Ok("a~/b"));
        check("${UNSET}", Err("${UNSET}, which is not set"));
        check("${TOKEN", Err("without a closing"));
        check("${BAD-NAME}", Err("invalid variable name"));
    }

    #[test]
    fn names_are_recorded_and_errors_never_show_values() {
        let environment = env();
        let mut expander = Expander::new(&environment, None, false);
        expander.expand("${TOKEN}").unwrap();
        assert!(expander.named.contains("TOKEN"));
        let err = expander.expand("${TOKEN} ${MISSING}").unwrap_err();
        assert!(!err.contains("s3cret"));
    }

    #[test]
    fn the_allow_list_and_project_rules() {
        let environment = env();
        let allowed: BTreeSet<String> = ["TOKEN".to_string()].into();
        let mut user = Expander::new(&environment, Some(&allowed), false);
        assert!(user.expand("${TOKEN}").is_ok());
        assert!(user.expand("${HOME}").unwrap_err().contains("TETHER_MCP_ENV does not list"));
        let mut project = Expander::new(&environment, None, true);
        assert!(project.expand("${TOKEN}").unwrap_err().contains("project file"));
        assert!(project.expand_secret("!echo hi").unwrap_err().contains("project files may not"));
        let mut listed_project = Expander::new(&environment, Some(&allowed), true);
        assert_eq!(listed_project.expand("${TOKEN}").unwrap(), "s3cret");
    }

    #[test]
    fn commands_give_trimmed_output_and_named_failures() {
        let environment = env();
        let mut expander = Expander::new(&environment, None, false);
        assert_eq!(
            expander.expand_secret("!echo   token-from-command ").unwrap(),
            "token-from-command"
        );
        let err = expander.expand_secret("!false").unwrap_err();
        assert!(err.contains("`!false` failed"), "{err}");
        let err = expander.expand_secret("!/nonexistent/helper").unwrap_err();
        assert!(err.contains("could not run `!/nonexistent/helper`"), "{err}");
    }
}
