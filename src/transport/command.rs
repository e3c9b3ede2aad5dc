//! A stdio server's command, resolved: the program, its arguments, its
//! whole environment, its folder. `environment.rs` builds one from an entry,
//! `launch.rs` starts it, `stdio.rs` connects to what started; each of them
//! reads it here, so none leans on another for it.

use std::path::PathBuf;
use std::time::Duration;

/// A fully resolved command: what to run, with exactly this environment.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StdioCommand {
    /// The program: a path, or a name looked up in the environment's `PATH`.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// The complete environment of the child (nothing else is inherited).
    pub env: Vec<(String, String)>,
    /// The working directory; tether's own when `None`.
    pub cwd: Option<PathBuf>,
    /// How long the server gets to exit after its stdin closes, before
    /// SIGTERM (2 s when `None`).
    pub shutdown_grace: Option<Duration>,
}

impl std::fmt::Debug for StdioCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The environment may hold secrets: show only the names.
        let names: Vec<&str> = self.env.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("StdioCommand")
            .field("program", &self.program)
            .field("args", &format_args!("[{} arguments]", self.args.len()))
            .field("env", &names)
            .field("cwd", &self.cwd)
            .finish()
    }
}
