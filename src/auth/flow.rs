//! The grants: who the client is (configured, a Client ID Metadata
//! Document, or dynamic registration), the authorization code with PKCE
//! (S256), `state`, RFC 8707 `resource` and RFC 9207 `iss`, the
//! `client_credentials` grant, refresh, and client authentication at the
//! token endpoint (`client_secret_basic`, `client_secret_post`, `none`,
//! `private_key_jwt` signed ES256 with `ring`).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::discovery::{discover, AuthServer, Discovered};
use super::web::{base64_url, query_pairs, with_query, Answer};
use super::{Challenge, OAuth, Working};
use crate::error::Error;

/// The JWT bearer grant (RFC 7523), which takes an identity assertion.
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// A token and what comes with it.
#[derive(Clone)]
pub(super) struct Tokens {
    pub(super) access: String,
    pub(super) refresh: Option<String>,
    pub(super) expires_at: Option<Instant>,
    /// How long the server said the token lasts.
    pub(super) lifetime: Option<Duration>,
}

/// A token this close to its expiry is refreshed before it is sent (a
/// quarter of its life, for short-lived ones).
const REFRESH_AHEAD: Duration = Duration::from_secs(30);

impl Tokens {
    /// True when the token should be refreshed before it is sent.
    pub(super) fn is_expiring(&self) -> bool {
        let ahead = self.lifetime.map_or(REFRESH_AHEAD, |life| (life / 4).min(REFRESH_AHEAD));
        self.expires_at.is_some_and(|at| at.saturating_duration_since(Instant::now()) < ahead)
    }
}

/// Who the client is to the authorization server.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ClientIdentity {
    id: String,
    secret: Option<String>,
    method: ClientAuth,
    /// Registered by tether (dynamic registration): registered again once
    /// when the server no longer knows it.
    registered: bool,
    /// The redirect URI it was registered with: a sign-in whose redirect
    /// listener cannot have it (its port is taken) registers again, since
    /// a server may hold a client to the URI it registered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    redirect_uri: Option<String>,
}

/// How the client authenticates at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ClientAuth {
    SecretBasic,
    SecretPost,
    None,
    PrivateKeyJwt,
}

impl OAuth {
    /// Uses the refresh token.
    pub(super) fn refresh(&self, working: &mut Working) -> Result<(), Error> {
        let refresh = working.tokens.as_ref().and_then(|tokens| tokens.refresh.clone());
        let (Some(refresh), Some(discovered), Some(client)) =
            (refresh, working.discovered.clone(), working.client.clone())
        else {
            return Err(Error::Auth("nothing to refresh with".into()));
        };
        let form = vec![
            ("grant_type", "refresh_token".to_owned()),
            ("refresh_token", refresh.clone()),
            ("resource", discovered.resource.clone()),
        ];
        let answer = match self.token_request(&discovered.server, &client, form) {
            Ok(answer) => answer,
            Err(err) => {
                // A refused refresh token is dead: never sent again.
                if err.to_string().contains("was refused") {
                    if let Some(tokens) = working.tokens.as_mut() {
                        tokens.refresh = None;
                    }
                }
                return Err(err);
            }
        };
        let mut tokens = tokens_from(&answer)?;
        // A server may keep the refresh token the same and not say so again.
        tokens.refresh = tokens.refresh.or(Some(refresh));
        working.tokens = Some(tokens);
        log::info!("refreshed the access token");
        Ok(())
    }

    /// Signs in from scratch: discovery (once), scopes, identity, a grant.
    pub(super) fn sign_in(
        &self,
        working: &mut Working,
        challenge: &Challenge,
    ) -> Result<(), Error> {
        // A person's sign-in needs a handler: without one, say so before
        // asking any server anything.
        let by_machine = self.settings.client_credentials || self.settings.enterprise.is_some();
        let handler = match (&self.handler, by_machine) {
            (_, true) => None,
            (Some(handler), false) => Some(Arc::clone(handler)),
            (None, false) => {
                self.keep_wanted_scopes(working, challenge);
                return Err(Error::LoginRequired { url: self.server_url.clone() });
            }
        };
        let discovered = match working.discovered.clone() {
            Some(discovered) => discovered,
            None => {
                let mut found = discover(
                    &self.web,
                    &self.server_url,
                    challenge.resource_metadata.as_deref(),
                    self.settings.auth_server_metadata_url.as_deref(),
                )?;
                // The host's choice of resource wins; none at all is an
                // empty one, which no request then names (`web.rs`).
                if self.settings.omit_resource {
                    found.resource.clear();
                } else if let Some(resource) = &self.settings.resource {
                    found.resource.clone_from(resource);
                }
                working.discovered = Some(found.clone());
                found
            }
        };
        self.choose_scopes(working, &discovered, challenge);
        let scope = working.scopes.join(" ");
        let Some(handler) = handler else {
            return self.sign_in_as_machine(working, &discovered, scope);
        };
        // The listener may take the port the kept client was registered
        // with, so that the registration still fits.
        if let Some(earlier) = working.client.as_ref().and_then(|c| c.redirect_uri.as_deref()) {
            handler.prefer_redirect_uri(earlier);
        }
        let redirect_uri = handler.redirect_uri();
        let mut registered_again = false;
        loop {
            // A configured client wins over one kept from an earlier run.
            let configured = self.settings.client_id.as_deref();
            let mut kept =
                working.client.clone().filter(|c| configured.is_none_or(|id| c.id == id));
            let moved = kept.as_ref().is_some_and(|client| {
                client.registered
                    && client.redirect_uri.as_ref().is_some_and(|uri| *uri != redirect_uri)
            });
            let mut earlier = None;
            if moved && !registered_again {
                // Registered with another redirect URI (its port was taken
                // this time): a server may refuse this one, and the refusal
                // reaches only the browser. Registered again, once.
                log::info!(
                    "the sign-in listens at {redirect_uri}, not where the client was registered; \
                     registering again"
                );
                registered_again = true;
                earlier = kept.take();
            }
            let client = match kept {
                Some(client) => client,
                None => match (self.identity(&discovered.server, &redirect_uri), earlier) {
                    (Ok(client), _) => {
                        working.client = Some(client.clone());
                        client
                    }
                    // No new registration (none offered, refused): the one
                    // kept may still be taken at this URI.
                    (Err(err), Some(earlier)) => {
                        log::info!("registering again failed ({err}); trying the kept client");
                        earlier
                    }
                    (Err(err), None) => return Err(err),
                },
            };
            match self.authorization_code(&discovered, &client, &scope, &redirect_uri, &*handler) {
                Ok(tokens) => {
                    working.tokens = Some(tokens);
                    return Ok(());
                }
                Err(Error::Auth(message))
                    if message.contains("invalid_client")
                        && client.registered
                        && !registered_again =>
                {
                    // The server forgot the client it registered: once more.
                    log::info!(
                        "the authorization server no longer knows this client; registering again"
                    );
                    registered_again = true;
                    working.client = None;
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// A step-up that needs a person, where there is none: the scopes the
    /// server asked for are kept with the sign-in, so that the next
    /// sign-in (`tether login`) asks for them too.
    fn keep_wanted_scopes(&self, working: &mut Working, challenge: &Challenge) {
        if challenge.is_insufficient_scope() {
            let mut wanted = Vec::new();
            for scope in challenge.scope.iter().flat_map(|s| s.split_whitespace()) {
                if !working.scopes.iter().any(|kept| kept == scope) {
                    working.scopes.push(scope.to_owned());
                    wanted.push(scope);
                }
            }
            if !wanted.is_empty() {
                log::warn!(
                    "{}: the server wants the scope {:?}, which the sign-in lacks; the \
                 next sign-in asks for it",
                    crate::url::redact_url(&self.server_url),
                    wanted.join(" ")
                );
            }
        }
    }

    /// Signs in with no person: the `client_credentials` grant, or the
    /// enterprise identity's assertion (SEP-990).
    fn sign_in_as_machine(
        &self,
        working: &mut Working,
        discovered: &Discovered,
        scope: String,
    ) -> Result<(), Error> {
        let client = self.configured_client(&discovered.server)?.ok_or_else(|| {
            Error::Auth("signing in without a person needs oauth.clientId".into())
        })?;
        let mut form = match &self.settings.enterprise {
            Some(enterprise) => {
                let assertion = self.identity_assertion(enterprise, discovered, &scope)?;
                vec![("grant_type", JWT_BEARER.to_owned()), ("assertion", assertion)]
            }
            None => vec![
                ("grant_type", "client_credentials".to_owned()),
                ("resource", discovered.resource.clone()),
            ],
        };
        if !scope.is_empty() {
            form.push(("scope", scope));
        }
        let answer = self.token_request(&discovered.server, &client, form)?;
        working.tokens = Some(tokens_from(&answer)?);
        working.client = Some(client);
        Ok(())
    }

    /// Exchanges the enterprise ID token at the identity provider for an
    /// identity assertion grant (ID-JAG) for this authorization server.
    fn identity_assertion(
        &self,
        enterprise: &super::EnterpriseIdentity,
        discovered: &Discovered,
        scope: &str,
    ) -> Result<String, Error> {
        let mut form = vec![
            ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"),
            ("requested_token_type", "urn:ietf:params:oauth:token-type:id-jag"),
            ("audience", discovered.server.issuer.as_str()),
            ("resource", discovered.resource.as_str()),
            ("subject_token", enterprise.id_token.as_str()),
            ("subject_token_type", "urn:ietf:params:oauth:token-type:id_token"),
            ("client_id", enterprise.client_id.as_str()),
        ];
        if !scope.is_empty() {
            form.push(("scope", scope));
        }
        let answer = self.web.post_form(&enterprise.token_endpoint, &form, None)?;
        if !answer.is_success() {
            return Err(refusal("identity provider's token exchange", &answer));
        }
        answer.field("access_token").map(str::to_owned).ok_or_else(|| {
            Error::Auth("the identity provider's token exchange gave no assertion".into())
        })
    }

    /// The challenge's scope, else the resource's `scopes_supported`, else
    /// the configured scope; a step-up adds to what was asked before.
    /// `offline_access` only where the authorization server lists it.
    fn choose_scopes(&self, working: &mut Working, discovered: &Discovered, challenge: &Challenge) {
        let words = |text: &str| text.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        let mut scopes = if let Some(scope) = &challenge.scope {
            words(scope)
        } else if !discovered.scopes_supported.is_empty() {
            discovered.scopes_supported.clone()
        } else {
            self.settings.scope.as_deref().map(words).unwrap_or_default()
        };
        // Scopes granted before are kept: a step-up adds to them.
        for scope in std::mem::take(&mut working.scopes) {
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        let offline = "offline_access".to_owned();
        if !scopes.is_empty()
            && discovered.server.scopes_supported.contains(&offline)
            && !scopes.contains(&offline)
        {
            scopes.push(offline);
        }
        working.scopes = scopes;
    }

    /// The configured client, if there is one.
    fn configured_client(&self, server: &AuthServer) -> Result<Option<ClientIdentity>, Error> {
        let Some(id) = &self.settings.client_id else { return Ok(None) };
        let method = if self.settings.private_key_pem.is_some() {
            ClientAuth::PrivateKeyJwt
        } else if self.settings.client_secret.is_some() {
            secret_method(server)
        } else {
            ClientAuth::None
        };
        Ok(Some(ClientIdentity {
            id: id.clone(),
            secret: self.settings.client_secret.clone(),
            method,
            registered: false,
            redirect_uri: None,
        }))
    }

    /// Who the client is: configured, else a metadata document URL where
    /// supported, else dynamically registered.
    fn identity(&self, server: &AuthServer, redirect_uri: &str) -> Result<ClientIdentity, Error> {
        if let Some(client) = self.configured_client(server)? {
            return Ok(client);
        }
        if let (Some(url), true) =
            (&self.settings.client_metadata_url, server.client_id_metadata_documents)
        {
            return Ok(ClientIdentity {
                id: url.clone(),
                secret: None,
                method: ClientAuth::None,
                registered: false,
                redirect_uri: None,
            });
        }
        let Some(endpoint) = &server.registration_endpoint else {
            return Err(Error::Auth(
                "the authorization server offers no registration; set oauth.clientId".into(),
            ));
        };
        let wanted = if server.token_auth_methods.is_empty()
            || server.token_auth_methods.iter().any(|m| m == "none")
        {
            "none"
        } else if server.token_auth_methods.iter().any(|m| m == "client_secret_basic") {
            "client_secret_basic"
        } else {
            "client_secret_post"
        };
        let request = json!({
            "client_name": self.settings.client_name.as_deref().unwrap_or("tether"),
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": wanted,
            // 2026-07-28 requires it: a client on the user's machine with a
            // loopback redirect is a native application (OpenID DCR).
            "application_type": "native",
        });
        let answer = self.web.post_json(endpoint, &request)?;
        if !answer.is_success() {
            return Err(refusal("registration", &answer));
        }
        let id = answer
            .field("client_id")
            .ok_or_else(|| Error::Auth("the registration answer has no client_id".into()))?;
        let secret = answer.field("client_secret").map(str::to_owned);
        let method = match (answer.field("token_endpoint_auth_method"), &secret) {
            (Some("client_secret_post"), Some(_)) => ClientAuth::SecretPost,
            (Some("client_secret_basic"), Some(_)) => ClientAuth::SecretBasic,
            (Some("none"), _) | (None, None) => ClientAuth::None,
            (_, Some(_)) => ClientAuth::SecretBasic,
            (_, None) => ClientAuth::None,
        };
        log::info!("registered with the authorization server as client {id}");
        Ok(ClientIdentity {
            id: id.to_owned(),
            secret,
            method,
            registered: true,
            redirect_uri: Some(redirect_uri.to_owned()),
        })
    }

    /// The authorization request through the handler, then the code for tokens.
    fn authorization_code(
        &self,
        discovered: &Discovered,
        client: &ClientIdentity,
        scope: &str,
        redirect_uri: &str,
        handler: &dyn super::AuthorizationHandler,
    ) -> Result<Tokens, Error> {
        let server = &discovered.server;
        let verifier = random_text(32)?;
        let challenge =
            base64_url(ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes()).as_ref());
        let state = random_text(16)?;
        let mut query = vec![
            ("response_type", "code"),
            ("client_id", client.id.as_str()),
            ("redirect_uri", redirect_uri),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
            ("state", state.as_str()),
            ("resource", discovered.resource.as_str()),
        ];
        if !scope.is_empty() {
            query.push(("scope", scope));
        }
        let url = with_query(&server.authorization_endpoint, &query);
        let redirected = handler.authorize(&url)?;
        let answer = query_pairs(&redirected);
        let param = |name: &str| {
            answer.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
        };
        // The state first: an answer that is not to this request (an error
        // included) is not believed.
        if param("state") != Some(state.as_str()) {
            return Err(Error::Auth("the authorization answer's state does not match".into()));
        }
        // Then the issuer (RFC 9207), before anything the answer says is
        // acted on or shown, its error included: another server's words
        // are not this one's.
        match param("iss") {
            Some(iss) if iss != server.issuer => {
                return Err(Error::Auth(format!(
                    "the authorization answer comes from issuer {iss}, not {}",
                    server.issuer
                )))
            }
            None if server.iss_parameter => {
                return Err(Error::Auth("the authorization answer lacks its iss".into()))
            }
            _ => {}
        }
        if let Some(error) = param("error") {
            let detail = param("error_description").map(|d| format!(" ({d})")).unwrap_or_default();
            return Err(Error::Auth(format!("the authorization was refused: {error}{detail}")));
        }
        let code = param("code")
            .ok_or_else(|| Error::Auth("the authorization answer has no code".into()))?;
        let form = vec![
            ("grant_type", "authorization_code".to_owned()),
            ("code", code.to_owned()),
            ("redirect_uri", redirect_uri.to_owned()),
            ("code_verifier", verifier),
            ("resource", discovered.resource.clone()),
        ];
        let answer = self.token_request(server, client, form)?;
        tokens_from(&answer)
    }

    /// A token request, with the client's authentication.
    fn token_request(
        &self,
        server: &AuthServer,
        client: &ClientIdentity,
        mut form: Vec<(&str, String)>,
    ) -> Result<Answer, Error> {
        let mut basic = None;
        match client.method {
            ClientAuth::SecretBasic => {
                basic = Some((client.id.as_str(), client.secret.as_deref().unwrap_or("")));
            }
            ClientAuth::SecretPost => {
                form.push(("client_id", client.id.clone()));
                form.push(("client_secret", client.secret.clone().unwrap_or_default()));
            }
            ClientAuth::None => form.push(("client_id", client.id.clone())),
            ClientAuth::PrivateKeyJwt => {
                let pem = self.settings.private_key_pem.as_deref().unwrap_or("");
                form.push(("client_id", client.id.clone()));
                form.push((
                    "client_assertion_type",
                    "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".to_owned(),
                ));
                form.push(("client_assertion", client_assertion(pem, &client.id, &server.issuer)?));
            }
        }
        let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let answer = self.web.post_form(&server.token_endpoint, &pairs, basic)?;
        if !answer.is_success() {
            return Err(refusal("token request", &answer));
        }
        Ok(answer)
    }
}

/// `client_secret_basic` unless the server lists only `client_secret_post`.
fn secret_method(server: &AuthServer) -> ClientAuth {
    let methods = &server.token_auth_methods;
    if !methods.is_empty()
        && !methods.iter().any(|m| m == "client_secret_basic")
        && methods.iter().any(|m| m == "client_secret_post")
    {
        ClientAuth::SecretPost
    } else {
        ClientAuth::SecretBasic
    }
}

fn tokens_from(answer: &Answer) -> Result<Tokens, Error> {
    let access = answer
        .field("access_token")
        .ok_or_else(|| Error::Auth("the token answer has no access_token".into()))?;
    let lifetime = answer
        .body
        .get("expires_in")
        .and_then(Value::as_u64)
        .map(|seconds| Duration::from_secs(seconds.min(10 * 365 * 86_400)));
    Ok(Tokens {
        access: access.to_owned(),
        refresh: answer.field("refresh_token").map(str::to_owned),
        expires_at: lifetime.map(|lifetime| Instant::now() + lifetime),
        lifetime,
    })
}

/// An authorization server's refusal, with its OAuth error code (never a
/// token or secret: the error fields only).
fn refusal(what: &str, answer: &Answer) -> Error {
    let error = answer.field("error").unwrap_or("no error code");
    let detail = answer.field("error_description").map(|d| format!(" ({d})")).unwrap_or_default();
    Error::Auth(format!("the {what} was refused with HTTP {}: {error}{detail}", answer.status))
}

/// `bytes` random bytes as base64url text.
fn random_text(bytes: usize) -> Result<String, Error> {
    let mut buffer = vec![0u8; bytes];
    SystemRandom::new()
        .fill(&mut buffer)
        .map_err(|_| Error::Auth("the system has no randomness to offer".into()))?;
    Ok(base64_url(&buffer))
}

/// An ES256 client assertion (RFC 7523) for the token endpoint.
fn client_assertion(pem: &str, client_id: &str, audience: &str) -> Result<String, Error> {
    use base64::Engine;
    let body: String = pem.lines().filter(|line| !line.starts_with("-----")).collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(body.trim())
        .map_err(|_| Error::Auth("the private key is not PEM".into()))?;
    let rng = SystemRandom::new();
    let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der, &rng)
        .map_err(|_| Error::Auth("the private key is not a PKCS#8 P-256 key".into()))?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs());
    let header = base64_url(json!({"alg": "ES256", "typ": "JWT"}).to_string().as_bytes());
    let claims = json!({
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": now,
        "exp": now + 300,
        "jti": random_text(16)?,
    });
    let signing_input = format!("{header}.{}", base64_url(claims.to_string().as_bytes()));
    let signature = key
        .sign(&rng, signing_input.as_bytes())
        .map_err(|_| Error::Auth("signing the client assertion failed".into()))?;
    Ok(format!("{signing_input}.{}", base64_url(signature.as_ref())))
}
