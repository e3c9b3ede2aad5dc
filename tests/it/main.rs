//! tether's integration tests: real child processes, real pipes, real files.

mod agent; // what an agent loop needs: list changes, logs, exposure, shaping, refresh
mod auth; // OAuth against the oauth-server fixture, tether login and logout
mod cli; // the `tether` binary: commands, output, exit codes, signals
mod codemode; // scripts through `tether run`, the agent loop and the hub; without the engine
mod config; // scopes, trust, expansion, secrets, and the commands that edit files
mod conformance; // the official MCP conformance suite's client scenarios
mod hostile; // hostile files, servers and neighbours, round two
mod http; // remote servers against the http-server fixture: every failure path
mod hub; // Hub: parallel start, failures recorded, registry, many callers
mod interop; // third-party servers from npm and PyPI over stdio
mod interop_setup; // installs those servers into target/ at pinned versions
#[cfg(feature = "serve")]
mod keep; // kept-alive sessions: a background tether keeping a server between commands
mod modern; // the stateless 2026-07-28 revision: the era probe, MRTR, listen, HTTP headers
mod network; // proxies from the environment, private CAs (caFile, SSL_CERT_FILE/DIR)
mod reading; // stdio leader/follower: callers reading for themselves, nothing lost, bounded
#[cfg(feature = "serve")]
mod serve; // tether serve and proxy: a real process served to a client written in the test
#[cfg(feature = "serve")]
mod serve_faults; // what tether serve says of faults: bad frames, the input's end, failures
#[cfg(feature = "serve")]
mod serve_http; // tether serve --http: real sockets, the SDKs' clients, the port's guards
mod stdio; // Client over stdio against the misbehaving fixture
mod support; // fixture binaries, process accounting, bounded waits
mod usage; // help, argument shapes, checked add, get, roots, escaped output
