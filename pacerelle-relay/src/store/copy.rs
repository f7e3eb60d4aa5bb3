//! `pacerelle store copy`: a relay's data from its SQLite file into a PostgreSQL database, so that a relay that
//! started embedded can move to several instances without losing its history (ADR 0003).
//!
//! The copy is generic over the schema: the tables and their columns are read from the two databases
//! themselves (PostgreSQL's `information_schema` ∩ SQLite's `PRAGMA table_info`), so a column a later migration
//! adds is copied without a change here. Values are converted by the type of the PostgreSQL column. Tables are
//! copied in an order that satisfies their foreign keys (read from `pg_constraint`), each in the order of its
//! key, in batches of rows, one transaction per batch, `INSERT … ON CONFLICT (key) DO UPDATE … WHERE` the values
//! differ: a copy stopped anywhere and run again finishes the job and never duplicates a row (rows the SQLite
//! relay changed in between are brought up to date), and a second copy writes nothing.
//!
//! After the rows: the counter tables (`agent_counts`, kept by triggers while rows are inserted) are overwritten
//! with the source's values, and every sequence (identity columns: `items.seq`, …) is set past both the
//! highest value copied and SQLite's own high-water mark (`sqlite_sequence`, which also counts rows retention
//! deleted), so cursors issued by the SQLite relay stay valid and the PostgreSQL relay never hands one out
//! again. Then each table is verified: the same number of rows and the same set of keys on both sides.
//!
//! Refusals, before anything is written: a SQLite file a relay still has open (unless the copy is `live`), one
//! whose migrations are not those of this relay version, and a PostgreSQL database holding rows the source does
//! not have (another relay's data, or this relay's after it ran on PostgreSQL) or agents with another credential
//! under the same id.
//!
//! **An online move.** A `live` copy reads a SQLite file its relay is serving: one read transaction, so one
//! consistent snapshot (the relay's writes go on beside it, in SQLite's write-ahead log). The copy after it,
//! once the relay is stopped, writes only what changed since; and the rows the relay deleted in between (pushes
//! and webhook events delivered, retention) it deletes too, where it would otherwise refuse them as another
//! relay's: a copy into an empty database leaves a mark in it (`store_copy_pending`, migration 0007), which the
//! first relay to open the database removes, and only while that mark is there are such rows deleted.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres, QueryBuilder, Row};

/// The SQLite migrations of this relay version (the same files the SQLite store runs).
static SQLITE_MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");
/// The PostgreSQL migrations of this relay version (the same files the PostgreSQL store runs).
static PG_MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations-postgres");

/// The bookkeeping table of the migrations, never copied: each side keeps its own.
const MIGRATIONS_TABLE: &str = "_sqlx_migrations";
/// PostgreSQL's mark that copies filled the database and no relay has opened it since (migration 0007).
const PENDING_TABLE: &str = "store_copy_pending";
/// Tables whose rows PostgreSQL's triggers write while other rows are inserted (per-agent counters): copied
/// last, the source's values replacing whatever the triggers counted. They also count rows that retention
/// deleted, which a count of the copied rows would miss.
const COUNTER_TABLES: &[&str] = &["agent_counts"];
/// Rows per batch (one transaction) by default.
pub const DEFAULT_BATCH_ROWS: usize = 1000;
/// PostgreSQL's limit on the parameters of one statement.
const MAX_PARAMETERS: usize = 65_535;

/// Why a copy did not happen or did not finish.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CopyError {
    /// The SQLite file cannot be used as a source: missing, unreadable, or not a relay's database.
    #[error("{0}")]
    Source(String),
    /// A relay still has the SQLite file open.
    #[error(
        "a relay has {0} open: stop it, copy, then start `pacerelle serve --database …` (its WAL is busy)"
    )]
    InUse(String),
    /// The SQLite file's migrations are not this relay version's.
    #[error("{0}")]
    Version(String),
    /// The PostgreSQL database holds data that is not the source's.
    #[error("{0}")]
    Foreign(String),
    /// A database failed during the copy; running the copy again continues it.
    #[error("{0}")]
    Database(String),
}

/// Called after each batch committed, with the table and the rows of the source read so far in it.
pub type OnBatch = Box<dyn FnMut(&str, u64)>;

/// How a copy runs.
pub struct CopyOptions {
    /// Rows per batch (one transaction each); [`DEFAULT_BATCH_ROWS`] unless set.
    pub batch_rows: usize,
    /// Called after each batch committed, with the table and the rows of the source read so far in it.
    pub on_batch: Option<OnBatch>,
    /// Copy from a SQLite file that a relay is serving (its snapshot at the copy's start), instead of refusing
    /// it: the first step of an online move (see the module's documentation).
    pub live: bool,
}

impl Default for CopyOptions {
    fn default() -> Self {
        CopyOptions {
            batch_rows: DEFAULT_BATCH_ROWS,
            on_batch: None,
            live: false,
        }
    }
}

impl std::fmt::Debug for CopyOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CopyOptions")
            .field("batch_rows", &self.batch_rows)
            .field("live", &self.live)
            .finish_non_exhaustive()
    }
}

/// One table of a finished copy.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TableCopy {
    /// The table's name.
    pub table: String,
    /// Rows in the source.
    pub source_rows: u64,
    /// Rows in the target after the copy.
    pub target_rows: u64,
    /// Rows this run wrote: new ones, and ones that changed in the source since an earlier run (the others were
    /// there already, the same).
    pub written: u64,
    /// Rows this run deleted: copied by an earlier run, and deleted in the source since.
    pub deleted: u64,
    /// Whether both sides hold the same set of keys (an order-independent digest of the primary keys).
    pub same_keys: bool,
}

impl TableCopy {
    /// Whether the table arrived whole: as many rows on both sides, with the same keys.
    pub fn verified(&self) -> bool {
        self.source_rows == self.target_rows && self.same_keys
    }
}

/// A sequence of the target set past the copied values.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SequenceSet {
    /// `table.column`.
    pub column: String,
    /// The last value handed out; the next row gets a greater one.
    pub last: i64,
}

/// What a copy did.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CopyReport {
    /// Every table copied, in the order copied.
    pub tables: Vec<TableCopy>,
    /// The sequences set.
    pub sequences: Vec<SequenceSet>,
    /// Tables of one side that the other does not have (not copied).
    pub skipped: Vec<String>,
}

impl CopyReport {
    /// Whether every table arrived whole.
    pub fn verified(&self) -> bool {
        self.tables.iter().all(TableCopy::verified)
    }
}

/// The relay's SQLite file named by `path`: the path itself, or `pacerelle.db` in it when it is a folder (the
/// relay's `--data`).
pub fn sqlite_file(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join("pacerelle.db")
    } else {
        path.to_path_buf()
    }
}

/// Copies the relay's data from the SQLite file at `sqlite` into the PostgreSQL database at `url` (see the
/// module's documentation), and verifies it.
pub async fn copy(sqlite: &Path, url: &str, mut options: CopyOptions) -> Result<CopyReport, CopyError> {
    let batch_rows = options.batch_rows.max(1);
    let source = open_source(sqlite, options.live)?;
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(
            url.parse::<PgConnectOptions>()
                .map_err(|e| CopyError::Database(format!("--to is not a PostgreSQL URL: {e}")))?,
        )
        .await
        .map_err(|e| CopyError::Database(format!("cannot connect to the PostgreSQL database: {e}")))?;
    PG_MIGRATOR
        .run(&pool)
        .await
        .map_err(|e| CopyError::Database(format!("cannot migrate the PostgreSQL database: {e}")))?;

    let (tables, skipped) = plan(&source, &pool).await?;
    if target_is_empty(&pool).await? {
        sqlx::query(
            "INSERT INTO store_copy_pending (started_at)
             VALUES ((EXTRACT(EPOCH FROM now()) * 1000)::BIGINT) ON CONFLICT DO NOTHING",
        )
        .execute(&pool)
        .await
        .map_err(pg_err("cannot mark the database as filled by a copy"))?;
    }
    let pending: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM store_copy_pending)")
        .fetch_one(&pool)
        .await
        .map_err(pg_err("cannot read the copy's mark"))?;
    let gone = check_target(&source, &pool, &tables, pending).await?;
    // Children before their parents: the tables are planned parents first.
    let mut deleted = vec![0u64; tables.len()];
    for (i, table) in tables.iter().enumerate().rev() {
        deleted[i] = delete_rows(&pool, table, &gone[i]).await?;
    }

    let mut copies = Vec::new();
    for (table, deleted) in tables.iter().zip(deleted) {
        let written = copy_table(&source, &pool, table, batch_rows, &mut options).await?;
        copies.push((table, written, deleted));
    }
    let sequences = set_sequences(&source, &pool, &tables).await?;

    let mut report = CopyReport {
        tables: Vec::new(),
        sequences,
        skipped,
    };
    for (table, written, deleted) in copies {
        let (source_rows, source_digest) = source_keys(&source, table)?;
        let (target_rows, target_digest) = target_keys(&pool, table).await?;
        report.tables.push(TableCopy {
            table: table.name.clone(),
            source_rows,
            target_rows,
            written,
            deleted,
            same_keys: source_digest == target_digest,
        });
    }
    pool.close().await;
    Ok(report)
}

/// How a PostgreSQL column takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    BigInt,
    Int,
    SmallInt,
    Bool,
    Text,
    Bytes,
    Double,
    Real,
}

impl Kind {
    fn of(data_type: &str) -> Option<Kind> {
        Some(match data_type {
            "bigint" => Kind::BigInt,
            "integer" => Kind::Int,
            "smallint" => Kind::SmallInt,
            "boolean" => Kind::Bool,
            "text" | "character varying" | "character" => Kind::Text,
            "bytea" => Kind::Bytes,
            "double precision" => Kind::Double,
            "real" => Kind::Real,
            _ => return None,
        })
    }
}

/// A column copied: its name on both sides (`rowid` may be SQLite's implicit one) and its PostgreSQL kind.
#[derive(Debug, Clone)]
struct Column {
    name: String,
    kind: Kind,
    /// An identity column `GENERATED ALWAYS` (the insert must override it).
    always: bool,
}

/// A table copied.
#[derive(Debug, Clone)]
struct Table {
    name: String,
    columns: Vec<Column>,
    /// The primary key's columns (PostgreSQL's), in order.
    key: Vec<String>,
    /// Whether the SQLite table has a rowid (not `WITHOUT ROWID`): its rows are read in rowid order.
    rowid: bool,
    /// Copied last ([`COUNTER_TABLES`]): the source's values then replace what the triggers counted.
    counter: bool,
}

/// Opens the SQLite file read-only, after checking that no relay has it open (unless `live`) and that its
/// migrations are this relay version's. The connection then holds one read transaction: every table is read
/// from one snapshot, also while a relay writes beside it.
fn open_source(path: &Path, live: bool) -> Result<Connection, CopyError> {
    let shown = path.display().to_string();
    if !path.is_file() {
        return Err(CopyError::Source(format!(
            "{shown} is not a file: give the relay's SQLite file or its --data folder"
        )));
    }
    if !live {
        refuse_if_open(path)?;
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| CopyError::Source(format!("cannot open {shown}: {e}")))?;
    let applied: Option<i64> = conn
        .query_row(
            &format!("SELECT MAX(version) FROM {MIGRATIONS_TABLE} WHERE success = 1"),
            [],
            |r| r.get(0),
        )
        .map_err(|e| CopyError::Source(format!("{shown} is not a Pacerelle relay's database: {e}")))?;
    let newest = SQLITE_MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
    let applied = applied.unwrap_or(0);
    if applied < newest {
        return Err(CopyError::Version(format!(
            "{shown} is at migration {applied}, this relay version's is {newest}: run this relay version once \
             on it first (`pacerelle serve --data …`, then stop it), then copy"
        )));
    }
    if applied > newest {
        return Err(CopyError::Version(format!(
            "{shown} is at migration {applied}, newer than this relay version's ({newest}): copy with the \
             pacerelle that wrote it"
        )));
    }
    conn.execute_batch("BEGIN")
        .map_err(|e| CopyError::Source(format!("cannot read {shown}: {e}")))?;
    Ok(conn)
}

/// Refuses a SQLite file that another connection has open (a running relay): a connection in exclusive locking
/// mode cannot take its lock while another one holds the database, even an idle one in WAL mode.
fn refuse_if_open(path: &Path) -> Result<(), CopyError> {
    let shown = path.display().to_string();
    let probe = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| CopyError::Source(format!("cannot open {shown}: {e}")))?;
    probe
        .busy_timeout(Duration::from_millis(200))
        .map_err(|e| CopyError::Source(format!("cannot open {shown}: {e}")))?;
    let locked = probe.execute_batch(
        "PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE; SELECT COUNT(*) FROM sqlite_master; ROLLBACK;",
    );
    match locked {
        Ok(()) => Ok(()),
        Err(rusqlite::Error::SqliteFailure(e, _))
            if matches!(
                e.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ) =>
        {
            Err(CopyError::InUse(shown))
        }
        Err(e) => Err(CopyError::Source(format!("cannot read {shown}: {e}"))),
    }
}

fn pg_err(what: &str) -> impl Fn(sqlx::Error) -> CopyError + '_ {
    move |e| CopyError::Database(format!("{what}: {e}"))
}

fn sqlite_err(what: &str) -> impl Fn(rusqlite::Error) -> CopyError + '_ {
    move |e| CopyError::Source(format!("{what}: {e}"))
}

/// The tables to copy, in an order that satisfies the foreign keys (counter tables last), and the tables only
/// one side has.
async fn plan(source: &Connection, pool: &PgPool) -> Result<(Vec<Table>, Vec<String>), CopyError> {
    let pg_tables: BTreeSet<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables
         WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'",
    )
    .fetch_all(pool)
    .await
    .map_err(pg_err("cannot list the PostgreSQL tables"))?
    .into_iter()
    .filter(|t: &String| t != MIGRATIONS_TABLE && t != PENDING_TABLE)
    .collect();
    let sqlite_tables: BTreeSet<String> = {
        let mut stmt = source
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
            .map_err(sqlite_err("cannot list the SQLite tables"))?;
        let names = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(sqlite_err("cannot list the SQLite tables"))?
            .collect::<Result<BTreeSet<_>, _>>()
            .map_err(sqlite_err("cannot list the SQLite tables"))?;
        names.into_iter().filter(|t| t != MIGRATIONS_TABLE).collect()
    };
    let skipped: Vec<String> = pg_tables.symmetric_difference(&sqlite_tables).cloned().collect();
    let common: BTreeSet<String> = pg_tables.intersection(&sqlite_tables).cloned().collect();

    let columns = sqlx::query(
        "SELECT table_name::text, column_name::text, data_type::text,
                COALESCE(is_generated, 'NEVER') = 'ALWAYS' AS generated,
                COALESCE(identity_generation, '') = 'ALWAYS' AS always
         FROM information_schema.columns WHERE table_schema = current_schema()
         ORDER BY table_name, ordinal_position",
    )
    .fetch_all(pool)
    .await
    .map_err(pg_err("cannot list the PostgreSQL columns"))?;
    let keys = sqlx::query(
        "SELECT c.conrelid::regclass::text AS table_name, a.attname::text AS column_name
         FROM pg_constraint c
         JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k(attnum, n) ON TRUE
         JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
         WHERE c.contype = 'p' AND c.connamespace = current_schema()::regnamespace
         ORDER BY 1, k.n",
    )
    .fetch_all(pool)
    .await
    .map_err(pg_err("cannot read the PostgreSQL primary keys"))?;
    let references = sqlx::query(
        "SELECT conrelid::regclass::text AS child, confrelid::regclass::text AS parent FROM pg_constraint
         WHERE contype = 'f' AND connamespace = current_schema()::regnamespace",
    )
    .fetch_all(pool)
    .await
    .map_err(pg_err("cannot read the PostgreSQL foreign keys"))?;

    let mut tables = BTreeMap::new();
    for name in &common {
        let sqlite_columns = sqlite_columns(source, name)?;
        let rowid = !without_rowid(source, name)?;
        let mut cols = Vec::new();
        for row in columns
            .iter()
            .filter(|r| r.get::<String, _>("table_name") == *name)
        {
            let column: String = row.get("column_name");
            let generated: bool = row.get("generated");
            let in_sqlite = sqlite_columns.contains(&column) || (column == "rowid" && rowid);
            if generated || !in_sqlite {
                continue;
            }
            let data_type: String = row.get("data_type");
            let kind = Kind::of(&data_type).ok_or_else(|| {
                CopyError::Database(format!(
                    "the column {name}.{column} has the type {data_type}, which store copy does not convert"
                ))
            })?;
            cols.push(Column {
                name: column,
                kind,
                always: row.get("always"),
            });
        }
        let key: Vec<String> = keys
            .iter()
            .filter(|r| r.get::<String, _>("table_name") == *name)
            .map(|r| r.get("column_name"))
            .collect();
        if key.is_empty() || key.iter().any(|k| !cols.iter().any(|c| &c.name == k)) {
            return Err(CopyError::Database(format!(
                "the table {name} has no primary key that both databases hold: store copy cannot copy it \
                 without risking duplicates"
            )));
        }
        tables.insert(
            name.clone(),
            Table {
                name: name.clone(),
                columns: cols,
                key,
                rowid,
                counter: COUNTER_TABLES.contains(&name.as_str()),
            },
        );
    }

    // Kahn's algorithm over the foreign keys, by name among the tables ready (a stable order).
    let mut parents: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for r in &references {
        let (child, parent): (String, String) = (r.get("child"), r.get("parent"));
        if child != parent && tables.contains_key(&child) && tables.contains_key(&parent) {
            parents.entry(child).or_default().insert(parent);
        }
    }
    let mut ordered = Vec::new();
    let mut done = BTreeSet::new();
    while done.len() < tables.len() {
        let ready: Vec<String> = tables
            .keys()
            .filter(|t| !done.contains(*t))
            .filter(|t| {
                parents
                    .get(*t)
                    .is_none_or(|ps| ps.iter().all(|p| done.contains(p)))
            })
            .cloned()
            .collect();
        if ready.is_empty() {
            return Err(CopyError::Database(
                "the PostgreSQL tables' foreign keys form a cycle: store copy cannot order them".into(),
            ));
        }
        for t in ready {
            done.insert(t.clone());
            if let Some(table) = tables.get(&t) {
                ordered.push(table.clone());
            }
        }
    }
    // Counter tables last (nothing refers to them).
    ordered.sort_by_key(|t| t.counter);
    Ok((ordered, skipped))
}

fn sqlite_columns(source: &Connection, table: &str) -> Result<BTreeSet<String>, CopyError> {
    let what = format!("cannot read the columns of {table}");
    let mut stmt = source
        .prepare("SELECT name FROM pragma_table_info(?1)")
        .map_err(sqlite_err(&what))?;
    stmt.query_map([table], |r| r.get::<_, String>(0))
        .map_err(sqlite_err(&what))?
        .collect::<Result<_, _>>()
        .map_err(sqlite_err(&what))
}

fn without_rowid(source: &Connection, table: &str) -> Result<bool, CopyError> {
    // `pragma_index_list` names a WITHOUT ROWID table's primary key index with origin 'pk' too; the table's own
    // SQL is what says it.
    let sql: String = source
        .query_row(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [table],
            |r| r.get(0),
        )
        .map_err(sqlite_err("cannot read the SQLite schema"))?;
    Ok(sql.to_ascii_uppercase().contains("WITHOUT ROWID"))
}

/// `"name"`, quoted for both databases.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The SQLite expression that reads `column` (`rowid` of a rowid table is the implicit one when not declared).
fn sqlite_select(table: &Table) -> String {
    let columns: Vec<String> = table.columns.iter().map(|c| quoted(&c.name)).collect();
    let order = if table.rowid {
        "rowid".to_string()
    } else {
        table.key.iter().map(|k| quoted(k)).collect::<Vec<_>>().join(", ")
    };
    format!(
        "SELECT {} FROM {} ORDER BY {order}",
        columns.join(", "),
        quoted(&table.name)
    )
}

/// A value as text, the same for a SQLite value and PostgreSQL's `::text` of it: for the digests of the keys.
fn key_text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::Integer(i) => i.to_string(),
        Value::Real(f) => f.to_string(),
        Value::Text(t) => t.clone(),
        Value::Blob(b) => {
            let mut s = String::from("\\x");
            for byte in b {
                s.push_str(&format!("{byte:02x}"));
            }
            s
        }
    }
}

fn key_hash(parts: &[String]) -> u64 {
    let mut h = DefaultHasher::new();
    parts.hash(&mut h);
    h.finish()
}

/// Whether the target holds no relay's data yet: no agent (every other row hangs off one; the rows the
/// migrations themselves write, such as `webhook_outbox_cap`'s, do not count).
async fn target_is_empty(pool: &PgPool) -> Result<bool, CopyError> {
    sqlx::query_scalar("SELECT NOT EXISTS (SELECT 1 FROM agents)")
        .fetch_one(pool)
        .await
        .map_err(pg_err("cannot read the target's agents"))
}

/// Refuses a target that holds rows the source does not have (by primary key), unless `pending` (copies filled
/// the database and no relay has opened it since: they are then rows the SQLite relay deleted after an earlier
/// copy, and their keys are returned, per table, to be deleted), or agents with another credential under an id
/// the source has. An empty target, or one an earlier run of this copy filled in part or whole, passes.
async fn check_target(
    source: &Connection,
    pool: &PgPool,
    tables: &[Table],
    pending: bool,
) -> Result<Vec<Vec<Vec<String>>>, CopyError> {
    let mut gone = vec![Vec::new(); tables.len()];
    for (i, table) in tables.iter().enumerate() {
        let total: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT COUNT(*) FROM {}",
            quoted(&table.name)
        )))
        .fetch_one(pool)
        .await
        .map_err(pg_err("cannot count the target's rows"))?;
        if total == 0 {
            continue;
        }
        let mut known = HashSet::new();
        for_each_source_key(source, table, |k| {
            known.insert(k);
        })?;
        let mut foreign = 0u64;
        for key in target_key_rows(pool, table).await? {
            if !known.contains(&key_hash(&key)) {
                foreign += 1;
                if pending {
                    gone[i].push(key);
                }
            }
        }
        if foreign > 0 && !pending {
            return Err(CopyError::Foreign(format!(
                "the PostgreSQL database holds {foreign} row(s) of {} that the SQLite file does not have: \
                 another relay's data, or this relay's after it ran on PostgreSQL. Copy into an empty database",
                table.name
            )));
        }
    }
    // Agents under the same id with another credential: another relay's agents.
    let mut stmt = source
        .prepare("SELECT agent_id, auth_hash FROM agents")
        .map_err(sqlite_err("cannot read the agents"))?;
    let agents = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?)))
        .map_err(sqlite_err("cannot read the agents"))?
        .collect::<Result<BTreeMap<_, _>, _>>()
        .map_err(sqlite_err("cannot read the agents"))?;
    let target: Vec<(String, Vec<u8>)> = sqlx::query_as("SELECT agent_id, auth_hash FROM agents")
        .fetch_all(pool)
        .await
        .map_err(pg_err("cannot read the target's agents"))?;
    for (agent_id, hash) in target {
        if agents.get(&agent_id).is_some_and(|h| *h != hash) {
            return Err(CopyError::Foreign(format!(
                "the PostgreSQL database holds another agent under the id {agent_id}: another relay's data. \
                 Copy into an empty database"
            )));
        }
    }
    Ok(gone)
}

/// Deletes the rows of `table` whose keys (each column as text, as [`target_key_rows`] reads them) are `keys`,
/// in one statement; returns how many.
async fn delete_rows(pool: &PgPool, table: &Table, keys: &[Vec<String>]) -> Result<u64, CopyError> {
    if keys.is_empty() {
        return Ok(0);
    }
    let columns: Vec<Vec<&str>> = (0..table.key.len())
        .map(|c| keys.iter().map(|k| k[c].as_str()).collect())
        .collect();
    let sql = format!(
        "DELETE FROM {} WHERE ({}) IN (SELECT * FROM unnest({}))",
        quoted(&table.name),
        keys_as_text(table),
        (1..=table.key.len())
            .map(|n| format!("${n}::text[]"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for column in &columns {
        query = query.bind(column);
    }
    let done = query.execute(pool).await.map_err(pg_err(&format!(
        "cannot delete the rows of {} the source deleted",
        table.name
    )))?;
    Ok(done.rows_affected())
}

/// Calls `f` with the hash of each source row's key.
fn for_each_source_key(source: &Connection, table: &Table, mut f: impl FnMut(u64)) -> Result<(), CopyError> {
    let what = format!("cannot read the keys of {}", table.name);
    let sql = format!(
        "SELECT {} FROM {}",
        table.key.iter().map(|k| quoted(k)).collect::<Vec<_>>().join(", "),
        quoted(&table.name)
    );
    let mut stmt = source.prepare(&sql).map_err(sqlite_err(&what))?;
    let mut rows = stmt.query([]).map_err(sqlite_err(&what))?;
    while let Some(row) = rows.next().map_err(sqlite_err(&what))? {
        let mut parts = Vec::with_capacity(table.key.len());
        for i in 0..table.key.len() {
            parts.push(key_text(&row.get::<_, Value>(i).map_err(sqlite_err(&what))?));
        }
        f(key_hash(&parts));
    }
    Ok(())
}

/// The target's key columns of `table` as text, as a select list: the form in which keys are compared.
fn keys_as_text(table: &Table) -> String {
    table
        .key
        .iter()
        .map(|k| format!("COALESCE({}::text, '')", quoted(k)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every target row's key, each column as text.
async fn target_key_rows(pool: &PgPool, table: &Table) -> Result<Vec<Vec<String>>, CopyError> {
    let sql = format!("SELECT {} FROM {}", keys_as_text(table), quoted(&table.name));
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .fetch_all(pool)
        .await
        .map_err(pg_err(&format!("cannot read the keys of {}", table.name)))?;
    Ok(rows
        .iter()
        .map(|r| (0..table.key.len()).map(|i| r.get::<String, _>(i)).collect())
        .collect())
}

/// The source's rows of `table` and an order-independent digest of their keys.
fn source_keys(source: &Connection, table: &Table) -> Result<(u64, u64), CopyError> {
    let (mut n, mut digest) = (0u64, 0u64);
    for_each_source_key(source, table, |k| {
        n += 1;
        digest = digest.wrapping_add(k);
    })?;
    Ok((n, digest))
}

/// The target's rows of `table` and the same digest of their keys.
async fn target_keys(pool: &PgPool, table: &Table) -> Result<(u64, u64), CopyError> {
    let (mut n, mut digest) = (0u64, 0u64);
    for key in target_key_rows(pool, table).await? {
        n += 1;
        digest = digest.wrapping_add(key_hash(&key));
    }
    Ok((n, digest))
}

/// Copies one table in batches; returns the rows written (not there before, or changed since).
async fn copy_table(
    source: &Connection,
    pool: &PgPool,
    table: &Table,
    batch_rows: usize,
    options: &mut CopyOptions,
) -> Result<u64, CopyError> {
    let what = format!("cannot read {}", table.name);
    let per_statement = (MAX_PARAMETERS / table.columns.len().max(1)).max(1);
    let batch_rows = batch_rows.min(per_statement);
    let mut stmt = source.prepare(&sqlite_select(table)).map_err(sqlite_err(&what))?;
    let mut rows = stmt.query([]).map_err(sqlite_err(&what))?;
    let (mut read, mut written) = (0u64, 0u64);
    loop {
        let mut batch: Vec<Vec<Value>> = Vec::with_capacity(batch_rows);
        while batch.len() < batch_rows {
            let Some(row) = rows.next().map_err(sqlite_err(&what))? else {
                break;
            };
            let mut values = Vec::with_capacity(table.columns.len());
            for i in 0..table.columns.len() {
                values.push(row.get::<_, Value>(i).map_err(sqlite_err(&what))?);
            }
            batch.push(values);
        }
        if batch.is_empty() {
            break;
        }
        read += batch.len() as u64;
        written += write_batch(pool, table, &batch).await?;
        if let Some(on_batch) = options.on_batch.as_mut() {
            on_batch(&table.name, read);
        }
    }
    Ok(written)
}

/// Writes a batch in one transaction; returns the rows written (new, or changed since an earlier run).
async fn write_batch(pool: &PgPool, table: &Table, batch: &[Vec<Value>]) -> Result<u64, CopyError> {
    let names: Vec<String> = table.columns.iter().map(|c| quoted(&c.name)).collect();
    let mut q: QueryBuilder<Postgres> = QueryBuilder::new(format!(
        "INSERT INTO {} ({}) ",
        quoted(&table.name),
        names.join(", ")
    ));
    if table.columns.iter().any(|c| c.always) {
        q.push("OVERRIDING SYSTEM VALUE ");
    }
    let mut bad = None;
    q.push_values(batch, |mut b, row| {
        for (column, value) in table.columns.iter().zip(row) {
            if let Err(why) = bind(&mut b, column.kind, value) {
                bad.get_or_insert(format!("{}.{}: {why}", table.name, column.name));
            }
        }
    });
    if let Some(why) = bad {
        return Err(CopyError::Source(format!("a value cannot be converted: {why}")));
    }
    let key: Vec<String> = table.key.iter().map(|k| quoted(k)).collect();
    let values: Vec<&Column> = table
        .columns
        .iter()
        .filter(|c| !table.key.contains(&c.name))
        .collect();
    if values.is_empty() {
        q.push(" ON CONFLICT DO NOTHING");
    } else {
        let set: Vec<String> = values
            .iter()
            .map(|c| format!("{0} = EXCLUDED.{0}", quoted(&c.name)))
            .collect();
        let ours: Vec<String> = values
            .iter()
            .map(|c| format!("{}.{}", quoted(&table.name), quoted(&c.name)))
            .collect();
        let theirs: Vec<String> = values
            .iter()
            .map(|c| format!("EXCLUDED.{}", quoted(&c.name)))
            .collect();
        // The source's values win, and only rows whose values differ are written: a copy run again writes
        // nothing, and one run after the SQLite relay changed rows (a task processed since) brings the change.
        // Any other unique key cannot conflict here: the target holds no key the source lacks
        // ([`check_target`]).
        q.push(format!(
            " ON CONFLICT ({}) DO UPDATE SET {} WHERE ({}) IS DISTINCT FROM ({})",
            key.join(", "),
            set.join(", "),
            ours.join(", "),
            theirs.join(", ")
        ));
    }
    let what = format!("cannot copy rows of {}", table.name);
    let mut tx = pool.begin().await.map_err(pg_err(&what))?;
    let done = q.build().execute(&mut *tx).await.map_err(pg_err(&what))?;
    tx.commit().await.map_err(pg_err(&what))?;
    // New rows and rows changed.
    Ok(done.rows_affected())
}

/// Binds `value` as a PostgreSQL column of `kind` takes it.
fn bind(
    b: &mut sqlx::query_builder::Separated<'_, Postgres, &'static str>,
    kind: Kind,
    value: &Value,
) -> Result<(), String> {
    let int = |v: &Value| -> Result<Option<i64>, String> {
        match v {
            Value::Null => Ok(None),
            Value::Integer(i) => Ok(Some(*i)),
            Value::Text(t) => t
                .parse()
                .map(Some)
                .map_err(|_| "a text where a number goes".to_string()),
            other => Err(format!("a {:?} where a number goes", other.data_type())),
        }
    };
    let float = |v: &Value| -> Result<Option<f64>, String> {
        match v {
            Value::Null => Ok(None),
            Value::Integer(i) => Ok(Some(*i as f64)),
            Value::Real(f) => Ok(Some(*f)),
            other => Err(format!("a {:?} where a number goes", other.data_type())),
        }
    };
    let narrow = |i: Option<i64>| -> Result<Option<i32>, String> {
        i.map(i32::try_from)
            .transpose()
            .map_err(|_| "a number out of range".to_string())
    };
    match kind {
        Kind::BigInt => {
            b.push_bind(int(value)?);
        }
        Kind::Int => {
            b.push_bind(narrow(int(value)?)?);
        }
        Kind::SmallInt => {
            let v = narrow(int(value)?)?
                .map(i16::try_from)
                .transpose()
                .map_err(|_| "a number out of range".to_string())?;
            b.push_bind(v);
        }
        Kind::Bool => {
            b.push_bind(int(value)?.map(|i| i != 0));
        }
        Kind::Text => {
            let text = match value {
                Value::Null => None,
                Value::Text(t) => Some(t.clone()),
                Value::Integer(i) => Some(i.to_string()),
                Value::Real(f) => Some(f.to_string()),
                Value::Blob(bytes) => Some(
                    String::from_utf8(bytes.clone())
                        .map_err(|_| "bytes that are not UTF-8 where text goes")?,
                ),
            };
            b.push_bind(text);
        }
        Kind::Bytes => {
            let bytes = match value {
                Value::Null => None,
                Value::Blob(bytes) => Some(bytes.clone()),
                Value::Text(t) => Some(t.as_bytes().to_vec()),
                other => return Err(format!("a {:?} where bytes go", other.data_type())),
            };
            b.push_bind(bytes);
        }
        Kind::Double => {
            b.push_bind(float(value)?);
        }
        Kind::Real => {
            b.push_bind(float(value)?.map(|f| f as f32));
        }
    }
    Ok(())
}

/// Sets every sequence of the copied tables past the greatest value copied and past SQLite's high-water mark
/// for that table (`sqlite_sequence`, which counts rows deleted since), never backwards.
async fn set_sequences(
    source: &Connection,
    pool: &PgPool,
    tables: &[Table],
) -> Result<Vec<SequenceSet>, CopyError> {
    let high: BTreeMap<String, i64> = {
        let has: bool = source
            .query_row(
                "SELECT COUNT(*) > 0 FROM sqlite_master WHERE name = 'sqlite_sequence'",
                [],
                |r| r.get(0),
            )
            .map_err(sqlite_err("cannot read sqlite_sequence"))?;
        if has {
            let mut stmt = source
                .prepare("SELECT name, seq FROM sqlite_sequence")
                .map_err(sqlite_err("cannot read sqlite_sequence"))?;
            stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
                .map_err(sqlite_err("cannot read sqlite_sequence"))?
                .collect::<Result<_, _>>()
                .map_err(sqlite_err("cannot read sqlite_sequence"))?
        } else {
            BTreeMap::new()
        }
    };
    let mut set = Vec::new();
    for table in tables {
        for column in &table.columns {
            let sequence: Option<String> = sqlx::query_scalar("SELECT pg_get_serial_sequence($1, $2)")
                .bind(quoted(&table.name))
                .bind(&column.name)
                .fetch_one(pool)
                .await
                .map_err(pg_err("cannot find the sequences"))?;
            let Some(sequence) = sequence else { continue };
            // SQLite's high-water mark belongs to the INTEGER PRIMARY KEY, which is the rowid.
            let alias = table.rowid && table.key.len() == 1 && table.key[0] == column.name;
            let mark = if alias || column.name == "rowid" {
                high.get(&table.name).copied().unwrap_or(0)
            } else {
                0
            };
            let what = format!("cannot set the sequence of {}.{}", table.name, column.name);
            let copied: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT COALESCE(MAX({})::bigint, 0) FROM {}",
                quoted(&column.name),
                quoted(&table.name)
            )))
            .fetch_one(pool)
            .await
            .map_err(pg_err(&what))?;
            let current: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {sequence}"
            )))
            .fetch_one(pool)
            .await
            .map_err(pg_err(&what))?;
            let last = copied.max(mark).max(current);
            if last > current {
                sqlx::query("SELECT setval($1::regclass, $2, true)")
                    .bind(&sequence)
                    .bind(last)
                    .execute(pool)
                    .await
                    .map_err(pg_err(&what))?;
            }
            set.push(SequenceSet {
                column: format!("{}.{}", table.name, column.name),
                last: last.max(current),
            });
        }
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_the_same_from_both_sides() {
        assert_eq!(key_text(&Value::Integer(42)), "42");
        assert_eq!(key_text(&Value::Text("ag_1".into())), "ag_1");
        assert_eq!(key_text(&Value::Blob(vec![0, 255])), "\\x00ff");
        assert_ne!(
            key_hash(&["a".into(), "bc".into()]),
            key_hash(&["ab".into(), "c".into()])
        );
    }

    #[test]
    fn postgres_types_are_known_or_refused() {
        assert_eq!(Kind::of("bigint"), Some(Kind::BigInt));
        assert_eq!(Kind::of("bytea"), Some(Kind::Bytes));
        assert_eq!(Kind::of("jsonb"), None);
    }
}
