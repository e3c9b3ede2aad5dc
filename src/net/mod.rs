//! The connector chain under every HTTP request tether makes: to MCP
//! servers (`transport/http/`) and to authorization servers (`auth/`).
//!
//! A leaf both use, so that neither reaches into the other: `tls.rs` is the
//! chain (ureq's proxy connector, our TCP link, our rustls link over the
//! bundled roots plus the configured CAs), `socket.rs` the TCP link, where
//! a caller that posts on its own thread is held to its own deadline, and
//! `resolver.rs` the names, looked up once every few seconds.

pub(crate) mod resolver;
pub(crate) mod socket;
pub(crate) mod tls;
