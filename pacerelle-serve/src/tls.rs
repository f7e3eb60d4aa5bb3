//! TLS: rustls with the ring provider, TLS 1.2 and 1.3, HTTP/1.1; the handshake of each connection.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WantsServerCert;
use rustls::{ConfigBuilder, ServerConfig};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// The one application protocol served: HTTP/1.1.
pub const HTTP1_ALPN: &[u8] = b"http/1.1";

/// Why a TLS configuration cannot be made; the message names the file or what does not fit.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TlsError(String);

/// How connections are served over TLS.
#[derive(Clone)]
pub struct Tls {
    /// The server's configuration.
    pub acceptor: TlsAcceptor,
    /// Most handshakes in progress at once; more connections wait in the kernel's queue to be accepted.
    pub max_handshakes: usize,
    /// A handshake that has not finished by then is dropped.
    pub handshake_timeout: Duration,
    /// An application protocol whose handshake is the whole answer (ACME's `acme-tls/1`): a connection that
    /// negotiates it is closed after its handshake, never handed to HTTP.
    pub handshake_only_alpn: Option<&'static [u8]>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("max_handshakes", &self.max_handshakes)
            .field("handshake_timeout", &self.handshake_timeout)
            .finish_non_exhaustive()
    }
}

/// A server configuration's first steps: the ring provider, TLS 1.2 and 1.3, no client certificates.
pub fn server_config_builder() -> Result<ConfigBuilder<ServerConfig, WantsServerCert>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError(format!("TLS: {e}")))?
        .with_no_client_auth())
}

/// From PEM text: the certificate chain (the server's certificate first, then any intermediates) and the
/// private key (PKCS#8, PKCS#1 or SEC1), offering HTTP/1.1. Refuses a chain without a certificate, a missing
/// or unreadable key, and a key that does not match the certificate.
pub fn server_config_from_pem(cert_chain: &[u8], private_key: &[u8]) -> Result<ServerConfig, TlsError> {
    let certs = CertificateDer::pem_slice_iter(cert_chain)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError(format!("cannot read the TLS certificate chain: {e}")))?;
    if certs.is_empty() {
        return Err(TlsError(
            "the TLS certificate file holds no certificate (expected PEM: -----BEGIN CERTIFICATE-----)"
                .into(),
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(private_key)
        .map_err(|e| TlsError(format!("cannot read the TLS private key: {e}")))?;
    let mut server = server_config_builder()?
        .with_single_cert(certs, key)
        .map_err(|e| TlsError(format!("the TLS certificate and key do not fit: {e}")))?;
    server.alpn_protocols = vec![HTTP1_ALPN.to_vec()];
    Ok(server)
}

/// [`server_config_from_pem`] from PEM files.
pub fn server_config_from_pem_files(cert_chain: &Path, private_key: &Path) -> Result<ServerConfig, TlsError> {
    let read = |path: &Path, what: &str| {
        std::fs::read(path)
            .map_err(|e| TlsError(format!("cannot read the TLS {what} {}: {e}", path.display())))
    };
    server_config_from_pem(
        &read(cert_chain, "certificate")?,
        &read(private_key, "private key")?,
    )
}

/// A certificate chain and its private key (or a resolver that picks one for each handshake), checked and
/// ready to serve: the one TLS configuration of the relay (`--tls-cert`/`--tls-key`, ACME) and of the MCP
/// server's HTTP endpoint.
#[derive(Clone)]
pub struct TlsConfig {
    server: Arc<ServerConfig>,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConfig").finish_non_exhaustive()
    }
}

impl TlsConfig {
    /// From PEM text ([`server_config_from_pem`]).
    pub fn from_pem(cert_chain: &[u8], private_key: &[u8]) -> Result<TlsConfig, TlsError> {
        server_config_from_pem(cert_chain, private_key).map(TlsConfig::from_server_config)
    }

    /// From PEM files ([`server_config_from_pem_files`]).
    pub fn from_pem_files(cert_chain: &Path, private_key: &Path) -> Result<TlsConfig, TlsError> {
        server_config_from_pem_files(cert_chain, private_key).map(TlsConfig::from_server_config)
    }

    /// From a server configuration made with [`server_config_builder`] (a certificate resolver, say).
    pub fn from_server_config(server: ServerConfig) -> TlsConfig {
        TlsConfig {
            server: Arc::new(server),
        }
    }

    /// The acceptor of connections with this configuration.
    pub fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.server.clone())
    }
}

/// The TLS handshake of a new connection, within the handshake timeout. `None` when it fails or times out,
/// and for a handshake-only protocol, whose handshake was the whole answer.
pub(crate) async fn handshake(
    tls: &Tls,
    stream: TcpStream,
    addr: SocketAddr,
) -> Option<TlsStream<TcpStream>> {
    match tokio::time::timeout(tls.handshake_timeout, tls.acceptor.accept(stream)).await {
        Ok(Ok(mut stream)) => {
            if let Some(alpn) = tls.handshake_only_alpn
                && stream.get_ref().1.alpn_protocol() == Some(alpn)
            {
                tracing::debug!(%addr, alpn = %String::from_utf8_lossy(alpn), "handshake-only connection");
                let _ = tokio::io::AsyncWriteExt::shutdown(&mut stream).await;
                return None;
            }
            Some(stream)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_without_a_certificate_or_key_is_refused() {
        let err = server_config_from_pem(b"", b"").expect_err("no certificate");
        assert!(err.to_string().contains("holds no certificate"), "{err}");
    }
}
