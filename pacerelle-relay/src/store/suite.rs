//! The store's tests written once: each runs through [`Store`], the interface both backends share, on a fresh
//! SQLite file and then, when `PACERELLE_TEST_POSTGRES` asks for a cluster (`Cluster::from_env`; the
//! `postgres` step of `cargo xtask test`), on a fresh PostgreSQL database. What only one backend has — its
//! migrations, its locks, two instances at once — stays in that backend's own tests.

pub(super) mod push;
pub(super) mod questions;
pub(super) mod session;
pub(super) mod webhooks;

use pacerelle_core::Timestamp;
use pacerelle_test_support::postgres::Cluster;

use super::postgres::PgStore;
use super::sqlite::SqliteStore;
use super::{Registered, Store};

/// The tests' "now".
const T0: i64 = 1_800_000_000_000;

/// One backend's fresh store, with the folder that holds its files.
struct Backend {
    store: Store,
    /// Where its database is: the SQLite file's path, or the PostgreSQL database's URL.
    database: String,
    _dir: tempfile::TempDir,
}

/// A fresh store of each backend to test: SQLite always, PostgreSQL when a cluster is asked for.
async fn backends() -> Vec<Backend> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("suite.db");
    let sqlite = SqliteStore::open(&path).await.expect("opens");
    let mut all = vec![Backend {
        store: Store::Sqlite(sqlite),
        database: path.display().to_string(),
        _dir: dir,
    }];
    match Cluster::from_env() {
        Some(cluster) => {
            let url = cluster.fresh_database().await;
            let dir = tempfile::tempdir().expect("a temporary directory");
            let postgres = PgStore::open(&url, dir.path()).await.expect("opens");
            all.push(Backend {
                store: Store::Postgres(postgres),
                database: url,
                _dir: dir,
            });
        }
        None => println!(
            "PostgreSQL skipped: set PACERELLE_TEST_POSTGRES=start (or a postgres:// URL) to run it too"
        ),
    }
    all
}

impl Backend {
    /// Which backend, for failure messages.
    fn name(&self) -> &'static str {
        match self.store {
            Store::Sqlite(_) => "sqlite",
            Store::Postgres(_) => "postgres",
        }
    }

    /// The store, with agent `ag_1` registered (at `T0`).
    async fn with_agent(&self) -> Store {
        let registered = self
            .store
            .register_agent("ag_1", "laptop", &[1; 32], Timestamp(T0))
            .await
            .expect("stored");
        assert!(matches!(registered, Registered::Created(_)), "{}", self.name());
        self.store.clone()
    }

    /// Adds devices `dv_1` (phone) and `dv_2` (tablet) to agent `ag_1`, with no token: rows the interface only
    /// writes through a pairing.
    async fn add_devices(&self) {
        match &self.store {
            Store::Sqlite(s) => s
                .write(|conn| {
                    conn.execute(
                        "INSERT INTO devices (device_id, agent_id, name, role, token_hash, created_at)
                         VALUES ('dv_1', 'ag_1', 'phone', 'owner', x'00', ?1),
                                ('dv_2', 'ag_1', 'tablet', 'owner', x'00', ?1)",
                        [T0],
                    )?;
                    Ok(())
                })
                .await
                .expect("devices"),
            Store::Postgres(p) => {
                sqlx::query(
                    "INSERT INTO devices (device_id, agent_id, name, role, token_hash, created_at)
                     VALUES ('dv_1', 'ag_1', 'phone', 'owner', '\\x00', $1),
                            ('dv_2', 'ag_1', 'tablet', 'owner', '\\x00', $1)",
                )
                .bind(T0)
                .execute(p.pool())
                .await
                .expect("devices");
            }
        }
    }

    /// The state column of question `id` as stored (reads show an expiry before the expirer writes it).
    async fn stored_state(&self, id: &str) -> String {
        match &self.store {
            Store::Sqlite(s) => {
                let id = id.to_string();
                s.write(move |conn| {
                    Ok(conn.query_row(
                        "SELECT q.state FROM questions q JOIN items i ON i.seq = q.item_seq WHERE i.item_id = ?1",
                        [&id],
                        |row| row.get(0),
                    )?)
                })
                .await
                .expect("a row")
            }
            Store::Postgres(p) => sqlx::query_scalar(
                "SELECT q.state FROM questions q JOIN items i ON i.seq = q.item_seq WHERE i.item_id = $1",
            )
            .bind(id)
            .fetch_one(p.pool())
            .await
            .expect("a row"),
        }
    }

    /// The webhook secret of `agent_id` as stored, sealed.
    async fn sealed_secret(&self, agent_id: &str) -> Vec<u8> {
        match &self.store {
            Store::Sqlite(s) => {
                let agent_id = agent_id.to_string();
                s.write(move |conn| {
                    Ok(conn.query_row(
                        "SELECT sealed_secret FROM webhooks WHERE agent_id = ?1",
                        [&agent_id],
                        |row| row.get(0),
                    )?)
                })
                .await
                .expect("sealed")
            }
            Store::Postgres(p) => {
                sqlx::query_scalar("SELECT sealed_secret FROM webhooks WHERE agent_id = $1")
                    .bind(agent_id)
                    .fetch_one(p.pool())
                    .await
                    .expect("sealed")
            }
        }
    }

    /// Opens the store again as a relay that lost its webhook key: SQLite's file reopened once its key file is
    /// deleted, PostgreSQL's database opened with a key in a new folder (another instance's). Each makes a new
    /// key, that opens none of the secrets stored.
    async fn lose_the_webhook_key(&mut self) {
        self.store.close().await;
        match &self.store {
            Store::Sqlite(_) => {
                std::fs::remove_file(self._dir.path().join(crate::at_rest::key::FILE_NAME))
                    .expect("key lost");
                let sqlite = SqliteStore::open(std::path::Path::new(&self.database))
                    .await
                    .expect("opens with a new key");
                self.store = Store::Sqlite(sqlite);
            }
            Store::Postgres(_) => {
                let dir = tempfile::tempdir().expect("a temporary directory");
                let postgres = PgStore::open(&self.database, dir.path())
                    .await
                    .expect("opens with a new key");
                self.store = Store::Postgres(postgres);
                self._dir = dir;
            }
        }
    }

    /// Adds device `device_id` (an owner's, named `name`) to agent `agent_id`, with no token.
    async fn add_device(&self, agent_id: &str, device_id: &str, name: &str) {
        match &self.store {
            Store::Sqlite(s) => {
                let row = [agent_id, device_id, name].map(str::to_string);
                s.write(move |conn| {
                    conn.execute(
                        "INSERT INTO devices (device_id, agent_id, name, role, token_hash, created_at)
                         VALUES (?2, ?1, ?3, 'owner', x'00', ?4)",
                        rusqlite::params![row[0], row[1], row[2], T0],
                    )?;
                    Ok(())
                })
                .await
                .expect("a device");
            }
            Store::Postgres(p) => {
                sqlx::query(
                    "INSERT INTO devices (device_id, agent_id, name, role, token_hash, created_at)
                     VALUES ($2, $1, $3, 'owner', '\\x00', $4)",
                )
                .bind(agent_id)
                .bind(device_id)
                .bind(name)
                .bind(T0)
                .execute(p.pool())
                .await
                .expect("a device");
            }
        }
    }

    /// The push outbox as stored: (device, kind, urgency, topic, expiry) of each push, by device then as queued.
    async fn push_outbox(&self) -> Vec<(String, String, String, Option<String>, i64)> {
        const SQL: &str =
            "SELECT device_id, kind, urgency, topic, expires_at FROM push_outbox ORDER BY device_id, push_id";
        match &self.store {
            Store::Sqlite(s) => s
                .write(|conn| {
                    let mut statement = conn.prepare(SQL)?;
                    let rows = statement
                        .query_map([], |r| {
                            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                        })?
                        .collect::<Result<Vec<_>, _>>()?;
                    Ok(rows)
                })
                .await
                .expect("the outbox"),
            Store::Postgres(p) => sqlx::query_as(SQL).fetch_all(p.pool()).await.expect("the outbox"),
        }
    }

    /// The endpoint of each push subscription stored, in order (one endpoint held twice shows twice).
    async fn push_endpoints(&self) -> Vec<String> {
        const SQL: &str = "SELECT endpoint FROM push_subscriptions ORDER BY endpoint";
        match &self.store {
            Store::Sqlite(s) => s
                .write(|conn| {
                    let mut statement = conn.prepare(SQL)?;
                    let rows = statement
                        .query_map([], |r| r.get(0))?
                        .collect::<Result<Vec<_>, _>>()?;
                    Ok(rows)
                })
                .await
                .expect("the subscriptions"),
            Store::Postgres(p) => sqlx::query_scalar(SQL)
                .fetch_all(p.pool())
                .await
                .expect("the subscriptions"),
        }
    }
}
