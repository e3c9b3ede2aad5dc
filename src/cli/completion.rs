//! `tether completion bash|zsh|fish`: a completion script for the shell,
//! made from the help texts themselves (each command's flags are the
//! `--long` and `-s` words its help shows), so that it never lists a
//! command or flag tether does not have. Server names are completed from
//! `tether list --no-connect --json` as the user types, which starts
//! nothing.

use std::collections::BTreeSet;

use super::output::{EXIT_OK, EXIT_USAGE};

/// The commands that take a configured server's name first.
const TAKES_SERVER: [&str; 15] = [
    "complete",
    "watch",
    "list",
    "get",
    "tools",
    "resources",
    "read",
    "prompts",
    "prompt",
    "call",
    "serve",
    "remove",
    "enable",
    "disable",
    "expose",
];

pub(super) fn completion(shell: &str) -> u8 {
    let script = match shell {
        "bash" => bash(),
        "zsh" => format!(
            "#compdef tether\n# tether's completion for zsh, through bash's.\nautoload -U +X \
             bashcompinit && bashcompinit\n{}",
            bash()
        ),
        "fish" => fish(),
        other => {
            errln!("completion for {other:?}: tether writes bash, zsh or fish");
            return EXIT_USAGE;
        }
    };
    super::output::emit(&script);
    EXIT_OK
}

/// Words a command takes first besides flags and servers.
fn subcommands(command: &str) -> &'static [&'static str] {
    match command {
        "sessions" => &["end"],
        "completion" => &["bash", "zsh", "fish"],
        _ => &[],
    }
}

/// The global options, as the global help shows them.
const GLOBAL_OPTIONS: &str = "--config-dir --config --project --root --no-roots --keep-alive \
                              -v --verbose -q --quiet --help --version";

/// Every command with its words: its flags (from its help) and the words
/// it takes first.
fn commands() -> Vec<(&'static str, Vec<String>)> {
    super::help::commands()
        .map(|name| {
            let mut words = flags(super::help::of(name).unwrap_or(""));
            if super::args::SERVER_COMMANDS.contains(&name) {
                words.push("--keep-alive".to_owned());
            }
            words.extend(subcommands(name).iter().map(|word| (*word).to_owned()));
            (name, words)
        })
        .collect()
}

/// The `--long` and `-s` flags a help text shows in its usage lines and
/// its options (not in its prose or examples, which show other programs'
/// flags: `npx -y`).
fn flags(help: &str) -> Vec<String> {
    let mut found = BTreeSet::new();
    let usage_or_option = |line: &&str| {
        let trimmed = line.trim_start();
        trimmed.starts_with("Usage:") || trimmed.starts_with("tether ") || trimmed.starts_with('-')
    };
    let shown: String = help
        .split("Example:")
        .next()
        .unwrap_or("")
        .lines()
        .filter(usage_or_option)
        .collect::<Vec<_>>()
        .join("\n");
    for word in
        shown.split(|c: char| c.is_whitespace() || matches!(c, '[' | ']' | '|' | ',' | '(' | ')'))
    {
        let flag: String =
            word.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
        let long = flag.len() > 2 && flag.starts_with("--") && !flag.ends_with('-');
        let short = flag.len() == 2 && flag.starts_with('-') && flag != "--";
        if long || short {
            found.insert(flag);
        }
    }
    found.into_iter().collect()
}

/// The options that take a value: the word after one is not counted as a
/// command's own word, and is completed as that option's values or files.
const VALUE_OPTIONS: &str = "--timeout|--max-chars|--save-images|-o|--output|--count|--context|\
--prompt|--resource|--stdio|--server|-s|--scope|-e|--env|-H|--header|-t|--transport|--url|\
--description|--start-timeout|--protocol|--include-tools|--exclude-tools|--bearer-token-env-var|\
--tool|--http|--token-env|--allow-origin|-n|--lines|--callback-port|--client-id|--client-secret|\
--root|--config-dir|--project|--config";

/// The configured servers' names, read with the files the command line
/// names (`$__tether_files`), starting nothing.
const SERVERS: &str = "tether $__tether_files list --no-connect --json 2>/dev/null | \
                       sed -n 's/.*\"name\": *\"\\([^\"]*\\)\".*/\\1/p'";

fn bash() -> String {
    let commands = commands();
    let names: Vec<&str> = commands.iter().map(|(name, _)| *name).collect();
    let mut cases = String::new();
    for (name, flags) in &commands {
        // A server's name goes first: only there are names offered.
        let servers = if TAKES_SERVER.contains(name) {
            " $( [ \"$words\" -eq 0 ] && __tether_servers)"
        } else {
            ""
        };
        cases.push_str(&format!(
            "        {name}) COMPREPLY=($(compgen -W \"{}{servers}\" -- \"$cur\")) ;;\n",
            flags.join(" ")
        ));
    }
    format!(
        r#"# tether's completion for bash: source it, or put it in your completions folder
# (tether completion bash > ~/.local/share/bash-completion/completions/tether).
__tether_servers() {{
    {SERVERS} | tr '\n' ' '
}}
__tether_sessions() {{
    tether sessions --json 2>/dev/null | sed -n 's/.*"name": *"\([^"]*\)".*/\1/p' | tr '\n' ' '
}}
_tether() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" command="" i words=0 __tether_files=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${{COMP_WORDS[i]}}" in
            --config-dir|--project|--config)
                __tether_files="$__tether_files ${{COMP_WORDS[i]}} ${{COMP_WORDS[i+1]}}"; ((i++)) ;;
            --config-dir=*|--project=*|--config=*)
                __tether_files="$__tether_files ${{COMP_WORDS[i]}}" ;;
            --root) ((i++)) ;;
            -*) ;;
            *) command="${{COMP_WORDS[i]}}"; break ;;
        esac
    done
    if [ -z "$command" ]; then
        COMPREPLY=($(compgen -W "{} {GLOBAL_OPTIONS}" -- "$cur"))
        return
    fi
    # The words typed after the command, flags and their values aside.
    for ((i = i + 1; i < COMP_CWORD; i++)); do
        case "${{COMP_WORDS[i]}}" in
            {VALUE_OPTIONS}) ((i++)) ;;
            -*) ;;
            *) ((words++)) ;;
        esac
    done
    # An option's value: its choices, else files.
    case "${{COMP_WORDS[COMP_CWORD-1]}}" in
        -s|--scope) COMPREPLY=($(compgen -W "user project local" -- "$cur")); return ;;
        -t|--transport) COMPREPLY=($(compgen -W "http sse stdio" -- "$cur")); return ;;
        --protocol) COMPREPLY=($(compgen -W "auto legacy modern" -- "$cur")); return ;;
        {VALUE_OPTIONS}) COMPREPLY=(); return ;;
    esac
    if [ "$command" = sessions ] && [ "$words" -ge 1 ]; then
        COMPREPLY=($(compgen -W "--all $(__tether_sessions)" -- "$cur"))
        return
    fi
    case "$command" in
{cases}    esac
}}
complete -o default -F _tether tether
"#,
        names.join(" ")
    )
}

fn fish() -> String {
    let commands = commands();
    let names: Vec<&str> = commands.iter().map(|(name, _)| *name).collect();
    let mut out = String::from(
        "# tether's completion for fish \
         (tether completion fish > ~/.config/fish/completions/tether.fish).\n",
    );
    out.push_str(&format!(
        "complete -c tether -n '__fish_use_subcommand' -f -a '{}'\n",
        names.join(" ")
    ));
    for option in ["config-dir", "config", "project", "root"] {
        out.push_str(&format!("complete -c tether -n '__fish_use_subcommand' -l {option} -r\n"));
    }
    for option in ["no-roots", "keep-alive", "verbose", "quiet", "help", "version"] {
        out.push_str(&format!("complete -c tether -n '__fish_use_subcommand' -l {option}\n"));
    }
    for (name, flags) in &commands {
        let when = format!("__fish_seen_subcommand_from {name}");
        for flag in flags {
            match flag.strip_prefix("--") {
                Some(long) => out.push_str(&format!("complete -c tether -n '{when}' -l {long}\n")),
                None => out.push_str(&format!(
                    "complete -c tether -n '{when}' -s {}\n",
                    flag.trim_start_matches('-')
                )),
            }
        }
        if TAKES_SERVER.contains(name) {
            let servers = SERVERS.replace("$__tether_files ", "");
            out.push_str(&format!("complete -c tether -n '{when}' -f -a '({servers})'\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_come_from_the_help() {
        let call = flags(super::super::help::of("call").unwrap());
        assert!(call.contains(&"--timeout".to_owned()) && call.contains(&"--json".to_owned()));
        assert!(!call.iter().any(|flag| flag == "--"));
        let add = flags(super::super::help::of("add").unwrap());
        assert!(add.contains(&"-e".to_owned()) && add.contains(&"--include-tools".to_owned()));
        // Not another program's flag from an example, nor one named in prose.
        assert!(!call.contains(&"-y".to_owned()), "{call:?}");
        let sessions = flags(super::super::help::of("sessions").unwrap());
        assert!(!sessions.contains(&"--keep-alive".to_owned()), "{sessions:?}");
        assert!(sessions.contains(&"--all".to_owned()), "{sessions:?}");
    }

    #[test]
    fn every_shell_gets_every_command() {
        for script in [bash(), fish()] {
            for name in super::super::help::commands() {
                assert!(script.contains(name), "{name}");
            }
        }
    }
}
