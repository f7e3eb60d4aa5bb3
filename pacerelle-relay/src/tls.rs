//! HTTPS without a reverse proxy: [`Relay::serve_tls`] with a certificate and key in PEM ([`TlsConfig`]).
//!
//! A phone's browser runs the web app's WebCrypto only in a secure context, so a relay reached from a phone
//! must be served over HTTPS (or through a reverse proxy or a tunnel that terminates TLS). TLS here is
//! rustls with the ring provider, TLS 1.2 and 1.3, HTTP/1.1.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::serve::{Listener, ListenerExt};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::{Error, Relay};

/// A TLS handshake that has not finished by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Most handshakes in progress at once; more connections wait to be accepted.
const MAX_HANDSHAKES: usize = 256;

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
    /// and connections that fail their handshake are dropped. Shuts down like [`Relay::serve`].
    pub async fn serve_tls(
        self,
        listener: TcpListener,
        tls: TlsConfig,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let inner = self.inner.clone();
        let signal = async move {
            shutdown.await;
            tracing::info!("relay shutting down");
            inner.shutdown.trigger();
            inner.webhook_kick.notify_one();
            inner.expiry_kick.notify_one();
        };
        let addr = listener.local_addr()?;
        let public_url = self.inner.config.public_url.as_deref().unwrap_or("-");
        tracing::info!(%addr, public_url, "relay listening (HTTPS)");
        let listener = TlsListener::new(listener, TlsAcceptor::from(tls.server));
        // `tap_io` gives the connections a `ConnectInfo<SocketAddr>`, used by the rate limits.
        axum::serve(
            listener.tap_io(|_| {}),
            self.router().into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(signal)
        .await?;
        self.inner.stop_background().await;
        Ok(())
    }
}

/// Accepts TCP connections and hands over those whose TLS handshake succeeded.
struct TlsListener {
    local: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    acceptor_task: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    fn new(tcp: TcpListener, acceptor: TlsAcceptor) -> TlsListener {
        let local = tcp
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let (tx, ready) = mpsc::channel(64);
        let acceptor_task = tokio::spawn(accept_loop(tcp, acceptor, tx));
        TlsListener {
            local,
            ready,
            acceptor_task,
        }
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.acceptor_task.abort();
    }
}

async fn accept_loop(
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    let handshakes = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    loop {
        let Ok(permit) = handshakes.clone().acquire_owned().await else {
            return;
        };
        let (stream, addr) = tokio::select! {
            _ = ready.closed() => return,
            accepted = tcp.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // As axum does for plain TCP: out of file descriptors and the like pass; wait a little.
                    tracing::debug!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let acceptor = acceptor.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            let _permit = permit;
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(mut tls)) => {
                    if tls.get_ref().1.alpn_protocol() == Some(crate::acme::ACME_TLS_ALPN) {
                        // A TLS-ALPN-01 validation: the handshake was the answer.
                        tracing::debug!(%addr, "ACME TLS-ALPN-01 validation handshake");
                        let _ = tokio::io::AsyncWriteExt::shutdown(&mut tls).await;
                        return;
                    }
                    let _ = ready.send((tls, addr)).await;
                }
                Ok(Err(e)) => tracing::debug!(%addr, error = %e, "TLS handshake failed"),
                Err(_) => tracing::debug!(%addr, "TLS handshake timed out"),
            }
        });
    }
}

impl Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(pair) => pair,
            // The accept loop ended (it only does when this listener is dropped): nothing more comes.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
