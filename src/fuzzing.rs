//! Entry points for fuzzing the parsers a server or a file feeds: one
//! function per target, each taking raw bytes and asserting what must hold
//! whatever the input (no panic, bounded output, limits kept).
//!
//! The `cargo fuzz` targets in `fuzz/` call these through the `fuzzing`
//! feature (hidden from the documented API); the test suite calls the same
//! functions over the kept corpora and a few seconds of mutated inputs, on
//! the stable toolchain, so a crash found once stays a regression test.

use std::io::Cursor;

use crate::config::Config;
use crate::framing::{Framer, Next};

/// The framer: newline-delimited JSON and `Content-Length` frames, with a
/// small limit so that the limit paths are reached.
pub fn framer(data: &[u8]) {
    const LIMIT: usize = 4096;
    let mut framer = Framer::with_limit(LIMIT);
    let mut input = Cursor::new(data);
    let mut frames = 0;
    // Ends at the end of input, or at a frame too large (the connection's end).
    loop {
        match framer.next_frame() {
            Ok(Next::Frame(frame)) => {
                assert!(frame.len() <= LIMIT, "a frame past the limit was returned");
                frames += 1;
                assert!(frames <= data.len() + 1, "more frames than bytes");
            }
            Ok(Next::More) => {
                framer.fill_from(&mut input).expect("a cursor reads");
            }
            Ok(Next::End) | Err(_) => break,
        }
    }
}

/// The server-sent-events parser, with a small event limit.
pub fn sse(data: &[u8]) {
    const LIMIT: usize = 4096;
    let mut reader = crate::transport::sse::SseReader::new(Cursor::new(data), LIMIT);
    let mut events = 0;
    while let Ok(Some(event)) = reader.next_event() {
        assert!(event.data.len() <= LIMIT + 1, "an event past the limit was returned");
        events += 1;
        assert!(events <= data.len() + 1, "more events than bytes");
    }
}

/// JSON-RPC classification of one frame.
pub fn jsonrpc(data: &[u8]) {
    let _ = crate::jsonrpc::Message::parse(data);
}

/// `WWW-Authenticate` challenges.
pub fn www_authenticate(data: &[u8]) {
    if let Ok(header) = std::str::from_utf8(data) {
        let challenge = crate::auth::challenge::Challenge::parse(header);
        let _ = challenge.is_insufficient_scope();
    }
}

/// A whole configuration file: entry parsing and `${…}` expansion (against
/// a fixed environment; `!command` values are not run in a fuzzer, since a
/// disabled entry's are not, so the input decides).
pub fn config(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let environment = vec![
            ("HOME".to_owned(), "/home/fuzz".to_owned()),
            ("TOKEN".to_owned(), "secret".to_owned()),
        ];
        let config = Config::checked_from_json(text, &environment);
        for server in &config.servers {
            // What `get` shows must not panic either.
            let _ = server.redacted_entry();
            let _ = server.target();
        }
    }
}

/// `${VAR}`, `${VAR:-default}`, `$$` and `~/` expansion of one value.
pub fn expansion(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let environment =
            [("HOME".to_owned(), "/home/fuzz".to_owned()), ("A".to_owned(), "x".to_owned())];
        let mut expander = crate::config::expand::Expander::new(&environment, None, false);
        if let Ok(expanded) = expander.expand(text) {
            // Expansion never grows a value beyond its parts.
            assert!(expanded.len() <= text.len() * 10 + 64, "{text:?} grew to {expanded:?}");
        }
    }
}

/// A configuration file as tether reads one from disk: written to a file,
/// read back within a (small) limit, and parsed as a configuration. Holds:
/// a file is read only within the limit; a document keeps at most its cap
/// of servers and counts all of them.
pub fn config_file(data: &[u8]) {
    const LIMIT: u64 = 64 * 1024;
    thread_local! {
        static FILE: std::path::PathBuf = std::env::temp_dir().join(format!(
            "tether-fuzz-config-{}-{:?}.json",
            std::process::id(),
            std::thread::current().id()
        ));
    }
    FILE.with(|path| {
        if std::fs::write(path, data).is_err() {
            return;
        }
        let read = crate::bounded_read::read_text(path, LIMIT);
        assert_eq!(
            read.is_ok(),
            data.len() as u64 <= LIMIT && std::str::from_utf8(data).is_ok(),
            "read {} bytes with a limit of {LIMIT}",
            data.len()
        );
        let Ok(text) = read else { return };
        if let Ok(document) = crate::config::ConfigDocument::parse(&text) {
            if let crate::config::DocumentServers::Object(servers) = &document.servers {
                assert!(servers.len() <= crate::config::MAX_ENTRIES_PER_FILE);
                assert!(document.server_count >= servers.len());
            }
        }
        config(text.as_bytes());
    });
}

/// Judging a URL as a browser reads it. Holds: a URL judged `http` to
/// this machine, written back from what was read, is judged the same; its
/// host is `localhost`, in `127.0.0.0/8` or `::1`.
pub fn url(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = crate::url::redact_url(text);
    let _ = crate::url::origin_of(text);
    let Some(parsed) = crate::url::WebUrl::parse(text) else { return };
    let again = crate::url::WebUrl::parse(&parsed.origin());
    assert_eq!(again.as_ref(), Some(&parsed), "{text:?} read back differently");
    if crate::url::is_loopback_http(text) {
        assert_eq!(parsed.scheme, "http");
        let loopback = match &parsed.host {
            crate::url::Host::Domain(name) => name == "localhost",
            crate::url::Host::V4(address) => address.octets()[0] == 127,
            crate::url::Host::V6(address) => *address == std::net::Ipv6Addr::LOCALHOST,
        };
        assert!(loopback, "{text:?} judged loopback: {parsed:?}");
    }
}

/// A fuzz target: bytes in, a panic when something that must hold does not.
pub type Target = fn(&[u8]);

/// Every target, by name, for the smoke run.
pub const TARGETS: &[(&str, Target)] = &[
    ("framer", framer),
    ("sse", sse),
    ("jsonrpc", jsonrpc),
    ("www_authenticate", www_authenticate),
    ("config", config),
    ("expansion", expansion),
    ("config_file", config_file),
    ("url", url),
];

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::{Duration, Instant};

    use super::TARGETS;

    /// How long each target gets mutated inputs in the smoke run.
    const SMOKE: Duration = Duration::from_millis(1500);

    /// The kept inputs of a target: its corpus and the crashes found once
    /// (`fuzz/regressions/<target>/`), which must pass from then on.
    fn kept(target: &str) -> Vec<Vec<u8>> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
        let mut inputs = Vec::new();
        for folder in ["corpus", "regressions"] {
            let Ok(entries) = std::fs::read_dir(root.join(folder).join(target)) else { continue };
            for entry in entries.flatten() {
                if let Ok(bytes) = std::fs::read(entry.path()) {
                    inputs.push(bytes);
                }
            }
        }
        inputs
    }

    /// A small deterministic generator (xorshift), so a failure reproduces.
    struct Mutator(u64);

    impl Mutator {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }

        /// A few flips, inserts, deletions, repeats and splices of `seed`.
        fn mutate(&mut self, seed: &[u8], other: &[u8]) -> Vec<u8> {
            const INTERESTING: &[&[u8]] = &[
                b"\n",
                b"\r\n",
                b"\r\n\r\n",
                b"{",
                b"}",
                b"\"",
                b"\\",
                b"${",
                b"data:",
                b":",
                b"\0",
                b"\xff",
            ];
            let mut out = seed.to_vec();
            for _ in 0..=self.below(4) {
                let at = self.below(out.len() + 1);
                match self.below(6) {
                    0 if !out.is_empty() => {
                        let at = at.min(out.len() - 1);
                        out[at] ^= 1 << self.below(8);
                    }
                    1 => {
                        let word = INTERESTING[self.below(INTERESTING.len())];
                        out.splice(at..at, word.iter().copied());
                    }
                    2 if !out.is_empty() => {
                        let end = (at + self.below(16)).min(out.len());
                        out.drain(at.min(end)..end);
                    }
                    3 => {
                        let end = (at + self.below(64)).min(out.len());
                        let piece: Vec<u8> = out[at.min(end)..end].to_vec();
                        for _ in 0..self.below(8) {
                            out.splice(at..at, piece.iter().copied());
                        }
                    }
                    4 if !other.is_empty() => {
                        let from = self.below(other.len());
                        let end = (from + self.below(256)).min(other.len());
                        out.splice(at..at, other[from..end].iter().copied());
                    }
                    _ => out.insert(at, self.next() as u8),
                }
            }
            out
        }
    }

    // Issue 12 (item 13): every fuzz target, over its kept corpus and the
    // crashes it once found, then mutated inputs for a moment, on stable.
    #[test]
    fn fuzz_targets_smoke_run() {
        for &(name, target) in TARGETS {
            let inputs = kept(name);
            assert!(!inputs.is_empty(), "fuzz/corpus/{name} has no inputs");
            for input in &inputs {
                target(input);
            }
            let mut mutator = Mutator(0x9e37_79b9_7f4a_7c15 ^ name.len() as u64);
            let started = Instant::now();
            let mut runs = 0u64;
            while started.elapsed() < SMOKE {
                let seed = &inputs[mutator.below(inputs.len())];
                let other = &inputs[mutator.below(inputs.len())];
                let input = mutator.mutate(seed, other);
                target(&input);
                runs += 1;
            }
            assert!(runs > 100, "{name}: only {runs} runs");
        }
    }
}
