//! The help texts: the global one, and one per command with its usage, its
//! flags and an example, so that `tether COMMAND --help` and
//! `tether help COMMAND` answer without reading the README.
//!
//! Plain constants in one table: the README's command reference is checked
//! against them by a test, so they cannot drift apart unnoticed.

/// The global help: every command on one or two lines.
pub(super) const GLOBAL: &str = "\
tether: a Model Context Protocol client

Usage: tether [GLOBAL OPTIONS] COMMAND [ARGS]
       tether COMMAND --help      (or: tether help COMMAND) for one command

Servers:
  list [NAME...] [-s user|project|local] [--no-connect] [--json]
                                  connect the enabled servers and show each one's state
  get NAME [--json]               one server's entry as resolved (secrets redacted)
  tools [SERVER] [--signatures] [--json]
                                  the tools as the model sees them
  call SERVER TOOL [ARGS_JSON|-|KEY=VALUE...] [--timeout S] [--json]
  call mcp__SERVER__TOOL [ARGS_JSON|-]
                                  call one tool (ARGS_JSON defaults to {}; - reads stdin)
  run [FILE|-] [-e CODE] [--timeout S] [--json]
                                  run a codemode script that calls many tools
  serve [NAME...] [--status-tool] [--check] [--http PORT]
                                  serve the servers as one MCP server on stdin/stdout
  proxy URL [--header 'K: V']... [--check] [flags]
                                  a remote server as a local stdio one (mcp-remote's flags)
  resources [SERVER] [--json]     the resources and resource templates servers offer
  read SERVER URI [-o PATH] [--raw] [--json]
                                  read a resource: text to stdout, binary to a file
  prompts [SERVER] [--json]       the prompts servers offer
  prompt SERVER NAME [ARGS_JSON|-|KEY=VALUE...] [--json]
                                  get a prompt with its arguments filled in
  complete SERVER (--prompt NAME | --resource TEMPLATE) ARG [VALUE]
                                  the values an argument may take (completion/complete)
  watch SERVER URI [--count N] [--read] [--json]
                                  print each change of a resource (resources/subscribe)

Configuration:
  add NAME [-s user|project|local] [-e K=V]... [--description TEXT] -- COMMAND [ARGS...]
  add NAME URL [-t http|sse] [-H 'K: V']... [--bearer-token-env-var VAR]
  add NAME '{JSON}', add-json NAME JSON
                                  add an entry given as JSON
  add                             (on a terminal) asks for each setting
  remove NAME [-s user|project|local]   remove a server
  enable NAME, disable NAME       turn a server on or off where it is defined
  expose NAME MODE [--tool PATTERN] [-s user|project|local]
                                  how its tools reach the model: direct, deferred, hidden, codemode
  trust [DIR] [--yes], untrust [DIR]
                                  let a project's .mcp.json start its servers (or not)
  login NAME                      sign in to an HTTP server (OAuth)
  logout NAME                     forget a server's tokens and registered client
  import [FILE]                   copy servers from Claude, Cursor, VS Code, Codex, Gemini, …
  completion bash|zsh|fish        a completion script for the shell

Kept-alive sessions:
  sessions [--json]               the servers kept running between commands
  sessions end NAME...|--all      end kept-alive sessions

Logs:
  logs [SERVER] [-n N] [-f]
                                  the servers' log messages and stderr (mcp.log)

Global options (before the command):
  --config-dir DIR   user configuration folder (default: $TETHER_CONFIG_DIR,
                     else $XDG_CONFIG_HOME/tether, else ~/.config/tether)
  --config FILE      this run's servers are FILE's alone (mcpServers; not the user,
                     project or local files)
  --project DIR      the project folder, with .mcp.json (default: the current directory)
  --root DIR         a folder the servers may work in (repeatable; default: the project folder)
  --no-roots         offer the servers no folder at all
  --keep-alive       keep the command's servers running for the next commands
                     (a kept-alive session each; ends after 15 minutes unused)
  --answers JSON|@FILE  answer servers' forms (elicitation) with these values, by field,
                     without asking, also with no terminal
  --accept-defaults  answer servers' forms with each field's default where no answer is given
  -v, --verbose      more log output on stderr (repeat for more); RUST_LOG overrides
  -q, --quiet        only errors on stderr
  -h, --help         this text
  -V, --version      the version

Exit codes: 0 success; 1 the tool reported an error, or `list` found a server
not connected; 2 bad usage, bad JSON, unknown server or tool, invalid config;
3 the server could not be reached or broke the protocol.
";

/// Each command's help, by the command's name.
const COMMANDS: &[(&str, &str)] = &[
    (
        "list",
        "\
Usage: tether list [NAME...] [-s|--scope user|project|local] [--no-connect] [--json]

Connects the enabled servers (or only those named) and prints one row per
server: name, state, transport, scope, command or URL, and its tools. A server
that did not connect gets its error, a hint, and the end of its stderr.

Options:
  -s, --scope SCOPE   only the servers of the user, project or local file
      --no-connect    start nothing: what the configuration says of each
      --json          a JSON array, one object per server (see the README)

Exit: 0 when every enabled server connected, 1 otherwise.

Example:
  tether list
  tether list docs --json
",
    ),
    (
        "get",
        "\
Usage: tether get NAME [--json]

Shows one server's entry as tether resolved it, without starting it: scope,
file, trust, whether it is enabled, transport, command or URL, variables and
headers (secret values redacted), timeouts and exposure.

Options:
      --json   the same as a JSON object

Example:
  tether get docs
",
    ),
    (
        "tools",
        "\
Usage: tether tools [SERVER] [--signatures] [--json]

Connects the servers (or only SERVER) and prints the tools as the model sees
them: the qualified name (mcp__SERVER__TOOL), the exposure, and the first line
of the description. What a server offers can depend on the client: some
declare more tools when tether runs on a terminal (elicitation, roots).

SERVER may also be a server that is not configured: its URL, or --stdio CMD
(a command line, quoted as one word) in its place. It runs for this command
alone, named after its package or host, and nothing is written.

Options:
      --server NAME   the same as SERVER
      --signatures    each tool a script can call, as the TypeScript-style
                      signature codemode scripts see (hidden tools left out)
      --json          name, server, tool, exposure, description, schemas and
                      signature

Exit: 0; 1 when a server is not connected (said on stderr); 3 when SERVER is not.

Example:
  tether tools
  tether tools fs --json
  tether tools demo --signatures
",
    ),
    (
        "call",
        "\
Usage: tether call SERVER TOOL [ARGS_JSON|-|KEY=VALUE...] [--timeout S] [--json]
       tether call mcp__SERVER__TOOL [ARGS_JSON|-|KEY=VALUE...] [--timeout S] [--json]

Starts only SERVER and calls one tool. TOOL is the server's own name for it;
the qualified name that `tether tools` prints works alone. ARGS_JSON is a JSON
object and defaults to {}; - reads it from stdin (empty stdin means {}).
Or give the arguments as words, each made the type the tool's schema says:
  k=v        v as a number, boolean, array or object where the schema says so,
             else text (n=3 is 3 for an integer, \"3\" for a string)
  k:=JSON    the JSON value as written (tags:='[\"a\", \"b\"]')
  k=@FILE    the file's text;  k=@-  stdin's text
Prints the result's text; images and other blocks as one-line notes.

SERVER may also be a server that is not configured: its URL, or --stdio CMD
(a command line, quoted as one word) in its place. It runs for this command
alone, named after its package or host, and nothing is written.

Options:
      --timeout S   the whole call's ceiling in seconds, start included
                    (progress from the server does not extend it)
      --json        the whole result as the server sent it
      --max-chars N print at most N characters of the text (and say so)
      --save-images DIR
                    write each image of the result to DIR (image-1.png, …)

Exit: 0 done, 1 the tool reported an error, 2 bad usage or unknown tool,
3 the server failed.

Example:
  tether call fs read_text_file path=README.md
  tether call --stdio \"npx -y @modelcontextprotocol/server-everything\" get-sum a=2 b=3
  tether call https://mcp.example.com/mcp search query=tether
  tether call fs read_text_file '{\"path\": \"README.md\"}'
  echo '{\"text\": \"hi\"}' | tether call mcp__demo__count_words -
",
    ),
    (
        "serve",
        "\
Usage: tether serve [NAME...] [--status-tool] [--check] [--http [HOST:]PORT]

Serves the enabled servers (or the ones named) as one MCP server over stdin
and stdout, for a client that starts servers as commands (Claude Desktop, an
editor, another agent), or with --http over Streamable HTTP at /mcp. Tools are SERVER__TOOL and prompts SERVER__PROMPT;
one server named alone keeps its own names, and what tether does not answer
goes to it. Hidden tools are left out; codemode tools are the one codemode
tool. Servers start in the background: initialize is answered at once, and
each server that connects later is announced as a tools list change. Their
requests for roots, sampling and elicitation go to the client in front.
Logs go to stderr. The end of stdin ends every server.

Options:
      --status-tool   also offer tether__status: each server's state
      --check         start the servers, print how each is, and exit
      --http [HOST:]PORT
                      serve Streamable HTTP at http://HOST:PORT/mcp instead
                      (a bare port is 127.0.0.1's; 0 picks a free one), until
                      SIGINT or SIGTERM; the address and a bearer token every
                      request must carry are printed on stderr
      --token-env VAR the bearer token is VAR's value (none is printed)
      --allow-origin ORIGIN
                      also take requests from pages of ORIGIN (repeatable;
                      loopback pages always may)

Exit: 0 when stdin ended (with --check: every server connected), 1 with
--check when one did not, 2 bad usage or an unknown server, 3 the --http
port cannot be listened on; ended by a signal, 128 + its number (130 for
SIGINT, 143 for SIGTERM), as a shell says.

Example:
  {\"mcpServers\": {\"all\": {\"command\": \"tether\", \"args\": [\"serve\"]}}}
  tether serve --check
",
    ),
    (
        "proxy",
        "\
Usage: tether proxy URL [--header 'K: V']... [--transport MODE] [--check] [flags]

Serves the remote MCP server at URL on stdin and stdout, for a client that
starts servers as commands: what `npx mcp-remote URL` does, with tether's
sign-in, token store and limits. initialize is answered at once; a sign-in
the server needs opens the browser in the background (the URL is printed on
stderr too), and its tools are announced when it connects. Processes that
share the token store refresh it one at a time.

Options:
      --header 'K: V'            a header on every request (repeatable; ${VAR}
                                 from the environment)
      --transport MODE           http-first (default), http-only, sse-only,
                                 sse-first (SSE only: tether falls back from
                                 HTTP to SSE, not the other way)
      --allow-http               plain http to another machine (refused otherwise;
                                 loopback is always allowed)
      --callback-port PORT       the sign-in's redirect listener's port
      --callback-host HOST       the redirect URI's host (with --callback-port)
      --static-oauth-client-info JSON|@FILE
                                 a client registered beforehand: client_id,
                                 client_secret
      --auth-timeout S           how long the sign-in may take (default 300)
      --resource URL             the resource (RFC 8707) to sign in for, instead
                                 of the one the server's metadata names
      --no-resource-param        name no resource (for authorization servers
                                 that refuse it)
      --ignore-tool PATTERN      leave matching tools out (* matches any run;
                                 repeatable)
      --debug-log FILE           debug logs to FILE instead of stderr
      --check                    connect (signing in if needed), list the tools, exit
      --http [HOST:]PORT         serve Streamable HTTP instead of stdio (as
                                 tether serve --http; also --token-env VAR and
                                 --allow-origin ORIGIN)

Exit: 0 when stdin ended (with --check: connected), 1 with --check when it did
not, 2 bad usage, 3 the --http port cannot be listened on; ended by a signal,
128 + its number (130 for SIGINT, 143 for SIGTERM).

Example:
  {\"mcpServers\": {\"linear\": {\"command\": \"tether\",
                  \"args\": [\"proxy\", \"https://mcp.linear.app/mcp\"]}}}
  tether proxy https://mcp.example.com/mcp --header 'Authorization: Bearer ${TOKEN}' --check
",
    ),
    (
        "run",
        "\
Usage: tether run [FILE|-] [-e CODE] [--stdio CMD] [--url URL] [--timeout S] [--json]

Runs a codemode script: JavaScript, the body of an async function, calling
tools as `await tools.mcp__SERVER__TOOL({...})` (a `-` in a name is written
`_`). Only the servers it names start (all when it searches or lists). The
value it returns goes to stdout, as JSON unless a string; each call, with its
time, and console lines go to stderr. No FILE and no -e: the script is read
from stdin. Scripts see tools, searchTools, describeNamespace, ALL_TOOLS,
listResources, readResource, image and console: no files, network or timers.

Options:
  -e, --eval CODE     the script itself
      --stdio CMD     a server not configured, for this run (repeatable), named
                      after its package (said on stderr)
      --url URL       the same, a remote server named after its host
      --timeout S     the whole command's ceiling, server starts included
                      (else the script's 30 s, \"codemode\" in mcp.json)
      --json          {value, console, images, calls, error, elapsedMs}

Exit: 0; 1 the script threw, hit a limit or returned a tool error; 2 bad
usage, a syntax error, an unknown tool; 3 a server failed, time ran out.

Example:
  tether run -e 'return await tools.mcp__demo__count_words({ text: \"to be\" })'
  tether run report.js --timeout 60 > report.json
",
    ),
    (
        "resources",
        "\
Usage: tether resources [SERVER] [--json]

Lists the resources and resource templates the servers (or SERVER) offer:
server, URI, name and MIME type. A server without resources simply has none.

Options:
      --server NAME   the same as SERVER
      --json          {\"resources\": [...], \"resourceTemplates\": [...]}

Exit: 0; 1 when a server is not connected or could not list (said on stderr);
3 when SERVER is not connected.

Example:
  tether resources docs
",
    ),
    (
        "read",
        "\
Usage: tether read SERVER URI [-o|--output PATH] [--raw] [--json]

Reads one resource. Text goes to stdout, binary content to a new file named
after the URI in the current folder (never replacing one: logo.png is taken,
so logo-1.png). With -o, everything goes to PATH: a file (replaced if it
exists), or a folder to put it in. tether says where it went.

Options:
  -o, --output PATH   where binary content goes (a file or a folder)
      --raw           binary content to stdout, as bytes
      --json          the contents as the server sent them

Example:
  tether read docs file:///guide.md
  tether read media demo://logo.png -o images/
",
    ),
    (
        "prompts",
        "\
Usage: tether prompts [SERVER] [--json]

Lists the prompts the servers (or SERVER) offer, with their arguments.

Options:
      --server NAME   the same as SERVER
      --json          the prompts as JSON

Exit: 0; 1 when a server is not connected or could not list (said on stderr);
3 when SERVER is not connected.

Example:
  tether prompts
",
    ),
    (
        "prompt",
        "\
Usage: tether prompt SERVER NAME [ARGS_JSON|-|KEY=VALUE...] [--json]

Gets one prompt with its arguments filled in (a JSON object whose values are
strings, as MCP requires; - reads it from stdin; or KEY=VALUE words, KEY=@FILE
for a file's text) and prints its messages.
`tether prompts SERVER` lists a server's prompts and their arguments.

Options:
      --json   the result as the server sent it

Example:
  tether prompt docs summarize '{\"topic\": \"release notes\"}'
",
    ),
    (
        "add",
        "\
Usage: tether add NAME [OPTIONS] -- COMMAND [ARGS...]
       tether add NAME [OPTIONS] URL
       tether add NAME [OPTIONS] --url URL
       tether add NAME [OPTIONS] '{\"command\": \"npx\", \"args\": [\"-y\", \"pkg\"]}'
       tether add                (on a terminal: asks for each setting)

Writes a server entry to the user file (or, with -s project, the project's
.mcp.json): a local (stdio) server from a command, or a remote one from a URL.
Every field is checked as the loader checks it; nothing that would not load
is written. Secrets belong in variables: -H 'Authorization: Bearer ${TOKEN}'
or --bearer-token-env-var TOKEN keep them out of the file.

Options:
  -s, --scope user|project|local
                               which file (default: user): user is yours everywhere,
                               project the project's .mcp.json (shared), local
                               yours in this project alone (-l, --local)
  -e, --env KEY=VALUE          a variable for a stdio server (repeatable)
  -H, --header 'KEY: VALUE'    a header for a remote server (also KEY=VALUE; repeatable)
  -t, --transport KIND         http or sse for a URL (default: tried in that order);
                               stdio (or local) for a command
      --url URL                the remote server's URL (http:// or https://)
      --bearer-token-env-var VAR
                               send the variable VAR as a bearer token
      --description TEXT       one sentence: what the server is for
      --timeout SECS           per-request timeout (default 60)
      --start-timeout SECS     start, first handshake and tool list (default 30)
      --protocol auto|legacy|modern
                               which era of MCP to speak (default auto: probe
                               with server/discover, then fall back)
      --include-tools A,B      offer only these tools (the entry's \"tools\")
      --exclude-tools C,D      leave these out (hidden in \"toolExposure\")
      --keep-alive             keep it running between commands (\"keepAlive\": true;
                               see tether sessions --help)

An entry given as JSON (as `tether add-json` takes it) is written as given,
with the options added, once the loader accepts it.

Example:
  tether add fs -- npx -y @modelcontextprotocol/server-filesystem .
  tether add docs https://example.com/mcp -H 'X-Api-Key: ${DOCS_KEY}'
",
    ),
    (
        "add-json",
        "\
Usage: tether add-json NAME JSON [-s|--scope user|project|local]

Writes the entry JSON (one server's object, as in any client's mcpServers)
under NAME, as `claude mcp add-json` does. Checked as the loader checks it;
nothing that would not load is written.

Example:
  tether add-json fs '{\"command\": \"npx\", \"args\": [\"-y\", \"@modelcontextprotocol/server-filesystem\", \".\"]}'
  tether add-json docs '{\"type\": \"http\", \"url\": \"https://example.com/mcp\"}' -s project
",
    ),
    (
        "remove",
        "\
Usage: tether remove NAME [-s|--scope user|project|local]

Removes a server's entry. When both files define it and no scope is given,
tether asks on a terminal and refuses without one.

Options:
  -s, --scope user|project|local
                             which file (--project, --user, -l/--local)

Example:
  tether remove docs
",
    ),
    (
        "enable",
        "\
Usage: tether enable NAME [-s|--scope user|project|local]

Sets \"enabled\": true in the file that defines the server (the project file
when both do, unless -s says which), touching nothing else in that file.

Example:
  tether enable docs
",
    ),
    (
        "disable",
        "\
Usage: tether disable NAME [-s|--scope user|project|local]

Sets \"enabled\": false in the file that defines the server (the project file
when both do, unless -s says which). A disabled server is never started.

Example:
  tether disable docs
",
    ),
    (
        "expose",
        "\
Usage: tether expose NAME MODE [--tool PATTERN] [-s|--scope user|project|local]

Sets how a server's tools reach the model: direct (listed to the model),
deferred (found through search), hidden (never shown), codemode. With --tool,
only the tools matching PATTERN (* matches any run of characters).

Options:
      --tool PATTERN         one tool or a pattern instead of the whole server
  -s, --scope user|project|local
                             which file (default: where the server is defined)

Example:
  tether expose fs deferred --tool 'write_*'
",
    ),
    (
        "trust",
        "\
Usage: tether trust [DIR] [--yes]

Lets the project's .mcp.json (in DIR, default the project folder) start its
servers. Prints exactly what each entry would run, with control characters
escaped, then asks. Each entry is approved as it is now: an entry added or
changed later waits for approval again.

Options:
  -y, --yes   approve without asking (needed without a terminal)

Example:
  tether trust
",
    ),
    (
        "untrust",
        "\
Usage: tether untrust [DIR]

Withdraws the approval of a project folder: its servers no longer start.

Example:
  tether untrust
",
    ),
    (
        "login",
        "\
Usage: tether login NAME [--callback-port PORT] [--client-id ID [--client-secret S]]

Signs in to a remote server with OAuth: opens the browser (or prints the
address), waits for the answer on 127.0.0.1, and stores the tokens in
mcp-auth.json (0600) in the configuration folder.

Options:
      --callback-port PORT   the local port the browser returns to
      --client-id ID         a client registered by hand with the server
      --client-secret S      its secret, for a confidential client

Example:
  tether login docs
",
    ),
    (
        "logout",
        "\
Usage: tether logout NAME

Forgets the server's stored tokens and registered client.

Example:
  tether logout docs
",
    ),
    (
        "import",
        "\
Usage: tether import [FILE]

Copies the servers of another client's configuration into the user file, and
says what it skipped and why: Claude Desktop and Code (mcpServers; the local
servers of ~/.claude.json are named, not copied), Cursor, Windsurf, VS Code
(servers), Gemini CLI (httpUrl, timeout in milliseconds, includeTools and
excludeTools), Codex (config.toml's [mcp_servers]), Zed (context_servers),
OpenCode (mcp). Without FILE, the files found where those clients keep them
are offered (on a terminal; otherwise listed).

Example:
  tether import ~/.cursor/mcp.json
  tether import ~/.codex/config.toml
  tether import
",
    ),
    (
        "completion",
        "\
Usage: tether completion bash|zsh|fish

Prints a completion script for the shell: commands, each command's flags,
and the configured servers' names (read as you type; nothing starts).

Example:
  tether completion bash > ~/.local/share/bash-completion/completions/tether
  tether completion zsh > \"${fpath[1]}/_tether\"
  tether completion fish > ~/.config/fish/completions/tether.fish
",
    ),
    (
        "watch",
        "\
Usage: tether watch SERVER URI [--count N] [--read] [--json]

Subscribes to the resource URI and prints a line each time the server says
it changed (notifications/resources/updated), until --count updates came or
Ctrl-C; a server that stops is connected again and subscribed again. Needs a
server that offers resource subscriptions (resources.subscribe), in either
era (2026-07-28 servers through subscriptions/listen).

Options:
      --count N     stop after N updates (1 or more)
      --read        also print the resource as it is after each update
      --json        one JSON object a line: at, uri, and with --read contents
      --stdio CMD   an ad-hoc server in place of SERVER

Example:
  tether watch notes file:///home/me/notes/today.md --read
  tether watch --stdio \"npx -y my-server\" my://status --count 3 --json
",
    ),
    (
        "complete",
        "\
Usage: tether complete SERVER (--prompt NAME | --resource TEMPLATE) ARG [VALUE] [--context K=V]... [--json]

Asks the server what values ARG may take (MCP's completion/complete), given
VALUE typed so far: an argument of the prompt NAME, or a variable of the
resource template TEMPLATE (its URI template, as `tether resources` shows
it). Prints one value a line; says so on stderr when the server has more.

Options:
      --prompt NAME        complete an argument of this prompt
      --resource TEMPLATE  complete a variable of this resource template
      --context K=V        an argument chosen already (repeatable)
      --json               the completion as JSON: values, total, hasMore
      --stdio CMD          an ad-hoc server in place of SERVER

Example:
  tether complete everything --prompt completable-prompt department E
  tether complete everything --prompt completable-prompt name A --context department=Engineering
  tether complete everything --resource 'demo://resource/dynamic/text/{resourceId}' resourceId 1
",
    ),
    (
        "sessions",
        "\
Usage: tether sessions [--json] | end NAME... | end --all

A kept-alive session is a server kept running between commands by a
background tether of yours, so that what it holds (a browser's pages, a
REPL's variables, a slow start) lasts from one command to the next. A
server gets one when its entry says \"keepAlive\": true (or the idle
seconds), or when a command runs with --keep-alive; every command then
uses the session running for that server. A session ends after its idle
time with no command (15 minutes unless the entry says), or with
`tether sessions end`; its server ends with it.

Options:
      --json    the sessions as one JSON array
      --all     (with end) end every session

Example:
  tether call --keep-alive browser browser_navigate url=https://example.com
  tether call browser browser_snapshot
  tether sessions
  tether sessions end browser
",
    ),
    (
        "logs",
        "\
Usage: tether logs [SERVER] [-n N] [-f]

Shows the end of mcp.log in the configuration folder: what servers logged
(notifications/message) and their stderr lines, with a source column.

Options:
      --server NAME   the same as SERVER: only this server's lines
  -n, --lines N       how many lines (default 50)
  -f, --follow        keep printing new lines until interrupted

Example:
  tether logs docs -f
",
    ),
];

/// The help of a command, if there is such a command.
pub(super) fn of(command: &str) -> Option<&'static str> {
    COMMANDS.iter().find(|(name, _)| *name == command).map(|(_, text)| *text)
}

/// The names of every command.
pub(super) fn commands() -> impl Iterator<Item = &'static str> {
    COMMANDS.iter().map(|(name, _)| *name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_has_usage_options_or_example() {
        for (name, text) in COMMANDS {
            assert!(text.starts_with(&format!("Usage: tether {name}")), "{name}");
            assert!(text.contains("Example:"), "{name}");
            assert!(GLOBAL.contains(&format!("{name} ")), "{name} is in the global help");
        }
    }

    #[test]
    fn global_help_lines_are_aligned() {
        // Every description column starts at the same place.
        for line in GLOBAL.lines().filter(|line| line.starts_with("  ")) {
            let indent = line.len() - line.trim_start().len();
            assert!(indent == 2 || indent >= 5, "{line:?}");
        }
    }
}
