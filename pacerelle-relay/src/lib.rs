#![doc = include_str!("../README.md")]

mod acme;
mod app;
mod at_rest;
mod auth;
mod config;
mod conn;
mod error;
mod expiry;
mod extract;
mod metrics;
mod presence;
mod push;
mod ratelimit;
mod routes;
mod store;
mod tls;
mod wake;
mod web;
mod webhook;

use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Duration;

use pacerelle_core::Timestamp;

pub use acme::{
    Acme, AcmeSettings, AcmeStatus, CertificateInfo, LETS_ENCRYPT, LETS_ENCRYPT_STAGING, check_domain,
    renew_at,
};
pub use at_rest::{FILE_MODE, FOLDER_MODE, prepare_data_folder};
pub use config::{Config, Connections, Quotas, Retention};
pub use error::{Error, StoreError};
pub use push::PushSettings;
pub use ratelimit::Cidr;
pub use store::copy;
pub use tls::TlsConfig;
pub use webhook::WebhookSettings;

use app::{AppState, Inner};
use store::Store;

/// How often the sweeper runs.
const SWEEP_EVERY: Duration = Duration::from_secs(30);
/// Presence records of agents idle this long are forgotten.
const ACTIVITY_IDLE_MS: i64 = 3600 * 1000;

/// A running relay: storage, wake-ups, presence, rate limits. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Relay {
    inner: AppState,
}

impl Relay {
    /// Opens (or creates) the database, applies migrations and starts the sweeper, the question expirer and
    /// the webhook deliverer (with [`WebhookSettings::default`]).
    ///
    /// The database file is created `0600` (its `-wal` and `-shm` too) and a missing folder `0700`, whatever
    /// the umask; `webhook.key`, beside the database, is read or created `0600` and seals the webhook secrets
    /// the database stores. Database files and the key left looser are restricted, with a warning in the log.
    ///
    /// Must be called within a Tokio runtime. The background tasks stop when the last clone of the relay (and
    /// of its router) is dropped, or when [`Relay::serve`] shuts down or [`Relay::close`] is called.
    pub async fn open(config: Config) -> Result<Relay, Error> {
        Relay::open_with(config, WebhookSettings::default()).await
    }

    /// [`Relay::open`] with other webhook delivery settings (shorter backoff in tests).
    pub async fn open_with(config: Config, webhooks: WebhookSettings) -> Result<Relay, Error> {
        if config.database_path.as_os_str().is_empty() {
            return Err(Error::Config("the database path is empty".into()));
        }
        if !config.open_registration && config.registration_secret.as_deref().is_some_and(str::is_empty) {
            return Err(Error::Config("the registration secret is empty".into()));
        }
        if let Some(contact) = &config.push_contact
            && !(contact.starts_with("mailto:") || contact.starts_with("https://"))
        {
            return Err(Error::Config(format!(
                "the push contact must be a mailto: or https:// URL, not {contact:?}"
            )));
        }
        let store = Store::open(&config).await?;
        let vapid = Arc::new(push::load_or_create_vapid(&at_rest::folder_of(
            &config.database_path,
        ))?);
        store.sweep(Timestamp::now()).await?;
        store
            .set_max_pending_events(config.quotas.max_pending_events)
            .await?;
        let relay_url = Arc::new(match &config.public_url {
            Some(url) => std::sync::OnceLock::from(url.trim_end_matches('/').to_string()),
            None => std::sync::OnceLock::new(),
        });
        let activity = presence::Activity::default();
        let metrics = metrics::Metrics::new(&store, &activity);
        let inner = Arc::new(Inner {
            config,
            metrics,
            store,
            wakes: Default::default(),
            activity,
            limiter: Default::default(),
            shutdown: Default::default(),
            webhooks,
            webhook_kick: Default::default(),
            expiry_kick: Default::default(),
            relay_url,
            vapid,
            background: Default::default(),
        });
        if let Store::Postgres(pg) = &inner.store {
            pg.bridge_wakes(Arc::downgrade(&inner));
        }
        tokio::spawn(sweeper(Arc::downgrade(&inner)));
        let tasks = vec![
            tokio::spawn(expiry::expirer(Arc::downgrade(&inner), inner.expiry_kick.clone())),
            tokio::spawn(webhook::deliverer(
                Arc::downgrade(&inner),
                inner.webhook_kick.clone(),
            )),
            tokio::spawn(push::deliverer(Arc::downgrade(&inner))),
        ];
        *inner
            .background
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = tasks;
        Ok(Relay { inner })
    }

    /// The relay's routes, usable without a socket (rate limits then do not apply).
    pub fn router(&self) -> axum::Router {
        app::app(self.inner.clone())
    }

    /// Serves on `listener` until `shutdown` resolves, then ends parked waits at once and waits for the
    /// requests in flight to finish, and for a webhook attempt in flight to be recorded.
    ///
    /// Connections get the timeouts and the cap of [`Config::connections`] ([`Connections`]). At start the
    /// process's soft limit on open files is raised to its hard limit where the system allows (the cap, when
    /// not configured, is derived from it), and the resulting cap is logged.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        if let Ok(addr) = listener.local_addr() {
            // Pushes name the relay by its public URL, or else by this address.
            let _ = self.inner.relay_url.set(format!("http://{addr}"));
            let public_url = self.inner.config.public_url.as_deref().unwrap_or("-");
            tracing::info!(%addr, public_url, "relay listening");
        }
        self.serve_with(listener, None, shutdown).await
    }

    /// Serves over plain HTTP, or over TLS with `tls`; the rest of [`Relay::serve`] and [`Relay::serve_tls`].
    async fn serve_with(
        self,
        listener: tokio::net::TcpListener,
        tls: Option<tokio_rustls::TlsAcceptor>,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let inner = self.inner.clone();
        let signal = async move {
            shutdown.await;
            tracing::info!("relay shutting down");
            inner.shutdown.trigger();
            // The deliverer and the expirer stop now rather than at their next wake-up.
            inner.webhook_kick.notify_one();
            inner.expiry_kick.notify_one();
        };
        let served = conn::serve(
            listener,
            tls,
            self.router(),
            &self.inner.config.connections,
            signal,
        )
        .await;
        self.inner.stop_background().await;
        served
    }

    /// Ends parked waits and closes the database. Requests that arrive afterwards fail with `unavailable`.
    pub async fn close(&self) {
        self.inner.stop_background().await;
        self.inner.store.close().await;
    }
}

/// At start, then every [`SWEEP_EVERY`]: drops expired offers' ciphertext, ends lapsed sessions, deletes what
/// is older than [`Config::retention`], forgets idle buckets.
async fn sweeper(relay: Weak<Inner>) {
    let mut every = tokio::time::interval(SWEEP_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(inner) = relay.upgrade() else {
            return;
        };
        if inner.shutdown.is_triggered() {
            return;
        }
        let now = Timestamp::now();
        if let Err(e) = inner.store.sweep(now).await {
            tracing::warn!(error = %e, "sweep failed");
        }
        match inner.store.purge(now, &inner.config.retention).await {
            Ok(purged) if purged.rows > 0 => {
                tracing::info!(
                    rows = purged.rows,
                    more = purged.more,
                    "retention: old rows deleted"
                );
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "retention purge failed"),
        }
        inner.limiter.forget_full();
        inner.activity.forget_idle(now, ACTIVITY_IDLE_MS);
    }
}
