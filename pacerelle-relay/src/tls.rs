//! HTTPS without a reverse proxy: [`Relay::serve_tls`] with a certificate and key in PEM ([`TlsConfig`]).
//!
//! A phone's browser runs the web app's WebCrypto only in a secure context, so a relay reached from a phone
//! must be served over HTTPS (or through a reverse proxy or a tunnel that terminates TLS). TLS here is
//! rustls with the ring provider, TLS 1.2 and 1.3, HTTP/1.1.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::{Error, Relay};

/// A TLS handshake that has not finished by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Most handshakes in progress at once; more connections wait to be accepted.
const MAX_HANDSHAKES: usize = 256;

pub use pacerelle_serve::TlsConfig;

/// The relay's configuration for certificates from `resolver` ([`crate::Acme`]): it also offers the
/// `acme-tls/1` protocol, and a connection that negotiates it (the CA validating TLS-ALPN-01) is closed after
/// its handshake, never handed to HTTP.
pub(crate) fn from_resolver(
    resolver: Arc<dyn rustls::server::ResolvesServerCert>,
) -> Result<TlsConfig, Error> {
    let mut server = pacerelle_serve::server_config_builder()
        .map_err(|e| Error::Config(e.to_string()))?
        .with_cert_resolver(resolver);
    server.alpn_protocols = vec![
        pacerelle_serve::HTTP1_ALPN.to_vec(),
        crate::acme::ACME_TLS_ALPN.to_vec(),
    ];
    Ok(TlsConfig::from_server_config(server))
}

impl Relay {
    /// [`Relay::serve`] over HTTPS: TLS handshakes run beside each other (a slow client holds up no one)
    /// and connections that fail their handshake are dropped. Connections have the same timeouts and cap as
    /// over HTTP (a connection in its handshake counts toward the cap). Shuts down like [`Relay::serve`].
    pub async fn serve_tls(
        self,
        listener: TcpListener,
        tls: TlsConfig,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let addr = listener.local_addr()?;
        let public_url = self.inner.config.public_url.as_deref().unwrap_or("-");
        tracing::info!(%addr, public_url, "relay listening (HTTPS)");
        self.serve_with(listener, Some(tls.acceptor()), shutdown).await
    }
}

/// How the relay serves connections over TLS with `acceptor`.
pub(crate) fn serving(acceptor: TlsAcceptor) -> pacerelle_serve::Tls {
    pacerelle_serve::Tls {
        acceptor,
        max_handshakes: MAX_HANDSHAKES,
        handshake_timeout: HANDSHAKE_TIMEOUT,
        // A CA validating TLS-ALPN-01 (`acme`): the handshake is the whole answer.
        handshake_only_alpn: Some(crate::acme::ACME_TLS_ALPN),
    }
}
