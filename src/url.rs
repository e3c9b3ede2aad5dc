//! URLs as tether compares and shows them, without a URL crate: the origin
//! that same-origin checks compare, and a form for messages and `Debug`
//! that leaves out what may be secret (user info, the query).

/// `scheme://host[:port]` of a URL.
pub(crate) fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host).to_ascii_lowercase();
    let default_port = if scheme == "https" { ":443" } else { ":80" };
    let host = host.strip_suffix(default_port).unwrap_or(&host);
    Some(format!("{scheme}://{host}"))
}

/// A URL as messages may show it: no user info, no query (where keys go).
pub(crate) fn redact_url(url: &str) -> String {
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
    }
}
