//! TLS for remote servers: the bundled Mozilla roots, plus the CAs a
//! corporate network needs (`SSL_CERT_FILE`, `SSL_CERT_DIR`, an entry's
//! `caFile`), behind the proxy the environment names.
//!
//! ureq can trust either its bundled roots or a given list, not both, so
//! the last link of the connector chain is ours: the same rustls client as
//! ureq's, over one root store holding both. The chain before it is ureq's
//! own: a CONNECT proxy from `HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY` (with
//! `NO_PROXY`), then TCP (ours: `socket.rs`).

use std::fmt;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::{
    CryptoProvider, GetRandomFailed, KeyProvider, SecureRandom, WebPkiSupportedAlgorithms,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::sign::SigningKey;
use rustls::{ClientConfig, ClientConnection, RootCertStore, SignatureScheme, StreamOwned};
use ureq::unversioned::transport::{
    Buffers, ConnectProxyConnector, ConnectionDetails, Connector, Either, LazyBuffers, NextTimeout,
    Transport, TransportAdapter,
};
use webpki::ring as algs;

use super::socket::TcpLink;

use crate::error::Error;

/// The connector chain every remote connection goes through.
///
/// # Errors
/// As [`extra_roots`].
pub(crate) fn connector(ca_file: Option<&Path>) -> Result<impl Connector, Error> {
    Ok(connector_with(extra_roots(ca_file)?))
}

/// The connector chain, trusting these CAs besides the bundled roots.
pub(crate) fn connector_with(extra: Vec<CertificateDer<'static>>) -> impl Connector {
    let tls = Tls::new(extra);
    ().chain(NoSocks).chain(ConnectProxyConnector::default()).chain(TcpLink).chain(tls)
}

/// Refuses a SOCKS proxy from the environment (`ALL_PROXY=socks5://…`):
/// tether speaks only CONNECT proxies, and going around the proxy the user
/// set, silently, is not an option.
#[derive(Debug)]
struct NoSocks;

impl Connector<()> for NoSocks {
    type Out = ();

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<()>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        let socks = details
            .config
            .proxy()
            .filter(|proxy| !proxy.is_no_proxy(details.uri))
            .is_some_and(|proxy| {
                !matches!(proxy.protocol(), ureq::ProxyProtocol::Http | ureq::ProxyProtocol::Https)
            });
        if socks {
            return Err(ureq::Error::Io(std::io::Error::other(
                "the proxy in the environment is a SOCKS proxy, which tether does not speak; use an HTTP proxy (HTTPS_PROXY=http://…)",
            )));
        }
        Ok(chained)
    }
}

/// The extra CAs: `SSL_CERT_FILE`, the files of `SSL_CERT_DIR` (a
/// `:`-separated list of folders), and `ca_file`.
///
/// # Errors
/// [`Error::Config`] naming a file that cannot be read or holds no
/// certificate.
pub(crate) fn extra_roots(ca_file: Option<&Path>) -> Result<Vec<CertificateDer<'static>>, Error> {
    let mut files: Vec<(PathBuf, &str)> = Vec::new();
    if let Some(file) = std::env::var_os("SSL_CERT_FILE").filter(|value| !value.is_empty()) {
        files.push((file.into(), "SSL_CERT_FILE"));
    }
    if let Some(dirs) = std::env::var_os("SSL_CERT_DIR") {
        for dir in std::env::split_paths(&dirs).filter(|dir| !dir.as_os_str().is_empty()) {
            // A missing folder in the list is not an error, as for OpenSSL.
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            let mut found: Vec<PathBuf> =
                entries.flatten().map(|entry| entry.path()).filter(|path| path.is_file()).collect();
            found.sort();
            files.extend(found.into_iter().map(|path| (path, "SSL_CERT_DIR")));
        }
    }
    if let Some(file) = ca_file {
        files.push((file.to_owned(), "caFile"));
    }
    let mut roots = Vec::new();
    for (file, from) in files {
        let pem = crate::bounded_read::read_bytes(&file, crate::bounded_read::CA_FILE_LIMIT)
            .map_err(|err| {
                Error::Config(format!("cannot read the CA file {} ({from}): {err}", file.display()))
            })?;
        let before = roots.len();
        roots.extend(CertificateDer::pem_slice_iter(&pem).filter_map(Result::ok));
        // A folder may hold other files (OpenSSL's hash links are certificates too).
        if roots.len() == before && from != "SSL_CERT_DIR" {
            return Err(Error::Config(format!(
                "the CA file {} ({from}) holds no PEM certificate",
                file.display()
            )));
        }
    }
    Ok(roots)
}

/// The TLS link: a rustls client over the bundled roots and the extra ones.
struct Tls {
    config: Arc<ClientConfig>,
    extra: usize,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tls {{ extra_roots: {} }}", self.extra)
    }
}

/// ring's cryptography with the AES-GCM suites only. Every TLS 1.3 server
/// implements AES-128-GCM (RFC 8446 makes it mandatory) and TLS 1.2 servers
/// ECDHE with AES-GCM, so leaving ChaCha20-Poly1305 out costs no server;
/// its code (some 50 KB) stays out of the binary. ring's own provider
/// cannot be had without it, so this one is spelled out: the same key
/// exchange groups and certificate signature algorithms, ring's random
/// numbers, and no client certificate.
fn provider() -> CryptoProvider {
    use rustls::crypto::ring::{cipher_suite, kx_group};
    CryptoProvider {
        cipher_suites: vec![
            cipher_suite::TLS13_AES_256_GCM_SHA384,
            cipher_suite::TLS13_AES_128_GCM_SHA256,
            cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            cipher_suite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
            cipher_suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        ],
        kx_groups: vec![kx_group::X25519, kx_group::SECP256R1, kx_group::SECP384R1],
        signature_verification_algorithms: SIGNATURES,
        secure_random: &RingRandom,
        key_provider: &NoClientKeys,
    }
}

/// The certificate signature algorithms ring verifies, as rustls's ring
/// provider lists them (for TLS 1.2 the curve is not fixed by the scheme).
const SIGNATURES: WebPkiSupportedAlgorithms = WebPkiSupportedAlgorithms {
    all: &[
        algs::ECDSA_P256_SHA256,
        algs::ECDSA_P256_SHA384,
        algs::ECDSA_P384_SHA256,
        algs::ECDSA_P384_SHA384,
        algs::ED25519,
        algs::RSA_PSS_2048_8192_SHA256_LEGACY_KEY,
        algs::RSA_PSS_2048_8192_SHA384_LEGACY_KEY,
        algs::RSA_PSS_2048_8192_SHA512_LEGACY_KEY,
        algs::RSA_PKCS1_2048_8192_SHA256,
        algs::RSA_PKCS1_2048_8192_SHA384,
        algs::RSA_PKCS1_2048_8192_SHA512,
        algs::RSA_PKCS1_2048_8192_SHA256_ABSENT_PARAMS,
        algs::RSA_PKCS1_2048_8192_SHA384_ABSENT_PARAMS,
        algs::RSA_PKCS1_2048_8192_SHA512_ABSENT_PARAMS,
    ],
    mapping: &[
        (
            SignatureScheme::ECDSA_NISTP384_SHA384,
            &[algs::ECDSA_P384_SHA384, algs::ECDSA_P256_SHA384],
        ),
        (
            SignatureScheme::ECDSA_NISTP256_SHA256,
            &[algs::ECDSA_P256_SHA256, algs::ECDSA_P384_SHA256],
        ),
        (SignatureScheme::ED25519, &[algs::ED25519]),
        (SignatureScheme::RSA_PSS_SHA512, &[algs::RSA_PSS_2048_8192_SHA512_LEGACY_KEY]),
        (SignatureScheme::RSA_PSS_SHA384, &[algs::RSA_PSS_2048_8192_SHA384_LEGACY_KEY]),
        (SignatureScheme::RSA_PSS_SHA256, &[algs::RSA_PSS_2048_8192_SHA256_LEGACY_KEY]),
        (SignatureScheme::RSA_PKCS1_SHA512, &[algs::RSA_PKCS1_2048_8192_SHA512]),
        (SignatureScheme::RSA_PKCS1_SHA384, &[algs::RSA_PKCS1_2048_8192_SHA384]),
        (SignatureScheme::RSA_PKCS1_SHA256, &[algs::RSA_PKCS1_2048_8192_SHA256]),
    ],
};

/// The operating system's random numbers, through ring.
#[derive(Debug)]
struct RingRandom;

impl SecureRandom for RingRandom {
    fn fill(&self, buf: &mut [u8]) -> Result<(), GetRandomFailed> {
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), buf)
            .map_err(|_| GetRandomFailed)
    }
}

/// tether presents no client certificate: no key is ever loaded.
#[derive(Debug)]
struct NoClientKeys;

impl KeyProvider for NoClientKeys {
    fn load_private_key(
        &self,
        _key: PrivateKeyDer<'static>,
    ) -> Result<Arc<dyn SigningKey>, rustls::Error> {
        Err(rustls::Error::General("tether presents no client certificate".into()))
    }
}

impl Tls {
    fn new(extra: Vec<CertificateDer<'static>>) -> Tls {
        let mut roots = RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
        let (added, ignored) = roots.add_parsable_certificates(extra);
        if ignored > 0 {
            log::warn!("{ignored} extra CA certificates could not be used");
        }
        let provider = Arc::new(provider());
        // ring supports every safe protocol version, so this cannot fail.
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports TLS 1.2 and 1.3")
            .with_root_certificates(roots)
            .with_no_client_auth();
        Tls { config: Arc::new(config), extra: added }
    }
}

impl<In: Transport> Connector<In> for Tls {
    type Out = Either<In, TlsTransport>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        let Some(transport) = chained else {
            return Err(ureq::Error::Tls("no connection to wrap in TLS"));
        };
        if !details.needs_tls() || transport.is_tls() {
            return Ok(Some(Either::A(transport)));
        }
        let host = details.uri.host().unwrap_or_default();
        // An IPv6 literal comes in brackets; the name to check has none.
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host.to_owned())
            .map_err(|_| ureq::Error::Tls("the host is not a valid TLS name"))?;
        let mut connection = ClientConnection::new(Arc::clone(&self.config), name)
            .map_err(|err| ureq::Error::Io(std::io::Error::other(err)))?;
        let mut socket = TransportAdapter::new(transport.boxed(), details.current_time.clone());
        // The handshake spends from the connection's budget, not a new one.
        use ureq::unversioned::transport::time::{Duration as Budget, Instant as Moment};
        let mut timeout = details.timeout;
        if let (Moment::Exact(now), Moment::Exact(start), Budget::Exact(after)) =
            ((details.current_time)(), details.now, timeout.after)
        {
            let spent = now.saturating_duration_since(start);
            timeout.after = Budget::Exact(after.saturating_sub(spent));
        }
        socket.set_timeout(timeout);
        connection.complete_io(&mut socket).map_err(handshake_failure)?;
        let buffers = LazyBuffers::new(
            details.config.input_buffer_size(),
            details.config.output_buffer_size(),
        );
        Ok(Some(Either::B(TlsTransport { buffers, stream: StreamOwned::new(connection, socket) })))
    }
}

/// What the server never answering the handshake is said as (a plain-HTTP
/// server waits for a request and says nothing).
pub(crate) const SILENT_HANDSHAKE: &str = "the server never answered the TLS handshake";

/// A handshake that ran out of time is the server's silence, said as a TLS
/// failure (which no retry mends), not as "timeout: connect".
fn handshake_failure(err: std::io::Error) -> ureq::Error {
    match ureq::Error::from(err) {
        ureq::Error::Timeout(_) => ureq::Error::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            rustls::Error::General(SILENT_HANDSHAKE.into()),
        )),
        other => other,
    }
}

/// A connection inside TLS.
pub(crate) struct TlsTransport {
    buffers: LazyBuffers,
    stream: StreamOwned<ClientConnection, TransportAdapter>,
}

impl fmt::Debug for TlsTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TlsTransport")
    }
}

impl Transport for TlsTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        self.stream.get_mut().set_timeout(timeout);
        let output = &self.buffers.output()[..amount];
        self.stream.write_all(output)?;
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        self.stream.get_mut().set_timeout(timeout);
        let input = self.buffers.input_append_buf();
        let amount = self.stream.read(input)?;
        self.buffers.input_appended(amount);
        Ok(amount > 0)
    }

    fn is_open(&mut self) -> bool {
        self.stream.get_mut().get_mut().is_open()
    }

    fn is_tls(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // tether's provider is ring's less ChaCha20-Poly1305: the same key
    // exchange groups and signature algorithms, so that a rustls update
    // that changes ring's provider shows here.
    #[test]
    fn the_provider_is_rings_without_chacha() {
        let ring = rustls::crypto::ring::default_provider();
        let ours = provider();
        let names = |provider: &CryptoProvider| -> Vec<String> {
            provider.kx_groups.iter().map(|group| format!("{:?}", group.name())).collect()
        };
        assert_eq!(names(&ours), names(&ring));
        let schemes = |algorithms: &WebPkiSupportedAlgorithms| -> Vec<SignatureScheme> {
            algorithms.mapping.iter().map(|(scheme, _)| *scheme).collect()
        };
        assert_eq!(
            schemes(&ours.signature_verification_algorithms),
            schemes(&ring.signature_verification_algorithms)
        );
        assert_eq!(
            ours.signature_verification_algorithms.all.len(),
            ring.signature_verification_algorithms.all.len()
        );
        let suites: Vec<_> = ring
            .cipher_suites
            .iter()
            .map(|suite| suite.suite())
            .filter(|suite| !format!("{suite:?}").contains("CHACHA20"))
            .collect();
        let mut ours_suites: Vec<_> =
            ours.cipher_suites.iter().map(|suite| suite.suite()).collect();
        let mut expected = suites.clone();
        ours_suites.sort_by_key(|suite| format!("{suite:?}"));
        expected.sort_by_key(|suite| format!("{suite:?}"));
        assert_eq!(ours_suites, expected);
        let mut random = [0u8; 32];
        ours.secure_random.fill(&mut random).unwrap();
        assert_ne!(random, [0u8; 32]);
    }
}
