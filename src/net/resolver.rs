//! The resolver of the connector chain: IP literals on the spot, names
//! through ureq's resolver, kept a few seconds. Like the TCP link, it is
//! called by ureq with no way to pass who waits, so it asks the held
//! caller's deadline (`socket::held_deadline`).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use ureq::unversioned::resolver::ResolvedSocketAddrs;

use crate::sync::lock;

/// Resolves IP-literal hosts (`127.0.0.1`, `[::1]`) on the spot, and
/// names through ureq's resolver, keeping what it found for
/// [`NAME_LIFETIME`] (5 s). ureq asks for every request, also over a pooled
/// connection, and with a timeout set its resolver looks the name up on a
/// thread of its own: a new thread and a lookup per call to `localhost`
/// made calls 2.5 times slower than to `127.0.0.1`.
#[derive(Debug, Default)]
pub(crate) struct LiteralFirstResolver {
    names: ureq::unversioned::resolver::DefaultResolver,
    /// The last name found (an agent talks to one host, or to its proxy),
    /// its port, and when it was looked up.
    found: Mutex<Option<(String, u16, Instant, ResolvedSocketAddrs)>>,
}

/// How long a name's addresses are used before it is looked up again
/// (short: a server that moved is found again within seconds).
const NAME_LIFETIME: Duration = Duration::from_secs(5);

impl ureq::unversioned::resolver::Resolver for LiteralFirstResolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: ureq::unversioned::transport::NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let host = uri.host().unwrap_or_default();
        let literal = host.trim_start_matches('[').trim_end_matches(']').parse().ok();
        let port = uri.port_u16().or_else(|| match uri.scheme_str() {
            Some("https") => Some(443),
            Some("http") => Some(80),
            _ => None,
        });
        let Some(port) = port else { return self.names.resolve(uri, config, timeout) };
        if let Some(ip) = literal {
            let mut addresses = self.empty();
            addresses.push(std::net::SocketAddr::new(ip, port));
            return Ok(addresses);
        }
        let now = Instant::now();
        if let Some((name, at_port, at, addresses)) = &*lock(&self.found) {
            if name == host
                && *at_port == port
                && now.saturating_duration_since(*at) < NAME_LIFETIME
            {
                return Ok(addresses.clone());
            }
        }
        // A caller posting on its own thread waits no longer for a name
        // than for anything else.
        let mut timeout = timeout;
        if let Some(left) = super::socket::held_deadline()
            .map(|at| at.saturating_duration_since(now).max(Duration::from_millis(1)))
            .filter(|left| *left < *timeout.after)
        {
            timeout.after = ureq::unversioned::transport::time::Duration::Exact(left);
        }
        let addresses = self.names.resolve(uri, config, timeout)?;
        *lock(&self.found) = Some((host.to_owned(), port, now, addresses.clone()));
        Ok(addresses)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ureq::unversioned::resolver::Resolver;
    use ureq::unversioned::transport::NextTimeout;

    #[test]
    fn a_name_is_looked_up_once_and_a_literal_never_kept() {
        let resolver = LiteralFirstResolver::default();
        let config = ureq::config::Config::default();
        let resolve = |url: &str| {
            let uri: ureq::http::Uri = url.parse().unwrap();
            resolver.resolve(&uri, &config, NextTimeout::default()).unwrap()
        };
        let kept =
            || lock(&resolver.found).as_ref().map(|(name, port, at, _)| (name.clone(), *port, *at));
        let first = resolve("http://localhost:8123/mcp");
        assert!(first.iter().all(|addr| addr.ip().is_loopback() && addr.port() == 8123));
        let (name, port, looked_up) = kept().unwrap();
        assert_eq!((name.as_str(), port), ("localhost", 8123));
        let again = resolve("http://localhost:8123/other");
        assert_eq!(&first[..], &again[..]);
        assert_eq!(kept().unwrap().2, looked_up, "served from what was found");
        let literal = resolve("http://127.0.0.1:8123/");
        assert_eq!(literal[0], "127.0.0.1:8123".parse().unwrap());
        assert_eq!(kept().unwrap().2, looked_up, "a literal is not kept");
        let other = resolve("http://localhost:9000/");
        assert!(other.iter().all(|addr| addr.port() == 9000), "another port is looked up");
        assert_eq!(kept().unwrap().1, 9000);
        // An entry past its lifetime is looked up again.
        let Some(old) = Instant::now().checked_sub(NAME_LIFETIME) else { return };
        lock(&resolver.found).as_mut().unwrap().2 = old;
        resolve("http://localhost:9000/");
        assert!(kept().unwrap().2.elapsed() < NAME_LIFETIME);
    }
}
