//! `WWW-Authenticate` challenges (RFC 6750, RFC 9728): what a 401 or 403
//! says about where to sign in and with which scope. A server's header is
//! untrusted input: the parser takes what it understands and never fails.

/// The parts of a `Bearer` challenge tether uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Challenge {
    /// `resource_metadata`: where the protected resource metadata is.
    pub(crate) resource_metadata: Option<String>,
    /// `scope`: what the request needs, space-separated.
    pub(crate) scope: Option<String>,
    /// `error`: `invalid_token`, `insufficient_scope`, …
    pub(crate) error: Option<String>,
}

impl Challenge {
    /// Reads the `Bearer` challenge of a `WWW-Authenticate` value (empty
    /// when there is none).
    pub(crate) fn parse(header: &str) -> Challenge {
        let mut challenge = Challenge::default();
        let mut in_bearer = false;
        for (scheme, name, value) in params(header) {
            if let Some(scheme) = scheme {
                in_bearer = scheme.eq_ignore_ascii_case("bearer");
            }
            if !in_bearer {
                continue;
            }
            let slot = match name.to_ascii_lowercase().as_str() {
                "resource_metadata" => &mut challenge.resource_metadata,
                "scope" => &mut challenge.scope,
                "error" => &mut challenge.error,
                _ => continue,
            };
            if slot.is_none() {
                *slot = Some(value);
            }
        }
        challenge
    }

    /// True for `error="insufficient_scope"`.
    pub(crate) fn is_insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// The auth-params of a header value, each with the scheme it starts, if
/// it is the first of a new challenge: `Bearer a=1, b="x", Basic c=2` gives
/// `(Some(Bearer), a, 1)`, `(None, b, x)`, `(Some(Basic), c, 2)`.
fn params(header: &str) -> Vec<(Option<String>, String, String)> {
    let mut found = Vec::new();
    let mut rest = header.trim();
    let mut scheme: Option<String> = None;
    while !rest.is_empty() {
        rest = rest.trim_start_matches([',', ' ', '\t']);
        // A token followed by whitespace (not `=`) starts a new challenge.
        let token_end = rest.find([' ', '\t', ',', '=']).unwrap_or(rest.len());
        let token = &rest[..token_end];
        let after = &rest[token_end..];
        if token.is_empty() {
            break;
        }
        if !after.trim_start().starts_with('=') {
            scheme = Some(token.to_owned());
            rest = after;
            continue;
        }
        let after = after.trim_start()[1..].trim_start();
        let (value, remaining) = if let Some(quoted) = after.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let mut end = quoted.len();
            while let Some((at, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, escaped)) = chars.next() {
                            value.push(escaped);
                        }
                    }
                    '"' => {
                        end = at + 1;
                        break;
                    }
                    other => value.push(other),
                }
            }
            (value, &quoted[end.min(quoted.len())..])
        } else {
            let end = after.find([',', ' ', '\t']).unwrap_or(after.len());
            (after[..end].to_owned(), &after[end..])
        };
        found.push((scheme.take(), token.to_owned(), value));
        rest = remaining;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(header: &str, metadata: Option<&str>, scope: Option<&str>, error: Option<&str>) {
        let challenge = Challenge::parse(header);
        assert_eq!(challenge.resource_metadata.as_deref(), metadata, "{header}");
        assert_eq!(challenge.scope.as_deref(), scope, "{header}");
        assert_eq!(challenge.error.as_deref(), error, "{header}");
    }

    #[test]
    fn bearer_challenges() {
        check(
            r#"Bearer resource_metadata="https://a.example/.well-known/oauth-protected-resource/mcp""#,
            Some("https://a.example/.well-known/oauth-protected-resource/mcp"),
            None,
            None,
        );
        check(
            r#"Bearer error="insufficient_scope", scope="mcp:basic mcp:write", resource_metadata="http://x/m""#,
            Some("http://x/m"),
            Some("mcp:basic mcp:write"),
            Some("insufficient_scope"),
        );
        check(r#"bearer realm="a, b", scope=read"#, None, Some("read"), None);
        check(r#"Bearer scope="a \"quoted\" b""#, None, Some(r#"a "quoted" b"#), None);
    }

    #[test]
    fn other_schemes_and_garbage_are_passed_over() {
        check(r#"Basic realm="x", scope="no""#, None, None, None);
        check(r#"Basic realm="x", Bearer scope="yes""#, None, Some("yes"), None);
        check("", None, None, None);
        check("Bearer", None, None, None);
        check(r#"Bearer scope="unterminated"#, None, Some("unterminated"), None);
        check("Bearer ,,, =, ==", None, None, None);
    }
}
