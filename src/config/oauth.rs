//! An entry's `oauth` object (SPEC §7), checked key by key like the rest
//! of the entry: unknown keys are refused with the closest known one,
//! secrets may come from `${VAR}` or `!command`, URLs are checked.

use serde_json::{Map, Value};

use super::expand::Expander;
use crate::auth::OAuthSettings;
use crate::spelling::closest;

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
];

/// Reads an `oauth` object; the error names the key.
pub(super) fn parse(
    object: &Map<String, Value>,
    expander: &mut Expander,
) -> Result<OAuthSettings, String> {
    for key in object.keys() {
        if !KNOWN_KEYS.contains(&key.as_str()) {
            let hint = closest(key, KNOWN_KEYS)
                .map(|known| format!(" (did you mean {known:?}?)"))
                .unwrap_or_default();
            return Err(format!("has an unknown key {key:?}{hint}"));
        }
    }
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
        if !(url.starts_with("https://") || is_loopback_http(url)) {
            return Err(format!(
                "authServerMetadataUrl {url:?} must be https (or http on this machine)"
            ));
        }
    }
    Ok(settings)
}

/// `http://` to `localhost`, `127.0.0.1` or `[::1]`.
fn is_loopback_http(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("http://") else { return false };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = if authority.starts_with('[') {
        authority.split(']').next().map(|h| format!("{h}]")).unwrap_or_default()
    } else {
        authority.split(':').next().unwrap_or("").to_owned()
    };
    matches!(host.as_str(), "localhost" | "127.0.0.1" | "[::1]")
}
