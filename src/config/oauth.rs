//! An entry's `oauth` object (SPEC §7), checked key by key like the rest
//! of the entry: unknown keys are refused with the closest known one,
//! secrets may come from `${VAR}` or `!command`, URLs are checked.
//!
//! The settings themselves are plain data kept here, with the rest of an
//! entry, so that configuration needs nothing of `auth/`: the sign-in reads
//! them, never the other way round.

use std::fmt;

use serde_json::{Map, Value};

use super::expand::Expander;
use crate::spelling::closest;

/// How a server's OAuth sign-in is set up: the `oauth` object of an entry,
/// or a host's code. Every field is optional; with none, tether discovers
/// everything and registers itself.
#[derive(Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OAuthSettings {
    /// A client id registered with the authorization server beforehand.
    pub client_id: Option<String>,
    /// Its secret, for a confidential client.
    pub client_secret: Option<String>,
    /// A Client ID Metadata Document URL, used as the client id when the
    /// authorization server supports them.
    pub client_metadata_url: Option<String>,
    /// The name sent at dynamic registration (default `tether`).
    pub client_name: Option<String>,
    /// Scopes (space-separated) for servers that advertise none.
    pub scope: Option<String>,
    /// The authorization server's metadata URL, instead of discovery.
    pub auth_server_metadata_url: Option<String>,
    /// Machine to machine: the `client_credentials` grant, no person.
    pub client_credentials: bool,
    /// A PKCS#8 PEM P-256 key: authenticate with `private_key_jwt` (ES256).
    pub private_key_pem: Option<String>,
    /// The port of the CLI's loopback listener for the redirect.
    pub callback_port: Option<u16>,
    /// A fixed redirect URI (http on loopback) for the CLI's listener.
    pub callback_url: Option<String>,
    /// Enterprise-managed sign-in (SEP-990): an identity from the
    /// organisation's identity provider instead of a person's sign-in.
    pub enterprise: Option<EnterpriseIdentity>,
    /// The RFC 8707 `resource` to name in authorization and token requests
    /// instead of the one discovery found (`tether proxy --resource`).
    pub resource: Option<String>,
    /// Name no `resource` at all, for an authorization server that refuses
    /// it (`tether proxy --no-resource-param`).
    pub omit_resource: bool,
}

/// An identity from an organisation's identity provider (SEP-990): its ID
/// token is exchanged there for an identity assertion (ID-JAG), which the
/// MCP server's authorization server takes in a JWT bearer grant.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EnterpriseIdentity {
    /// The identity provider's token endpoint.
    pub token_endpoint: String,
    /// This client's id at the identity provider.
    pub client_id: String,
    /// The person's ID token from the identity provider (a secret).
    pub id_token: String,
}

impl EnterpriseIdentity {
    /// An identity to exchange at `token_endpoint`.
    pub fn new(token_endpoint: &str, client_id: &str, id_token: &str) -> EnterpriseIdentity {
        EnterpriseIdentity {
            token_endpoint: token_endpoint.to_owned(),
            client_id: client_id.to_owned(),
            id_token: id_token.to_owned(),
        }
    }
}

impl fmt::Debug for EnterpriseIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnterpriseIdentity")
            .field("token_endpoint", &self.token_endpoint)
            .field("client_id", &self.client_id)
            .field("id_token", &"***")
            .finish()
    }
}

impl OAuthSettings {
    /// A client registered beforehand (`secret` for a confidential one).
    pub fn with_client(mut self, id: &str, secret: Option<&str>) -> OAuthSettings {
        self.client_id = Some(id.to_owned());
        self.client_secret = secret.map(str::to_owned);
        self
    }

    /// The Client ID Metadata Document URL to use where it is supported.
    pub fn with_client_metadata_url(mut self, url: &str) -> OAuthSettings {
        self.client_metadata_url = Some(url.to_owned());
        self
    }

    /// The client name sent at dynamic registration.
    pub fn with_client_name(mut self, name: &str) -> OAuthSettings {
        self.client_name = Some(name.to_owned());
        self
    }

    /// Scopes to ask for when the server advertises none.
    pub fn with_scope(mut self, scope: &str) -> OAuthSettings {
        self.scope = Some(scope.to_owned());
        self
    }

    /// Use this authorization server metadata instead of discovery.
    pub fn with_auth_server_metadata_url(mut self, url: &str) -> OAuthSettings {
        self.auth_server_metadata_url = Some(url.to_owned());
        self
    }

    /// Sign in as a machine: the `client_credentials` grant.
    pub fn with_client_credentials(mut self) -> OAuthSettings {
        self.client_credentials = true;
        self
    }

    /// Sign in with an enterprise identity (SEP-990) instead of a person.
    pub fn with_enterprise_identity(mut self, identity: EnterpriseIdentity) -> OAuthSettings {
        self.enterprise = Some(identity);
        self
    }

    /// Authenticate to the token endpoint with this key (`private_key_jwt`).
    pub fn with_private_key_pem(mut self, pem: &str) -> OAuthSettings {
        self.private_key_pem = Some(pem.to_owned());
        self
    }
}

impl fmt::Debug for OAuthSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Secrets: whether they are set, never what they are.
        f.debug_struct("OAuthSettings")
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "***"))
            .field("client_metadata_url", &self.client_metadata_url)
            .field("client_name", &self.client_name)
            .field("scope", &self.scope)
            .field("auth_server_metadata_url", &self.auth_server_metadata_url)
            .field("client_credentials", &self.client_credentials)
            .field("private_key_pem", &self.private_key_pem.as_ref().map(|_| "***"))
            .field("callback_port", &self.callback_port)
            .field("callback_url", &self.callback_url)
            .field("enterprise", &self.enterprise)
            .finish()
    }
}

/// The keys an `oauth` object may have.
const KNOWN_KEYS: &[&str] = &[
    "clientId",
    "clientSecret",
    "callbackPort",
    "callbackUrl",
    "scope",
    "clientName",
    "clientRegistration",
    "clientMetadataUrl",
    "authServerMetadataUrl",
    "grant",
    "privateKey",
    "enterprise",
];

/// The keys of `oauth.enterprise`.
const ENTERPRISE_KEYS: &[&str] = &["tokenEndpoint", "clientId", "idToken"];

/// Reads an `oauth` object; the error names the key.
pub(super) fn parse(
    object: &Map<String, Value>,
    expander: &mut Expander,
) -> Result<OAuthSettings, String> {
    only_keys(object, KNOWN_KEYS, "has")?;
    let text = |key: &str| match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(other) => Err(format!("{key} must be a string, not {other}")),
    };
    let mut settings = OAuthSettings {
        client_id: text("clientId")?,
        scope: text("scope")?,
        client_name: text("clientName")?,
        client_metadata_url: text("clientMetadataUrl")?,
        auth_server_metadata_url: text("authServerMetadataUrl")?,
        ..OAuthSettings::default()
    };
    for (key, slot) in [
        ("clientSecret", &mut settings.client_secret),
        ("privateKey", &mut settings.private_key_pem),
    ] {
        if let Some(value) = text(key)? {
            *slot = Some(expander.expand_secret(&value).map_err(|why| format!("{key}: {why}"))?);
        }
    }
    match text("grant")?.as_deref() {
        None | Some("authorization_code") => {}
        Some("client_credentials") => settings.client_credentials = true,
        Some(other) => {
            return Err(format!(
                "grant is {other:?}; use \"authorization_code\" or \"client_credentials\""
            ))
        }
    }
    match text("clientRegistration")?.as_deref() {
        None | Some("dynamic") => {}
        Some("cimd") if settings.client_metadata_url.is_some() => {}
        Some("cimd") => return Err("clientRegistration \"cimd\" needs clientMetadataUrl".into()),
        Some(other) => {
            return Err(format!("clientRegistration is {other:?}; use \"dynamic\" or \"cimd\""))
        }
    }
    if settings.client_credentials && settings.client_id.is_none() {
        return Err("the client_credentials grant needs clientId".into());
    }
    match object.get("enterprise") {
        None | Some(Value::Null) => {}
        Some(Value::Object(enterprise)) => {
            if settings.client_id.is_none() {
                return Err("enterprise sign-in needs clientId (this client at the server's \
                            authorization server)"
                    .into());
            }
            if settings.client_credentials {
                return Err("enterprise sign-in and the client_credentials grant exclude each \
                            other"
                    .into());
            }
            settings.enterprise = Some(parse_enterprise(enterprise, expander)?);
        }
        Some(other) => return Err(format!("enterprise must be an object, not {other}")),
    }
    settings.callback_port = match object.get("callbackPort") {
        None | Some(Value::Null) => None,
        Some(value) => match value.as_u64() {
            Some(port @ 1..=65535) => Some(port as u16),
            _ => return Err(format!("callbackPort must be a port number, not {value}")),
        },
    };
    if let Some(url) = text("callbackUrl")? {
        if !is_loopback_http(&url) {
            return Err(format!(
                "callbackUrl {url:?} must be http:// on localhost, 127.0.0.1 or [::1]"
            ));
        }
        settings.callback_url = Some(url);
    }
    if let Some(url) = &settings.auth_server_metadata_url {
        if !crate::url::is_https_or_loopback_http(url) {
            return Err(format!(
                "authServerMetadataUrl {url:?} must be https (or http on this machine)"
            ));
        }
    }
    Ok(settings)
}

/// An error for the first key of `object` not among `known`, with the
/// nearest known one; `owner` says whose key it is ("has", "enterprise has").
fn only_keys(object: &Map<String, Value>, known: &[&str], owner: &str) -> Result<(), String> {
    match object.keys().find(|key| !known.contains(&key.as_str())) {
        Some(key) => {
            let hint = closest(key, known)
                .map(|close| format!(" (did you mean {close:?}?)"))
                .unwrap_or_default();
            Err(format!("{owner} an unknown key {key:?}{hint}"))
        }
        None => Ok(()),
    }
}

/// `oauth.enterprise`: the identity provider's token endpoint, this
/// client's id there, and the person's ID token (a secret: `${VAR}` or a
/// `!command`, as `clientSecret`).
fn parse_enterprise(
    object: &Map<String, Value>,
    expander: &mut Expander,
) -> Result<EnterpriseIdentity, String> {
    only_keys(object, ENTERPRISE_KEYS, "enterprise has")?;
    let text = |key: &str| match object.get(key) {
        Some(Value::String(text)) if !text.is_empty() => Ok(text.clone()),
        _ => Err(format!("enterprise needs {key} (a string)")),
    };
    let token_endpoint = text("tokenEndpoint")?;
    if !crate::url::is_https_or_loopback_http(&token_endpoint) {
        return Err(format!(
            "enterprise.tokenEndpoint {token_endpoint:?} must be https (or http on this machine)"
        ));
    }
    let id_token = expander
        .expand_secret(&text("idToken")?)
        .map_err(|why| format!("enterprise.idToken: {why}"))?;
    Ok(EnterpriseIdentity::new(&token_endpoint, &text("clientId")?, &id_token))
}

/// `http://` to `localhost`, `127.0.0.1` or `[::1]` (where the sign-in's
/// listener binds), as a browser reads the URL.
fn is_loopback_http(url: &str) -> bool {
    use crate::url::{Host, WebUrl};
    WebUrl::parse(url).is_some_and(|url| {
        url.scheme == "http"
            && match url.host {
                Host::Domain(name) => name == "localhost",
                Host::V4(address) => address == std::net::Ipv4Addr::LOCALHOST,
                Host::V6(address) => address == std::net::Ipv6Addr::LOCALHOST,
            }
    })
}
