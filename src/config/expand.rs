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
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a `!command` value may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

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

/// Runs `!command args` (split on white space, no shell) and returns its
/// trimmed stdout. The error names the command, never its output. The
/// command runs in its own process group, which is killed if it takes too
/// long; and no wait here is unbounded, even when something it started
/// keeps its output open.
fn run_command(command_line: &str) -> Result<String, String> {
    let mut words = command_line.split_whitespace();
    let program = words.next().ok_or("has an empty !command")?;
    let shown = format!("!{}", command_line.trim());
    let mut command = Command::new(program);
    command
        .args(words)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // Ended with its whole tree if tether dies while it runs (a helper
    // waiting for a password when the user presses Ctrl-C).
    #[cfg(target_os = "linux")]
    crate::supervisor::install(&mut command, crate::supervisor::Sweep::Nothing);
    let mut child = command.spawn().map_err(|err| format!("could not run `{shown}`: {err}"))?;
    let deadline = Instant::now() + COMMAND_TIMEOUT;
    let output = read_to_channel(child.stdout.take().expect("stdout is piped"), 1024 * 1024);
    let errors = read_to_channel(child.stderr.take().expect("stderr is piped"), 64 * 1024);
    let kill_group = |child: &mut std::process::Child| {
        // SAFETY: killpg on the group this function created for the child.
        unsafe {
            libc::killpg(child.id() as libc::pid_t, libc::SIGKILL);
        }
        let _ = child.wait();
    };
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                kill_group(&mut child);
                return Err(format!(
                    "`{shown}` did not finish within {} s",
                    COMMAND_TIMEOUT.as_secs()
                ));
            }
            Err(err) => {
                kill_group(&mut child);
                return Err(format!("waiting for `{shown}` failed: {err}"));
            }
        }
    };
    let remaining =
        || deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(100));
    let Ok(output) = output.recv_timeout(remaining()) else {
        return Err(format!("`{shown}` left something running that holds its output open"));
    };
    let errors = errors.recv_timeout(remaining()).unwrap_or_default();
    if !status.success() {
        let first_line =
            String::from_utf8_lossy(&errors).lines().next().unwrap_or("").trim().to_owned();
        let why = if first_line.is_empty() { String::new() } else { format!(": {first_line}") };
        return Err(format!("`{shown}` failed ({status}){why}"));
    }
    let text = String::from_utf8(output)
        .map_err(|_| format!("`{shown}` printed something that is not UTF-8"))?;
    Ok(text.trim().to_owned())
}

/// Reads a pipe (at most `limit` bytes) on a thread; the bytes arrive on
/// the channel when the pipe ends. The thread ends with the pipe.
fn read_to_channel(
    pipe: impl Read + Send + 'static,
    limit: u64,
) -> crossbeam_channel::Receiver<Vec<u8>> {
    let (sender, receiver) = crossbeam_channel::bounded(1);
    let spawned = std::thread::Builder::new().name("tether-bang-output".into()).spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.take(limit).read_to_end(&mut bytes);
        let _ = sender.send(bytes);
    });
    if spawned.is_err() {
        log::warn!("cannot start a thread to read a !command's output");
    }
    receiver
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
