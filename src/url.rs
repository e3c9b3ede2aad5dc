//! URLs as tether judges, compares and shows them, without a URL crate.
//!
//! A judgment (is this `http` URL on this machine? are these two the same
//! origin?) must read a URL as the browser or HTTP client that follows it
//! will, or `http://A\\@127.0.0.1/` passes for loopback while a browser goes
//! to host `A`. So [`WebUrl::parse`] follows the WHATWG URL standard's
//! parser for `http` and `https` as far as the host and port: tabs and
//! newlines dropped, `\\` read as `/`, any run of slashes after the scheme,
//! the last `@` ending the user info, the host percent-decoded and
//! lowercased, and IPv4 in every form a browser takes (`0x7f.1`,
//! `2130706433`). A host with characters beyond ASCII is kept as it is and
//! never judged to be this machine (a browser's IDNA mapping may make it
//! anything). [`redact_url`] is the form for messages and `Debug`, which
//! leaves out what may be secret (user info, the query).

use std::net::{Ipv4Addr, Ipv6Addr};

/// The host of a URL, as a browser reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Host {
    /// A name, lowercased (beyond ASCII: as written).
    Domain(String),
    V4(Ipv4Addr),
    V6(Ipv6Addr),
}

/// An `http` or `https` URL's scheme, host and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WebUrl {
    /// `http` or `https`.
    pub(crate) scheme: &'static str,
    pub(crate) host: Host,
    /// The port, `None` for the scheme's default.
    pub(crate) port: Option<u16>,
}

impl WebUrl {
    /// Reads `input` as a browser would; `None` when it is not an `http`
    /// or `https` URL a browser would take.
    pub(crate) fn parse(input: &str) -> Option<WebUrl> {
        let trimmed = input.trim_matches(|c: char| c <= ' ');
        let cleaned: String =
            trimmed.chars().filter(|c| !matches!(c, '\t' | '\n' | '\r')).collect();
        let (scheme, rest) = cleaned.split_once(':')?;
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "http" => "http",
            "https" => "https",
            _ => return None,
        };
        let rest = rest.trim_start_matches(['/', '\\']);
        let authority = rest.split(['/', '\\', '?', '#']).next().unwrap_or("");
        let host_and_port = authority.rsplit_once('@').map_or(authority, |(_, after)| after);
        let (host, port) = if let Some(inside) = host_and_port.strip_prefix('[') {
            let (address, after) = inside.split_once(']')?;
            let port = match after {
                "" => None,
                _ => Some(after.strip_prefix(':')?),
            };
            (Host::V6(address.parse().ok()?), port)
        } else {
            let (host, port) = match host_and_port.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (host_and_port, None),
            };
            (parse_host(host)?, port)
        };
        let port = match port {
            None | Some("") => None,
            Some(digits) if digits.bytes().all(|b| b.is_ascii_digit()) => {
                // Leading zeros count for nothing ("0080" is 80).
                let significant = digits.trim_start_matches('0');
                if significant.len() > 5 {
                    return None;
                }
                let value = u16::try_from(significant.parse::<u32>().unwrap_or(0)).ok()?;
                let default = if scheme == "https" { 443 } else { 80 };
                (value != default).then_some(value)
            }
            Some(_) => return None,
        };
        Some(WebUrl { scheme, host, port })
    }

    /// True for a host on this machine: `localhost`, `127.0.0.0/8`, `::1`.
    pub(crate) fn is_loopback(&self) -> bool {
        match &self.host {
            Host::Domain(name) => name == "localhost",
            Host::V4(address) => address.is_loopback(),
            Host::V6(address) => address.is_loopback(),
        }
    }

    /// `scheme://host[:port]`.
    pub(crate) fn origin(&self) -> String {
        let host = match &self.host {
            Host::Domain(name) => name.clone(),
            Host::V4(address) => address.to_string(),
            Host::V6(address) => format!("[{address}]"),
        };
        match self.port {
            Some(port) => format!("{}://{host}:{port}", self.scheme),
            None => format!("{}://{host}", self.scheme),
        }
    }
}

/// True for `https`, or `http` to this machine: where tether sends what a
/// sign-in needs, and what it opens in a browser.
pub fn is_https_or_loopback_http(url: &str) -> bool {
    WebUrl::parse(url).is_some_and(|url| url.scheme == "https" || url.is_loopback())
}

/// True for `http` (not `https`) to this machine.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn is_loopback_http(url: &str) -> bool {
    WebUrl::parse(url).is_some_and(|url| url.scheme == "http" && url.is_loopback())
}

/// A host as the WHATWG host parser reads it (not in brackets).
fn parse_host(text: &str) -> Option<Host> {
    if text.is_empty() {
        return None;
    }
    let decoded = percent_decode(text)?;
    let forbidden = |c: char| {
        c <= ' '
            || c == '\u{7f}'
            || matches!(
                c,
                '#' | '%' | '/' | ':' | '<' | '>' | '?' | '@' | '[' | '\\' | ']' | '^' | '|'
            )
    };
    if decoded.chars().any(forbidden) {
        return None;
    }
    if !decoded.is_ascii() {
        return Some(Host::Domain(decoded));
    }
    let host = decoded.to_ascii_lowercase();
    if ends_in_a_number(&host) {
        return parse_ipv4(&host).map(Host::V4);
    }
    Some(Host::Domain(host))
}

/// `%XX` decoded; `None` when the bytes are not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[at],
            bytes.get(at + 1).copied().and_then(hex),
            bytes.get(at + 2).copied().and_then(hex),
        ) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                at += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                at += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// The standard's "ends in a number": the last label (a trailing dot aside)
/// is decimal digits, or `0x` and hex digits.
fn ends_in_a_number(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    let last = host.rsplit('.').next().unwrap_or("");
    if !last.is_empty() && last.bytes().all(|b| b.is_ascii_digit()) {
        return true;
    }
    last.strip_prefix("0x").is_some_and(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The standard's IPv4 parser: up to four parts, each decimal, octal
/// (leading `0`) or hex (`0x`), the last filling the bytes left.
fn parse_ipv4(host: &str) -> Option<Ipv4Addr> {
    let host = host.strip_suffix('.').unwrap_or(host);
    let parts: Vec<&str> = host.split('.').collect();
    if parts.len() > 4 {
        return None;
    }
    let mut numbers = Vec::with_capacity(4);
    for part in &parts {
        let (digits, radix) = if let Some(hex) = part.strip_prefix("0x") {
            (hex, 16)
        } else if part.len() > 1 && part.starts_with('0') {
            (&part[1..], 8)
        } else {
            (*part, 10)
        };
        if part.is_empty() {
            return None;
        }
        let value = if digits.is_empty() {
            0
        } else {
            // Too many digits for any address: not one.
            if digits.len() > 32 {
                return None;
            }
            u64::from_str_radix(digits, radix).ok()?
        };
        numbers.push(value);
    }
    let (last, leading) = numbers.split_last()?;
    if leading.iter().any(|&n| n > 255) {
        return None;
    }
    let room = 8 * (5 - numbers.len() as u32);
    if room < 64 && *last >= 1u64 << room {
        return None;
    }
    let mut address = *last;
    for (at, &n) in leading.iter().enumerate() {
        address += n << (8 * (3 - at as u32));
    }
    u32::try_from(address).ok().map(Ipv4Addr::from)
}

/// `scheme://host[:port]` of an `http` or `https` URL, as a browser reads it.
pub(crate) fn origin_of(url: &str) -> Option<String> {
    WebUrl::parse(url).map(|url| url.origin())
}

/// A URL as messages may show it: no user info, no query (where keys go);
/// an `http(s)` URL with its host as a browser reads it.
pub(crate) fn redact_url(url: &str) -> String {
    if let Some(parsed) = WebUrl::parse(url) {
        let cleaned: String = url.chars().filter(|c| !matches!(c, '\t' | '\n' | '\r')).collect();
        let rest = cleaned.split_once(':').map_or("", |(_, rest)| rest);
        let rest = rest.trim_start_matches(['/', '\\']);
        let after_authority = rest.find(['/', '\\', '?', '#']).map_or("", |at| &rest[at..]);
        let path = after_authority.split(['?', '#']).next().unwrap_or("").replace('\\', "/");
        let elided = if after_authority.len() > path.len() { "?…" } else { "" };
        return format!("{}{path}{elided}", parsed.origin());
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.split(['?', '#']).next().unwrap_or(url).to_owned();
    };
    let without_query = rest.split(['?', '#']).next().unwrap_or(rest);
    let (authority, path) =
        without_query.split_once('/').map_or((without_query, ""), |(a, p)| (a, p));
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let slash = if without_query.contains('/') { "/" } else { "" };
    let elided = if rest.len() > without_query.len() { "?…" } else { "" };
    format!("{scheme}://{host}{slash}{path}{elided}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_in_messages_hide_credentials() {
        assert_eq!(
            redact_url("https://user:pw@example.com/mcp?key=s3cr3t"),
            "https://example.com/mcp?…"
        );
        assert_eq!(redact_url("http://127.0.0.1:9/mcp"), "http://127.0.0.1:9/mcp");
    }

    #[test]
    fn origins() {
        assert_eq!(
            origin_of("http://127.0.0.1:8080/mcp?x=1").as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(origin_of("HTTPS://Example.com").as_deref(), Some("https://example.com"));
        assert_eq!(origin_of("nope"), None);
        assert_eq!(origin_of("https://a.example:443/x"), origin_of("https://a.example/y"));
        assert_eq!(origin_of("http://me@a.example/x").as_deref(), Some("http://a.example"));
        assert_eq!(origin_of("ftp://a.example/x"), None);
    }

    // Issue 27 (item 6): URLs are judged as a browser reads them.
    #[test]
    fn loopback_is_judged_as_a_browser_reads_the_url() {
        for url in [
            "http://127.0.0.1/",
            "http://localhost:8080/cb",
            "http://LOCALHOST/",
            "http://[::1]:9/",
            "http://127.1/",
            "http://0x7f.0.0.1/",
            "http://2130706433/",
            "http://0177.0.0.1/",
            "http:\\\\127.0.0.1/",
            "http:127.0.0.1",
            "  http://127.0.0.1/\n",
            "http://user:pw@127.0.0.1/",
            "http://127.0.0.%31/",
            // The backslash ends the host: the rest is the path.
            "http://127.0.0.1\\@evil.example/",
            "http://127.0.0.1:0080/",
        ] {
            assert!(is_loopback_http(url), "{url}");
        }
        for url in [
            "http://A\\@127.0.0.1/",
            "http://127.0.0.1.evil.example/",
            "http://evil.example#@127.0.0.1/",
            "http://evil.example?@127.0.0.1/",
            "http://127.0.0.1:99999/",
            "http://1.2.3.4.5/",
            "http://256.0.0.1/",
            "http://４２.example/",
            "http://１２７．０．０．１/",
            "http://[::ffff:127.0.0.1]/",
            "http:// 127.0.0.1/",
            "https://127.0.0.1/",
            "javascript:alert(1)//127.0.0.1",
            "file:///etc/passwd",
        ] {
            assert!(!is_loopback_http(url), "{url}");
        }
        assert!(is_https_or_loopback_http("https://as.example/authorize?x=1"));
        assert!(!is_https_or_loopback_http("http://A\\@127.0.0.1/"));
        assert!(!is_https_or_loopback_http("https://exa mple.com/"));
        assert_eq!(
            WebUrl::parse("HTTP://Example.COM:80/x").unwrap().origin(),
            "http://example.com"
        );
        assert_eq!(WebUrl::parse("https://a.example:8443").unwrap().port, Some(8443));
    }
}
