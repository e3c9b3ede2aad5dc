//! OAuth sign-in against the `oauth-server` fixture (an MCP server with its
//! own authorization server): each branch of the flow, the token store
//! across runs, `tether login`/`logout` end to end with a fake browser, and
//! that no token or secret reaches any output.

use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use serde_json::{json, Value};
use tether::{
    AuthorizationHandler, CallOptions, Client, ClientOptions, Error, HttpKind, HttpTarget,
    OAuthSettings, Transport,
};

use crate::support::{
    config_dir, fixture, run_command, run_tether, start_url_fixture, stderr_of, stdout_of,
    tether_bin, Tag, TempDir,
};

const WITHIN: Duration = Duration::from_secs(20);

/// A running `oauth-server`; killed on drop.
struct AuthFixture {
    child: Child,
    url: String,
}

impl AuthFixture {
    fn start(tag: &Tag, flags: &[&str]) -> AuthFixture {
        let (child, url) = start_url_fixture("oauth-server", tag, flags);
        AuthFixture { child, url }
    }

    fn base(&self) -> &str {
        self.url.trim_end_matches("/mcp")
    }

    /// Every request the fixture received.
    fn log(&self) -> Vec<Value> {
        let mut response = ureq::get(&format!("{}/log", self.base())).call().unwrap();
        serde_json::from_str(&response.body_mut().read_to_string().unwrap()).unwrap()
    }

    fn requests_to(&self, path: &str) -> Vec<Value> {
        self.log().into_iter().filter(|entry| entry["path"] == path).collect()
    }

    fn target(&self, oauth: OAuthSettings) -> HttpTarget {
        HttpTarget::new(&self.url, HttpKind::Streamable)
            .with_oauth(oauth)
            .with_authorization_handler(Arc::new(FollowRedirect))
    }
}

impl Drop for AuthFixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Stands in for a person: asks the authorization server, reads its redirect.
struct FollowRedirect;

impl AuthorizationHandler for FollowRedirect {
    fn redirect_uri(&self) -> String {
        "http://127.0.0.1:9/callback".into()
    }

    fn authorize(&self, url: &str) -> Result<String, Error> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .max_redirects(0)
            .http_status_as_error(false)
            .build()
            .into();
        let response = agent.get(url).call().map_err(|err| Error::Auth(err.to_string()))?;
        response
            .headers()
            .get("location")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
            .ok_or_else(|| Error::Auth(format!("no redirect: {}", response.status())))
    }
}

fn connect(target: HttpTarget) -> Result<Client, Error> {
    let options = ClientOptions::default().with_request_timeout(Duration::from_secs(10));
    Client::connect("web", &Transport::Http(target), options)
}

fn whoami(client: &Client) -> String {
    client.call_tool("whoami", json!({}), &CallOptions::default()).unwrap().to_text()
}

#[test]
fn signs_in_with_registration_pkce_and_the_resource_then_calls() {
    let tag = Tag::new();
    let server = AuthFixture::start(&tag, &[]);
    let client = connect(server.target(OAuthSettings::default())).unwrap();
    let me = whoami(&client);
    assert!(me.starts_with("client-") && me.contains("mcp"), "{me}");
    let authorize = &server.requests_to("/authorize")[0]["params"];
    assert_eq!(authorize["code_challenge_method"], "S256");
    assert_eq!(authorize["resource"], server.url.as_str());
    assert_eq!(
        authorize["scope"], "mcp offline_access",
        "the challenge's scope, and offline_access the server lists"
    );
    assert!(authorize["state"].as_str().is_some_and(|state| state.len() >= 16));
    let token = &server.requests_to("/token")[0]["params"];
    assert_eq!(token["resource"], server.url.as_str(), "the same resource in both requests");
    assert!(token["code_verifier"].is_string());
    let register = server.requests_to("/register");
    assert_eq!(register.len(), 1);
    assert_eq!(register[0]["registration"]["application_type"], "native", "{register:?}");
    // After the sign-in every MCP request carries the token.
    let mcp = server.requests_to("/mcp");
    assert!(mcp.iter().skip(1).all(|entry| entry["authorization"] == "Bearer"), "{mcp:?}");
    client.close().unwrap();
}

#[test]
fn a_resource_mismatch_stops_before_any_authorization_request() {
    let tag = Tag::new();
    let server = AuthFixture::start(&tag, &["--resource", "https://evil.example.com/mcp"]);
    let err = connect(server.target(OAuthSettings::default())).err().unwrap();
    assert!(
        matches!(err.root(), Error::Auth(message) if message.contains("names the resource")),
        "{err}"
    );
    assert!(
        server.requests_to("/authorize").is_empty() && server.requests_to("/register").is_empty()
    );
}

// Issue 25 (item 11): RFC 9207's order. An error in an answer from another
// issuer is not shown as this server's refusal; from the right one it is.
#[test]
fn the_issuer_is_checked_before_an_authorization_error_is_believed() {
    let tag = Tag::new();
    let server = AuthFixture::start(&tag, &["--deny", "--bad-iss"]);
    let err = connect(server.target(OAuthSettings::default())).err().unwrap().to_string();
    assert!(err.contains("issuer") && !err.contains("access_denied"), "{err}");
    let server = AuthFixture::start(&tag, &["--deny"]);
    let err = connect(server.target(OAuthSettings::default())).err().unwrap().to_string();
    assert!(err.contains("refused: access_denied (the person said no)"), "{err}");
}

#[test]
fn an_issuer_mismatch_and_a_server_without_s256_are_refused() {
    let tag = Tag::new();
    let server = AuthFixture::start(&tag, &["--bad-iss"]);
    let err = connect(server.target(OAuthSettings::default())).err().unwrap();
    assert!(err.to_string().contains("issuer"), "{err}");
    assert!(server.requests_to("/token").is_empty(), "no code was exchanged");
    // The client registered for the failed sign-in is kept: the next try
    // does not register another (a cold trial saw client-5, client-6, …).
    let store = TempDir::new();
    let kept =
        || server.target(OAuthSettings::default()).with_token_store(&store.path().join("a.json"));
    for _ in 0..2 {
        assert!(connect(kept()).is_err());
    }
    assert_eq!(server.requests_to("/register").len(), 2, "one for the first try, one kept after");
    let server = AuthFixture::start(&tag, &["--claim-issuer", "https://accounts.example.com"]);
    let err = connect(server.target(OAuthSettings::default())).err().unwrap();
    assert!(err.to_string().contains("names the issuer"), "{err}");
    assert!(
        server.requests_to("/authorize").is_empty(),
        "metadata claiming another issuer is refused"
    );
    let server = AuthFixture::start(&tag, &["--no-s256"]);
    let err = connect(server.target(OAuthSettings::default())).err().unwrap();
    assert!(err.to_string().contains("S256"), "{err}");
    assert!(server.requests_to("/authorize").is_empty());
}

#[test]
fn a_client_the_server_forgot_is_registered_again_once() {
    let tag = Tag::new();
    let server = AuthFixture::start(&tag, &["--forget-clients"]);
    let client = connect(server.target(OAuthSettings::default())).unwrap();
    assert!(whoami(&client).starts_with("client-"));
    assert_eq!(server.requests_to("/register").len(), 2);
    client.close().unwrap();
}

#[test]
fn step_up_asks_again_with_the_union_of_scopes() {
    let tag = Tag::new();
    let server = AuthFixture::start(&tag, &["--step-up", "write"]);
    let client = connect(server.target(OAuthSettings::default())).unwrap();
    let me = whoami(&client);
    assert!(me.contains("mcp") && me.contains("write"), "{me}");
    let authorizations = server.requests_to("/authorize");
    assert_eq!(authorizations.len(), 2);
    let scope = authorizations[1]["params"]["scope"].as_str().unwrap().to_owned();
    assert!(scope.contains("mcp") && scope.contains("write"), "{scope}");
    client.close().unwrap();
}

#[test]
fn a_registered_client_authenticates_with_basic_and_client_credentials_need_no_person() {
    let tag = Tag::new();
    let server = AuthFixture::start(&tag, &["--client", "app:s3cret"]);
    let client =
        connect(server.target(OAuthSettings::default().with_client("app", Some("s3cret"))))
            .unwrap();
    assert!(whoami(&client).starts_with("app "));
    assert_eq!(server.requests_to("/token")[0]["authorization"], "Basic");
    assert!(server.requests_to("/register").is_empty());
    client.close().unwrap();

    let server = AuthFixture::start(&tag, &["--client", "machine:s3cret"]);
    let settings =
        OAuthSettings::default().with_client("machine", Some("s3cret")).with_client_credentials();
    // No authorization handler at all: nobody is asked.
    let target = HttpTarget::new(&server.url, HttpKind::Streamable).with_oauth(settings);
    let client = connect(target).unwrap();
    assert!(whoami(&client).starts_with("machine "));
    assert!(server.requests_to("/authorize").is_empty());
    assert_eq!(server.requests_to("/token")[0]["params"]["grant_type"], "client_credentials");
    client.close().unwrap();
}

#[test]
fn a_kept_sign_in_is_refreshed_without_a_person() {
    let tag = Tag::new();
    let server = AuthFixture::start(&tag, &["--token-ttl", "1"]);
    let dir = TempDir::new();
    let store = dir.path().join("mcp-auth.json");
    let client = connect(server.target(OAuthSettings::default()).with_token_store(&store)).unwrap();
    whoami(&client);
    client.close().unwrap();
    let mode = std::fs::metadata(&store).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    thread::sleep(Duration::from_millis(1500));
    // A later run, with nobody to sign in: the refresh token does it.
    let target = HttpTarget::new(&server.url, HttpKind::Streamable).with_token_store(&store);
    let client = connect(target).unwrap();
    assert!(whoami(&client).starts_with("client-"));
    client.close().unwrap();
    assert_eq!(server.requests_to("/authorize").len(), 1, "one sign-in in all");
    let grants: Vec<Value> = server
        .requests_to("/token")
        .into_iter()
        .map(|entry| entry["params"]["grant_type"].clone())
        .collect();
    assert!(grants.contains(&json!("refresh_token")), "{grants:?}");
    // A changed URL never reuses what was kept.
    let moved = format!("{}?moved=1", server.url);
    let target = HttpTarget::new(&moved, HttpKind::Streamable).with_token_store(&store);
    assert!(matches!(connect(target).err().unwrap().root(), Error::LoginRequired { .. }));
}

/// `tether ARGS` on the configuration in `dir`, with `fake-browser` (its
/// visits logged in `dir/browser.log`) as the browser; `trace`: RUST_LOG.
fn with_browser(dir: &std::path::Path, args: &[&str], trace: bool) -> std::process::Output {
    let visits = dir.join("browser.log");
    let mut command = Command::new(crate::support::tether_bin());
    command
        .arg("--config-dir")
        .arg(dir)
        .args(args)
        .env("BROWSER", format!("{} --log {}", fixture("fake-browser").display(), visits.display()))
        .env_remove("RUST_LOG");
    if trace {
        command.env("RUST_LOG", "trace");
    }
    run_command(command, None, WITHIN).0
}

#[test]
fn tether_login_signs_in_with_the_browser_and_logout_forgets() {
    let tag = Tag::new();
    let server = AuthFixture::start(&tag, &["--token-ttl", "2"]);
    let dir = config_dir(json!({"web": {"url": server.url,
        "oauth": {"clientName": "tether tests", "clientSecret": "planted-client-secret-7f3a"}}}));
    let tether = |args: &[&str], trace: bool| with_browser(dir.path(), args, trace);
    // Without a sign-in, a script sees "needs login" and is told what to do.
    let listed = tether(&["list"], false);
    assert_eq!(listed.status.code(), Some(1));
    let out = stdout_of(&listed);
    assert!(out.contains("needs login") && out.contains("tether login web"), "{out}");

    let login = tether(&["login", "web"], true);
    assert_eq!(login.status.code(), Some(0), "{}", stderr_of(&login));
    assert!(stderr_of(&login).contains("/authorize?"), "the URL is printed");
    // Said while it waits, and how long it may (a cold trial saw silence).
    assert!(stderr_of(&login).contains("Waiting for the sign-in to finish (at most 5 minutes"));
    let store = dir.path().join("mcp-auth.json");
    assert_eq!(std::fs::metadata(&store).unwrap().permissions().mode() & 0o777, 0o600);
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(&store).unwrap()).unwrap();
    let access = kept["servers"]["web"]["accessToken"].as_str().unwrap().to_owned();
    let refresh = kept["servers"]["web"]["refreshToken"].as_str().unwrap().to_owned();

    // The token has expired by the next call: it is refreshed, no prompt.
    thread::sleep(Duration::from_millis(2500));
    let call = tether(&["-vvv", "call", "web", "whoami"], true);
    assert_eq!(call.status.code(), Some(0), "{}", stderr_of(&call));
    assert!(stdout_of(&call).starts_with("client-"));
    let grants: Vec<Value> = server
        .requests_to("/token")
        .into_iter()
        .map(|entry| entry["params"]["grant_type"].clone())
        .collect();
    assert_eq!(grants, [json!("authorization_code"), json!("refresh_token")]);
    assert_eq!(server.requests_to("/authorize").len(), 1);
    for output in [&login, &call, &listed] {
        let everything = format!("{}{}", stdout_of(output), stderr_of(output));
        for secret in [access.as_str(), refresh.as_str(), "planted-client-secret-7f3a"] {
            assert!(!everything.contains(secret), "a secret reached the output: {everything}");
        }
    }

    let logout = tether(&["logout", "web"], false);
    assert_eq!(logout.status.code(), Some(0));
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(&store).unwrap()).unwrap();
    assert!(kept["servers"].get("web").is_none(), "{kept}");
    assert_eq!(tether(&["call", "web", "whoami"], false).status.code(), Some(3));
    // Signed out already: said, and fine. A name nothing knows: a typo.
    let again = tether(&["logout", "web"], false);
    assert_eq!(again.status.code(), Some(0));
    assert!(stdout_of(&again).contains("Nothing was kept"), "{}", stdout_of(&again));
    let typo = tether(&["logout", "wbe"], false);
    assert_eq!(typo.status.code(), Some(2), "{}", stderr_of(&typo));
    assert!(stderr_of(&typo).contains("did you mean \"web\"?"), "{}", stderr_of(&typo));
    drop(server);
    tag.assert_gone();
}

#[test]
fn tether_login_refuses_a_busy_callback_port_rather_than_switching() {
    let tag = Tag::new();
    let server = AuthFixture::start(&tag, &[]);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let dir = config_dir(json!({"web": {"url": server.url, "oauth": {"callbackPort": port}}}));
    let mut command = Command::new(crate::support::tether_bin());
    command.arg("--config-dir").arg(dir.path()).args(["login", "web"]).env_remove("RUST_LOG");
    let (output, _) = run_command(command, None, WITHIN);
    assert_eq!(output.status.code(), Some(2), "{}", stderr_of(&output));
    assert!(stderr_of(&output).contains(&format!("127.0.0.1:{port}")), "{}", stderr_of(&output));
    assert!(server.requests_to("/authorize").is_empty());
}

// A cold trial: in a script, a server that wants more scope for a call
// (403 insufficient_scope) left `tether call` failing with no hint, and
// `tether login` asked for the same scopes as before, so it failed again.
// The scopes asked for are now kept, and the next `tether login` asks them.
#[test]
fn a_step_up_in_a_script_is_left_to_tether_login_which_asks_for_the_scope() {
    let tag = Tag::new();
    let server = AuthFixture::start(&tag, &["--step-up", "admin"]);
    let dir = config_dir(json!({"web": {"url": server.url}}));
    let tether = |args: &[&str]| with_browser(dir.path(), args, false);
    assert_eq!(tether(&["login", "web"]).status.code(), Some(0));
    let call = tether(&["call", "web", "whoami"]);
    assert_eq!(call.status.code(), Some(3));
    assert!(
        stderr_of(&call).contains("hint: sign in with: tether login web"),
        "{}",
        stderr_of(&call)
    );
    // Which scope, too (a regression trial: the user had just signed in).
    assert!(stderr_of(&call).contains("wants the scope \"admin\""), "{}", stderr_of(&call));
    assert_eq!(tether(&["login", "web"]).status.code(), Some(0));
    let call = tether(&["call", "web", "whoami"]);
    assert_eq!(call.status.code(), Some(0), "{}", stderr_of(&call));
    assert!(stdout_of(&call).contains("admin"), "{}", stdout_of(&call));
    let scopes: Vec<String> = server
        .requests_to("/authorize")
        .iter()
        .map(|entry| entry["params"]["scope"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(scopes.len(), 2, "{scopes:?}");
    assert!(!scopes[0].contains("admin") && scopes[1].contains("admin"), "{scopes:?}");
    drop(server);
    tag.assert_gone();
}

// A cold trial: the sign-in a command starts by itself on a terminal said
// "To sign in to \"the server\"". It names the server whose URL it is.
#[test]
fn a_sign_in_on_a_terminal_names_the_server() {
    let tag = Tag::new();
    let server = AuthFixture::start(&tag, &[]);
    let dir = config_dir(json!({"web": {"url": server.url}}));
    let line = format!(
        "'{}' --config-dir '{}' call web whoami",
        crate::support::tether_bin(),
        dir.path().display()
    );
    let mut command = Command::new("script");
    command
        .args(["-qec", &line, "/dev/null"])
        .env("BROWSER", fixture("fake-browser"))
        .env_remove("RUST_LOG");
    let (output, _) = run_command(command, None, WITHIN);
    let screen = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(screen.contains("To sign in to \"web\", open this URL"), "{screen:?}");
    assert!(screen.contains("client-"), "the call went on after the sign-in: {screen:?}");
    drop(server);
    tag.assert_gone();
}

// Issue 27 (item 4): five processes started together on an expired token
// and a rotating refresh token make one refresh request between them; the
// others wait on the store's lock and take the token the first one got.
// Before: five refresh requests, four refused ("needs a sign-in").
#[test]
fn five_processes_on_one_expired_token_refresh_it_once() {
    let tag = Tag::new();
    let server = AuthFixture::start(&tag, &["--token-ttl", "2"]);
    let dir = config_dir(json!({"web": {"url": server.url}}));
    let store = dir.path().join("mcp-auth.json");
    let client = connect(server.target(OAuthSettings::default()).with_token_store(&store)).unwrap();
    whoami(&client);
    client.close().unwrap();
    thread::sleep(Duration::from_millis(2500));
    let calls: Vec<_> = (0..5)
        .map(|_| {
            let mut command = Command::new(crate::support::tether_bin());
            command
                .arg("--config-dir")
                .arg(dir.path())
                .args(["call", "web", "whoami"])
                .env("BROWSER", "false")
                .env_remove("RUST_LOG");
            thread::spawn(move || run_command(command, None, WITHIN).0)
        })
        .collect();
    for call in calls {
        let output = call.join().unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
        assert!(stdout_of(&output).starts_with("client-"), "{}", stdout_of(&output));
    }
    assert_one_refresh_per_token(&server);
    assert_eq!(server.requests_to("/authorize").len(), 1, "no second sign-in");
    drop(server);
    tag.assert_gone();
}

/// No refresh token was spent twice (the rotating chain never broke), and
/// at least one refresh was made. Started together, the processes make one
/// request; on a loaded machine a late one may find the refreshed token
/// near its own 2 s expiry and rightly refresh again, with the new token.
fn assert_one_refresh_per_token(server: &AuthFixture) {
    let spent: Vec<String> = server
        .requests_to("/token")
        .into_iter()
        .filter(|entry| entry["params"]["grant_type"] == "refresh_token")
        .map(|entry| entry["params"]["refresh_token"].as_str().unwrap_or("?").to_owned())
        .collect();
    assert!(!spent.is_empty(), "no refresh at all");
    let mut distinct = spent.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), spent.len(), "a refresh token was spent twice: {spent:?}");
    eprintln!("{} refresh request(s)", spent.len());
}

// Issue 27 (item 7): another local process that connects to the redirect
// listener first and sends a byte a second delays the sign-in by nothing:
// connections are read at once, each within its own deadline. Before: a
// 0.5 s sign-in took 42.5 s.
#[test]
fn a_slow_drip_connection_does_not_delay_the_sign_in() {
    let tag = Tag::new();
    let server = AuthFixture::start(&tag, &[]);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dir = config_dir(json!({"web": {"url": server.url, "oauth": {"callbackPort": port}}}));
    let dripping = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let drip = {
        let dripping = std::sync::Arc::clone(&dripping);
        thread::spawn(move || {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            let mut stream = loop {
                match std::net::TcpStream::connect(("127.0.0.1", port)) {
                    Ok(stream) => break stream,
                    Err(_) if std::time::Instant::now() < deadline => {
                        thread::sleep(Duration::from_millis(1))
                    }
                    Err(err) => panic!("never connected: {err}"),
                }
            };
            for byte in b"GET /callback?code=x HTTP/1.1\r\n".iter().cycle() {
                if !dripping.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                if std::io::Write::write_all(&mut stream, &[*byte]).is_err() {
                    break;
                }
                thread::sleep(Duration::from_millis(200));
            }
        })
    };
    let started = std::time::Instant::now();
    let login = with_browser(dir.path(), &["login", "web"], false);
    let took = started.elapsed();
    dripping.store(false, std::sync::atomic::Ordering::Relaxed);
    drip.join().unwrap();
    assert_eq!(login.status.code(), Some(0), "{}", stderr_of(&login));
    assert!(took < Duration::from_secs(4), "the sign-in took {took:?}");
    eprintln!("signed in in {took:?} beside a slow-drip connection");
    drop(server);
    tag.assert_gone();
}

// Issue 27 (item 6): an authorization endpoint that looks like loopback
// http to a naive reading but is host `A` to a browser is refused before
// anything opens it. Before: `http://A\@127.0.0.1/` passed the check.
#[test]
fn a_sign_in_url_is_judged_as_a_browser_reads_it() {
    let tag = Tag::new();
    let server = AuthFixture::start(&tag, &["--authorize-endpoint", "http://A\\@127.0.0.1/"]);
    let dir = config_dir(json!({"web": {"url": server.url}}));
    let login = with_browser(dir.path(), &["login", "web"], false);
    assert_eq!(login.status.code(), Some(3), "{}", stderr_of(&login));
    assert!(
        stderr_of(&login)
            .contains("http://a/@127.0.0.1/ is neither https nor http on this machine"),
        "{}",
        stderr_of(&login)
    );
    assert!(!dir.path().join("browser.log").exists(), "nothing was opened");
    drop(server);
    tag.assert_gone();
}

// Issue 24: `tether proxy URL` in front of the oauth-server fixture. The
// client's initialize is answered at once; the sign-in runs in the
// background with the browser; the tools are announced once it is done; a
// second proxy uses the kept sign-in; `--check` says how it went.
#[cfg(feature = "serve")]
#[test]
fn tether_proxy_signs_in_in_the_background_and_serves_the_remote_server() {
    let tag = Tag::new();
    let server = AuthFixture::start(&tag, &[]);
    let dir = TempDir::new();
    let visits = dir.path().join("browser.log");
    let browser = format!("{} --log {}", fixture("fake-browser").display(), visits.display());
    let config = dir.path().to_owned();
    let env = [("BROWSER", browser.as_str())];
    let mut front = crate::serve::Front::spawn(&config, &["proxy", &server.url], &env);
    let began = std::time::Instant::now();
    let answer = front.initialize(json!({}));
    let took = began.elapsed();
    assert_eq!(answer["result"]["serverInfo"]["name"], "tether");
    assert!(took < Duration::from_secs(2), "initialize took {took:?}");
    eprintln!("initialize answered {took:?} after it was sent, before the sign-in");
    front.tools_with("whoami");
    let called = front.request(2, "tools/call", json!({"name": "whoami", "arguments": {}}));
    let text = called["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    assert!(text.starts_with("client-"), "{called}");
    assert_eq!(front.close().0, Some(0));
    assert_eq!(server.requests_to("/authorize").len(), 1);
    assert!(config.join("mcp-auth.json").exists());

    // The kept sign-in: no browser this time.
    let check = Command::new(crate::support::tether_bin())
        .arg("--config-dir")
        .arg(&config)
        .args(["proxy", &server.url, "--check"])
        .env("BROWSER", "false")
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(0), "{}", stderr_of(&check));
    assert!(stdout_of(&check).contains("whoami"), "{}", stdout_of(&check));
    assert_eq!(server.requests_to("/authorize").len(), 1, "no second sign-in");
    drop(server);
    tag.assert_gone();
}

// A cold trial: a sign-in that failed behind `tether proxy` (a wrong client
// secret) left the client in front with "unknown tool" for every call, and
// stderr with nothing once it closed. The call now fails with the server's
// failure, named, and stderr says it.
#[cfg(feature = "serve")]
#[test]
fn a_failed_sign_in_behind_tether_proxy_is_the_calls_answer() {
    let tag = Tag::new();
    let server = AuthFixture::start(&tag, &["--client", "cid:sec"]);
    let dir = TempDir::new();
    let visits = dir.path().join("browser.log");
    let browser = format!("{} --log {}", fixture("fake-browser").display(), visits.display());
    let info = r#"{"client_id": "cid", "client_secret": "WRONG"}"#;
    let args = ["proxy", &server.url, "--static-oauth-client-info", info];
    let mut front = crate::serve::Front::spawn(dir.path(), &args, &[("BROWSER", browser.as_str())]);
    front.initialize(json!({}));
    let called = front.request(2, "tools/call", json!({"name": "whoami", "arguments": {}}));
    let message = called["error"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(message.starts_with("server \"127-0-0-1-"), "{called}");
    assert!(message.contains("invalid_client"), "{called}");
    assert_eq!(front.close().0, Some(0));
    drop(server);
    tag.assert_gone();
}

// Issue 24: the sign-in's redirect listener takes the port the kept client
// was registered with; when another program holds it, the listener takes
// another port and the client is registered again (a strict server refuses
// an unregistered redirect URI, and only the browser would hear of it).
// Before: the second sign-in sent the new URI with the old client and
// waited for a redirect that never came.
#[cfg(feature = "serve")]
#[test]
fn the_redirect_uri_is_remembered_and_a_taken_port_registers_again() {
    let tag = Tag::new();
    let server = AuthFixture::start(&tag, &["--exact-redirect"]);
    let dir = TempDir::new();
    let store = dir.path().join("mcp-auth.json");
    let check = |dir: &std::path::Path| {
        let visits = dir.join("browser.log");
        let mut command = Command::new(crate::support::tether_bin());
        command
            .arg("--config-dir")
            .arg(dir)
            .args(["proxy", &server.url, "--check", "--auth-timeout", "15"])
            .env(
                "BROWSER",
                format!("{} --log {}", fixture("fake-browser").display(), visits.display()),
            )
            .env_remove("RUST_LOG");
        run_command(command, None, WITHIN).0
    };
    // The kept client and its redirect URI; the tokens forgotten, so that
    // the next run signs in again with the same client.
    let forget_tokens = || -> String {
        let mut kept: Value = serde_json::from_slice(&std::fs::read(&store).unwrap()).unwrap();
        let mut record = &mut kept;
        while record.get("client").is_none() {
            record = record.as_object_mut().unwrap().values_mut().next().unwrap();
        }
        let uri = record["client"]["redirectUri"].as_str();
        let uri = uri.unwrap_or_else(|| panic!("no redirect URI kept: {record}")).to_owned();
        for field in ["accessToken", "refreshToken", "expiresAt"] {
            record.as_object_mut().unwrap().remove(field);
        }
        std::fs::write(&store, kept.to_string()).unwrap();
        uri
    };
    let first = check(dir.path());
    assert_eq!(first.status.code(), Some(0), "{}", stderr_of(&first));
    assert_eq!(server.requests_to("/register").len(), 1);
    let registered = forget_tokens();
    let port: u16 =
        registered.rsplit(':').next().unwrap().split('/').next().unwrap().parse().unwrap();

    // Its port is free: listened on again, no new registration.
    let again = check(dir.path());
    assert_eq!(again.status.code(), Some(0), "{}", stderr_of(&again));
    assert_eq!(server.requests_to("/register").len(), 1, "the same client, the same port");
    assert_eq!(forget_tokens(), registered);

    // Its port is taken: another port, registered again, signed in.
    let holder = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let moved = check(dir.path());
    assert_eq!(moved.status.code(), Some(0), "{}", stderr_of(&moved));
    assert_eq!(server.requests_to("/register").len(), 2, "registered again");
    assert_ne!(forget_tokens(), registered);
    drop(holder);
    drop(server);
    tag.assert_gone();
}

// Issue 24: the remote server behind `tether proxy` forgets its session
// every two requests (404): each time tether opens a new one and sends the
// request again, so every call the client in front makes is answered. Once
// the server is gone, a call is answered with an error.
#[cfg(feature = "serve")]
#[test]
fn tether_proxy_recovers_a_session_the_server_forgot() {
    let tag = Tag::new();
    let server = AuthFixture::start(&tag, &["--expire-sessions-after", "2"]);
    let dir = TempDir::new();
    let visits = dir.path().join("browser.log");
    let browser = format!("{} --log {}", fixture("fake-browser").display(), visits.display());
    let env = [("BROWSER", browser.as_str())];
    let mut front = crate::serve::Front::spawn(dir.path(), &["proxy", &server.url], &env);
    front.initialize(json!({}));
    front.tools_with("whoami");
    for id in 2..8 {
        let called = front.request(id, "tools/call", json!({"name": "whoami", "arguments": {}}));
        let text = called["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned();
        assert!(text.starts_with("client-"), "call {id}: {called}");
    }
    let opened = server
        .requests_to("/mcp")
        .iter()
        .filter(|entry| entry["rpc_method"] == "initialize")
        .count();
    assert!(opened >= 3, "the sessions expired and were opened again: {opened}");
    assert_eq!(server.requests_to("/authorize").len(), 1, "one sign-in for all sessions");
    // The server gone: the call is answered with an error, never silence.
    drop(server);
    let failed = front.request(9, "tools/call", json!({"name": "whoami", "arguments": {}}));
    assert!(failed["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{failed}");
    assert_eq!(front.close().0, Some(0));
    tag.assert_gone();
}

// Issue 24: five `tether proxy` processes started together on an expired,
// rotating refresh token make one refresh request between them and open
// no browser.
#[cfg(feature = "serve")]
#[test]
fn five_proxies_on_one_expired_token_refresh_it_once_and_open_no_browser() {
    let tag = Tag::new();
    let server = AuthFixture::start(&tag, &["--token-ttl", "2"]);
    let dir = TempDir::new();
    let store = dir.path().join("mcp-auth.json");
    // The entry `tether proxy` makes is named after the URL's host.
    let target = server.target(OAuthSettings::default()).with_token_store(&store);
    let name =
        "127-0-0-1-".to_owned() + server.url.split(':').nth(2).unwrap().split('/').next().unwrap();
    let client = Client::connect(
        &name,
        &Transport::Http(target),
        ClientOptions::default().with_request_timeout(Duration::from_secs(10)),
    )
    .unwrap();
    whoami(&client);
    client.close().unwrap();
    thread::sleep(Duration::from_millis(2500));
    let visits = dir.path().join("browser.log");
    let browser = format!("{} --log {}", fixture("fake-browser").display(), visits.display());
    let proxies: Vec<_> = (0..5)
        .map(|_| {
            let mut command = Command::new(crate::support::tether_bin());
            command
                .arg("--config-dir")
                .arg(dir.path())
                .args(["proxy", &server.url, "--check"])
                .env("BROWSER", &browser)
                .env_remove("RUST_LOG");
            thread::spawn(move || run_command(command, None, WITHIN).0)
        })
        .collect();
    for proxy in proxies {
        let output = proxy.join().unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
        assert!(stdout_of(&output).contains("whoami"), "{}", stdout_of(&output));
    }
    assert_one_refresh_per_token(&server);
    assert!(!visits.exists(), "a browser was opened");
    drop(server);
    tag.assert_gone();
}

// Issue 24: `tether proxy --resource URL` signs in for that resource, and
// `--no-resource-param` names none, in the authorization and the token
// requests alike.
#[cfg(feature = "serve")]
#[test]
fn tether_proxy_names_the_resource_it_is_told_or_none() {
    for (flags, expected) in [
        (vec!["--resource", "https://api.example/mcp"], Some("https://api.example/mcp")),
        (vec!["--no-resource-param"], None),
    ] {
        let tag = Tag::new();
        let server = AuthFixture::start(&tag, &[]);
        let dir = TempDir::new();
        let visits = dir.path().join("browser.log");
        let browser = format!("{} --log {}", fixture("fake-browser").display(), visits.display());
        let mut command = Command::new(crate::support::tether_bin());
        command
            .arg("--config-dir")
            .arg(dir.path())
            .args(["proxy", &server.url, "--check"])
            .args(&flags)
            .env("BROWSER", &browser)
            .env_remove("RUST_LOG");
        let (output, _) = run_command(command, None, WITHIN);
        assert_eq!(output.status.code(), Some(0), "{flags:?}: {}", stderr_of(&output));
        for path in ["/authorize", "/token"] {
            let requests = server.requests_to(path);
            assert!(!requests.is_empty(), "{path}");
            for request in requests {
                assert_eq!(request["params"]["resource"].as_str(), expected, "{path}: {request}");
            }
        }
        drop(server);
        tag.assert_gone();
    }
}

// Issue 26 (item 5): the sign-in a remote server has, in `get` and `list
// --json`: none before `tether login`, kept (with its expiry, whether it
// renews itself, its scopes) after; `get` says it in words.
#[test]
fn get_and_list_say_whether_a_sign_in_is_kept() {
    let tag = Tag::new();
    let server = AuthFixture::start(&tag, &[]);
    let dir = config_dir(json!({"web": {"url": server.url}}));
    let tether = |args: &[&str]| with_browser(dir.path(), args, false);
    let got = tether(&["get", "web", "--json"]);
    let value: Value = serde_json::from_str(&stdout_of(&got)).unwrap();
    assert_eq!(value["signIn"]["state"], "none", "{value}");
    assert_eq!(tether(&["login", "web"]).status.code(), Some(0));
    let got = tether(&["get", "web", "--json"]);
    let value: Value = serde_json::from_str(&stdout_of(&got)).unwrap();
    assert_eq!(value["signIn"]["state"], "kept", "{value}");
    assert_eq!(value["signIn"]["refreshable"], true);
    assert!(value["signIn"]["expiresIn"].as_i64().unwrap() > 3000, "{value}");
    let words = stdout_of(&tether(&["get", "web"]));
    assert!(words.contains("sign-in") && words.contains("kept, expires in"), "{words}");
    let listed = tether(&["list", "--json"]);
    let rows: Value = serde_json::from_str(&stdout_of(&listed)).unwrap();
    assert_eq!(rows[0]["signIn"]["state"], "kept", "{rows}");
    let before = server.requests_to("/mcp").len();
    let plain = tether(&["list", "--no-connect", "--json"]);
    let rows: Value = serde_json::from_str(&stdout_of(&plain)).unwrap();
    assert_eq!(rows[0]["state"], "enabled", "{rows}");
    assert_eq!(server.requests_to("/mcp").len(), before, "--no-connect asks the server nothing");
    drop(server);
    tag.assert_gone();
}

// Issue 25 (item 12): enterprise-managed sign-in (SEP-990) set in mcp.json:
// the ID token (from the environment) is exchanged at the identity
// provider for an assertion, which the authorization server takes in a JWT
// bearer grant; nobody is asked, and `tether get` hides the token.
#[test]
fn an_enterprise_identity_in_mcp_json_signs_in_without_a_person() {
    let tag = Tag::new();
    let server = AuthFixture::start(&tag, &["--client", "app:s3cret"]);
    let dir = config_dir(json!({"web": {"url": server.url, "oauth": {
        "clientId": "app", "clientSecret": "s3cret",
        "enterprise": {"tokenEndpoint": format!("{}/idp/token", server.base()),
                       "clientId": "idp-client", "idToken": "${TEST_ENTERPRISE_ID_TOKEN}"}}}}));
    let mut command = Command::new(tether_bin());
    command
        .arg("--config-dir")
        .arg(dir.path())
        .args(["call", "web", "whoami"])
        .env("TEST_ENTERPRISE_ID_TOKEN", "id-token-for-ada")
        .env_remove("RUST_LOG");
    let output = run_command(command, None, WITHIN).0;
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert!(stdout_of(&output).starts_with("app "), "{}", stdout_of(&output));
    assert!(server.requests_to("/authorize").is_empty());
    let exchanged = server.requests_to("/idp/token");
    assert_eq!(exchanged.len(), 1);
    let granted = server.requests_to("/token");
    assert_eq!(granted[0]["params"]["grant_type"], "urn:ietf:params:oauth:grant-type:jwt-bearer");
    // A wrong ID token: the identity provider refuses, and that is said.
    let mut command = Command::new(tether_bin());
    command
        .arg("--config-dir")
        .arg(dir.path())
        .args(["call", "web", "whoami"])
        .env("TEST_ENTERPRISE_ID_TOKEN", "someone-else")
        .env_remove("RUST_LOG");
    std::fs::remove_file(dir.path().join("mcp-auth.json")).ok();
    let output = run_command(command, None, WITHIN).0;
    assert_ne!(output.status.code(), Some(0));
    assert!(stderr_of(&output).contains("identity provider"), "{}", stderr_of(&output));
    let (shown, _) = run_tether(dir.path(), &["get", "web"], WITHIN);
    assert!(stdout_of(&shown).contains("${TEST_ENTERPRISE_ID_TOKEN}"), "{}", stdout_of(&shown));
}
