//! HTTPS without a reverse proxy: [`Relay::serve_tls`] with a certificate and key in PEM ([`TlsConfig`]).
//!
//! A phone's browser runs the web app's WebCrypto only in a secure context, so a relay reached from a phone
//! must be served over HTTPS (or through a reverse proxy or a tunnel that terminates TLS). TLS here is
//! rustls with the ring provider, TLS 1.2 and 1.3, HTTP/1.1.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::{Error, Relay};

/// A TLS handshake that has not finished by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Most handshakes in progress at once; more connections wait to be accepted.
pub(crate) const MAX_HANDSHAKES: usize = 256;

/// A certificate chain and its private key, checked and ready to serve.
#[derive(Clone)]
pub struct TlsConfig {
    server: Arc<rustls::ServerConfig>,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConfig").finish_non_exhaustive()
    }
}

impl TlsConfig {
    /// From PEM text: the certificate chain (the server's certificate first, then any intermediates) and
    /// the private key (PKCS#8, PKCS#1 or SEC1). Refuses a chain without a certificate, a missing or
    /// unreadable key, and a key that does not match the certificate.
    pub fn from_pem(cert_chain: &[u8], private_key: &[u8]) -> Result<TlsConfig, Error> {
        let certs = CertificateDer::pem_slice_iter(cert_chain)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| Error::Config(format!("cannot read the TLS certificate chain: {e}")))?;
        if certs.is_empty() {
            return Err(Error::Config(
                "the TLS certificate file holds no certificate (expected PEM: -----BEGIN CERTIFICATE-----)"
                    .into(),
            ));
        }
        let key = PrivateKeyDer::from_pem_slice(private_key)
            .map_err(|e| Error::Config(format!("cannot read the TLS private key: {e}")))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut server = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Config(format!("TLS: {e}")))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| Error::Config(format!("the TLS certificate and key do not fit: {e}")))?;
        // The relay speaks HTTP/1.1 only.
        server.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsConfig {
            server: Arc::new(server),
        })
    }

    /// Served by `resolver`, which picks a certificate for each handshake ([`crate::Acme`]). Also offers the
    /// `acme-tls/1` protocol: a connection that negotiates it (the CA validating TLS-ALPN-01) is closed after
    /// its handshake, never handed to HTTP.
    pub(crate) fn from_resolver(
        resolver: Arc<dyn rustls::server::ResolvesServerCert>,
    ) -> Result<TlsConfig, Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut server = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Config(format!("TLS: {e}")))?
            .with_no_client_auth()
            .with_cert_resolver(resolver);
        server.alpn_protocols = vec![b"http/1.1".to_vec(), crate::acme::ACME_TLS_ALPN.to_vec()];
        Ok(TlsConfig {
            server: Arc::new(server),
        })
    }

    /// From PEM files.
    pub fn from_pem_files(
        cert_chain: &std::path::Path,
        private_key: &std::path::Path,
    ) -> Result<TlsConfig, Error> {
        let read = |path: &std::path::Path, what: &str| {
            std::fs::read(path)
                .map_err(|e| Error::Config(format!("cannot read the TLS {what} {}: {e}", path.display())))
        };
        TlsConfig::from_pem(
            &read(cert_chain, "certificate")?,
            &read(private_key, "private key")?,
        )
    }
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
        self.serve_with(listener, Some(TlsAcceptor::from(tls.server)), shutdown)
            .await
    }
}

/// The TLS handshake of a new connection, within [`HANDSHAKE_TIMEOUT`]. `None` when it fails or times out,
/// and for an ACME TLS-ALPN-01 validation, whose handshake was the whole answer.
pub(crate) async fn handshake(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
    addr: SocketAddr,
) -> Option<TlsStream<TcpStream>> {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(mut tls)) => {
            if tls.get_ref().1.alpn_protocol() == Some(crate::acme::ACME_TLS_ALPN) {
                tracing::debug!(%addr, "ACME TLS-ALPN-01 validation handshake");
                let _ = tokio::io::AsyncWriteExt::shutdown(&mut tls).await;
                return None;
            }
            Some(tls)
        }
        Ok(Err(e)) => {
            tracing::debug!(%addr, error = %e, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!(%addr, "TLS handshake timed out");
            None
        }
    }
}
