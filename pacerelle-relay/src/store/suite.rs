//! The store's tests written once: each runs through [`Store`], the interface both backends share, on a fresh
//! SQLite file and then on a fresh PostgreSQL database (`Cluster::shared`: unless `PACERELLE_TEST_POSTGRES=off`,
//! as in the `test` step of `cargo xtask test`, whose `postgres` step runs them). What only one backend has —
//! its migrations, its locks, two instances at once — stays in that backend's own tests.

pub(super) mod agent;
mod grants;
pub(super) mod messages;
pub(super) mod push;
pub(super) mod questions;
mod retention;
pub(super) mod session;
mod status;
mod updates;
pub(super) mod webhooks;

use pacerelle_test_support::postgres::Cluster;

use pacerelle_core::Timestamp;
use pacerelle_core::wire::ItemState;

use super::postgres::PgStore;
use super::sqlite::SqliteStore;
use super::{NewUpdate, Purged, Store};
use crate::config::Retention;

/// The tests' "now".
const T0: i64 = 1_800_000_000_000;

/// One backend's fresh store, with the folder that holds its files.
pub(in crate::store) struct Backend {
    store: Store,
    /// Where its database is: the SQLite file's path, or the PostgreSQL database's URL.
    database: String,
    dir: tempfile::TempDir,
}

/// A fresh store of each backend to test: SQLite always, PostgreSQL unless `PACERELLE_TEST_POSTGRES=off`.
async fn backends() -> Vec<Backend> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("suite.db");
    let sqlite = SqliteStore::open(&path).await.expect("opens");
    let mut all = vec![Backend {
        store: Store::Sqlite(sqlite),
        database: path.display().to_string(),
        dir,
    }];
    match Cluster::shared() {
        Some(cluster) => all.push(Backend::postgres(cluster.fresh_database().await).await),
        None => println!("PostgreSQL skipped: PACERELLE_TEST_POSTGRES=off"),
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

    /// `store`, whose database is `database` (the SQLite file's path or the PostgreSQL URL), with the folder
    /// of its files: for a backend's own tests, which open their store themselves.
    pub(in crate::store) fn of(store: Store, database: String, dir: tempfile::TempDir) -> Backend {
        Backend { store, database, dir }
    }

    /// A PostgreSQL store on the database at `url`, its files (the webhook key) in a new folder; also for the
    /// backend's own tests, which take its [`PgStore`] with [`Backend::pg`].
    pub(in crate::store) async fn postgres(url: String) -> Backend {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let postgres = PgStore::open(&url, dir.path()).await.expect("opens");
        Backend::of(Store::Postgres(postgres), url, dir)
    }

    /// The PostgreSQL store of a backend made by [`Backend::postgres`].
    pub(in crate::store) fn pg(&self) -> &PgStore {
        match &self.store {
            Store::Postgres(p) => p,
            Store::Sqlite(_) => panic!("a SQLite backend where PostgreSQL's was expected"),
        }
    }

    /// The folder that holds the store's files (its webhook key), for a second instance on the same database.
    pub(in crate::store) fn dir(&self) -> &tempfile::TempDir {
        &self.dir
    }

    /// The store, with agent `ag_1` registered (at `T0`).
    async fn with_agent(&self) -> Store {
        agent::register_ag_1(&self.store).await;
        self.store.clone()
    }

    /// Adds devices `dv_1` (phone) and `dv_2` (tablet) to agent `ag_1`, with no token: rows the interface only
    /// writes through a pairing.
    async fn add_devices(&self) {
        self.add_device("ag_1", "dv_1", "phone").await;
        self.add_device("ag_1", "dv_2", "tablet").await;
    }

    /// Adds device `device_id` named `name` to agent `agent_id`, an owner with no token, created at [`T0`].
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
                .expect("a device")
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

    /// Runs `sql`, one or more statements written the same for both backends, in a write transaction: for
    /// rows or changes the interface does not make (the schema's triggers run as for the store's own writes).
    async fn run(&self, sql: &str) {
        let sql = sql.to_string();
        match &self.store {
            Store::Sqlite(s) => s
                .write(move |conn| Ok(conn.execute_batch(&sql)?))
                .await
                .expect("written"),
            Store::Postgres(p) => {
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                    .execute(p.pool())
                    .await
                    .expect("written");
            }
        }
    }

    /// The numbers in the first row `sql` reads (a query written the same for both backends), `None` for NULL.
    async fn numbers(&self, sql: &str) -> Vec<Option<i64>> {
        let sql = sql.to_string();
        match &self.store {
            Store::Sqlite(s) => s
                .read_now(move |conn| {
                    Ok(conn.query_row(&sql, [], |row| {
                        (0..row.as_ref().column_count())
                            .map(|i| row.get(i))
                            .collect::<Result<Vec<_>, _>>()
                    })?)
                })
                .await
                .expect("a row"),
            Store::Postgres(p) => {
                use sqlx::Row;
                let row = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .fetch_one(p.pool())
                    .await
                    .expect("a row");
                (0..row.len())
                    .map(|i| row.try_get(i).expect("a number"))
                    .collect()
            }
        }
    }

    /// The one number `sql` reads, such as a count.
    async fn count(&self, sql: &str) -> i64 {
        self.numbers(sql).await[0].expect("a number")
    }

    /// The first column of every row `sql` reads (a query written the same for both backends), as text.
    async fn strings(&self, sql: &str) -> Vec<String> {
        let sql = sql.to_string();
        match &self.store {
            Store::Sqlite(s) => s
                .read_now(move |conn| {
                    Ok(conn
                        .prepare(&sql)?
                        .query_map([], |row| row.get(0))?
                        .collect::<Result<Vec<_>, _>>()?)
                })
                .await
                .expect("rows"),
            Store::Postgres(p) => sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .fetch_all(p.pool())
                .await
                .expect("rows"),
        }
    }

    /// Rows whose foreign keys name no row: SQLite's check of the whole file; PostgreSQL refuses such a row at
    /// every write, so there is none to find.
    async fn dangling(&self) -> Vec<String> {
        match &self.store {
            Store::Sqlite(_) => {
                self.strings("SELECT \"table\" FROM pragma_foreign_key_check")
                    .await
            }
            Store::Postgres(_) => Vec::new(),
        }
    }

    /// The agent's tasks not yet processed, as the quota reads them (the counters) and by scanning them all.
    pub(in crate::store) async fn pending_both_ways(&self, agent_id: &str) -> (i64, i64) {
        let counted = match &self.store {
            Store::Sqlite(s) => s.pending_counted(agent_id).await,
            Store::Postgres(p) => p.pending_counted(agent_id).await,
        };
        let scanned = self
            .count(&format!(
                "SELECT COUNT(*) FROM items WHERE agent_id = '{agent_id}' AND kind = 'message' AND processed_at IS NULL"
            ))
            .await;
        (counted, scanned)
    }

    /// Stores an update of item `seq` of `ag_1` to `state` at [`T0`] as the backend's writes do, in a
    /// transaction of its own: `None` when the item is no subject of such an update or already has it.
    async fn insert_update(&self, seq: i64, state: ItemState) -> Option<NewUpdate> {
        match &self.store {
            Store::Sqlite(s) => s.update_alone(seq, state).await,
            Store::Postgres(p) => p.update_alone(seq, state).await,
        }
    }

    /// A purge of what is older than `retention` at `now` in `max_batches` write transactions at most.
    async fn purge_bounded(&self, now: Timestamp, retention: &Retention, max_batches: u32) -> Purged {
        self.store
            .purge_bounded(now, retention, max_batches)
            .await
            .expect("purged")
    }

    /// `n` tasks of `ag_1` from `dv_1` (ids `prefix` and a number, stored at [`T0`] and after) processed a
    /// millisecond after they were stored, each with its update if `updates`: in one write, the counters'
    /// triggers running as for the store's own writes.
    async fn old_tasks(&self, prefix: &str, n: i64, updates: bool) {
        match &self.store {
            Store::Sqlite(s) => {
                let prefix = prefix.to_string();
                s.write(move |conn| {
                    let before: i64 = conn.query_row("SELECT COALESCE(MAX(seq), 0) FROM items", [], |r| r.get(0))?;
                    conn.execute(
                        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?3)
                         INSERT INTO items (agent_id, kind, item_id, device_id, envelope, created_at)
                         SELECT 'ag_1', 'message', ?1 || i, 'dv_1', 'AQ', ?2 + i FROM n",
                        rusqlite::params![prefix, T0, n],
                    )?;
                    conn.execute(
                        "UPDATE items SET processed_at = created_at + 1 WHERE kind = 'message' AND seq > ?1",
                        [before],
                    )?;
                    if updates {
                        conn.execute(
                            "INSERT INTO items (agent_id, kind, item_id, device_id, created_at, subject_seq, update_state)
                             SELECT agent_id, 'update', 'u' || seq, device_id, processed_at, seq, 'processed'
                             FROM items WHERE kind = 'message' AND seq > ?1",
                            [before],
                        )?;
                    }
                    Ok(())
                })
                .await
                .expect("tasks")
            }
            Store::Postgres(p) => p.old_tasks(prefix, n, updates).await,
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
                std::fs::remove_file(self.dir.path().join(crate::at_rest::key::FILE_NAME)).expect("key lost");
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
                self.dir = dir;
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
