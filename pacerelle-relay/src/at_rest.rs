//! Files at rest: the data folder is `0700` and every file the relay keeps there is `0600`, whatever the
//! process umask (`docs/self-hosting.md`, "Files and permissions").
//!
//! The database holds webhook secrets (sealed, [`key`]) and metadata; the webhook key opens those secrets.
//! Neither is for other users of the machine. So the relay creates the database file `0600` before SQLite
//! opens it — SQLite then gives its `-wal` and `-shm` files the database file's mode — and creates the webhook
//! key `0600`. Files and folders left looser by an earlier version or by hand are tightened at start, with a
//! warning in the log. On systems other than Unix these are no-ops.

use std::io;
use std::path::{Path, PathBuf};

use crate::error::Error;

pub(crate) mod key;

/// Mode of the data folder.
pub const FOLDER_MODE: u32 = 0o700;
/// Mode of every file the relay keeps in its data folder.
pub const FILE_MODE: u32 = 0o600;

/// What went wrong, with the path, as an [`Error::Files`].
pub(crate) fn files_error(action: &'static str, path: &Path, source: io::Error) -> Error {
    Error::Files {
        action,
        path: path.display().to_string(),
        source,
    }
}

/// The folder that holds `database`: its parent, or the current folder for a bare file name.
pub(crate) fn folder_of(database: &Path) -> PathBuf {
    match database.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Creates the relay's data folder `0700` if it is missing (with its missing parents, also `0700`), or
/// tightens it to `0700` if other users may read or enter it.
///
/// For a folder given to the relay alone (`pacerelle serve --data`). A folder that every user may write to
/// (`/tmp`, or anything sticky or world-writable) is refused rather than changed: it is not the relay's alone,
/// and others could replace its files. [`crate::Relay::open`] only creates a missing folder; it never changes
/// the mode of one that exists.
pub fn prepare_data_folder(folder: &Path) -> Result<(), Error> {
    create_folder(folder)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(folder).map_err(|e| files_error("read the mode of", folder, e))?;
        if meta.permissions().mode() & 0o1002 != 0 {
            return Err(Error::Config(format!(
                "the data folder {} is shared (writable by every user, like /tmp): give the relay a folder of \
                 its own (--data, PACERELLE_DATA)",
                folder.display()
            )));
        }
    }
    tighten(folder, FOLDER_MODE)
}

/// Creates `folder` `0700` if it is missing; leaves an existing one as it is.
pub(crate) fn create_folder(folder: &Path) -> Result<(), Error> {
    if folder.is_dir() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(FOLDER_MODE);
    }
    builder
        .create(folder)
        .map_err(|e| files_error("create the folder", folder, e))
}

/// The database file and the files SQLite keeps beside it.
pub(crate) fn database_files(database: &Path) -> [PathBuf; 4] {
    let with = |suffix: &str| {
        let mut name = database.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    };
    [
        database.to_path_buf(),
        with("-wal"),
        with("-shm"),
        with("-journal"),
    ]
}

/// Before SQLite opens `database`: creates its folder if missing, creates the file `0600` if missing (SQLite
/// gives `-wal` and `-shm` the mode of the database file), and tightens the files already there.
pub(crate) fn prepare_database(database: &Path) -> Result<(), Error> {
    create_folder(&folder_of(database))?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(FILE_MODE);
    }
    match options.open(database) {
        // An empty file is an empty database to SQLite.
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(files_error("create the database", database, e)),
    }
    tighten_database(database)
}

/// Tightens the database file and the files beside it that exist to `0600`.
pub(crate) fn tighten_database(database: &Path) -> Result<(), Error> {
    for file in database_files(database) {
        if file.exists() {
            tighten(&file, FILE_MODE)?;
        }
    }
    Ok(())
}

/// Sets `path`'s mode to `mode` if group or others have any permission on it, and says so in the log.
#[cfg(unix)]
pub(crate) fn tighten(path: &Path, mode: u32) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|e| files_error("read the mode of", path, e))?;
    let was = meta.permissions().mode() & 0o7777;
    if was & 0o077 == 0 {
        return Ok(());
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| files_error("restrict the permissions of", path, e))?;
    tracing::warn!(
        path = %path.display(),
        was = format!("{was:04o}"),
        now = format!("{mode:04o}"),
        "other users could read this; permissions restricted"
    );
    Ok(())
}

/// No file modes to set outside Unix.
#[cfg(not(unix))]
pub(crate) fn tighten(_path: &Path, _mode: u32) -> Result<(), Error> {
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).expect("exists").permissions().mode() & 0o7777
    }

    #[test]
    fn a_new_folder_is_0700_and_a_loose_one_is_tightened() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let nested = dir.path().join("a").join("b");
        prepare_data_folder(&nested).expect("created");
        assert_eq!(mode(&nested), 0o700);
        assert_eq!(mode(&dir.path().join("a")), 0o700);

        std::fs::set_permissions(&nested, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        prepare_data_folder(&nested).expect("tightened");
        assert_eq!(mode(&nested), 0o700);

        // Stricter than 0700 is left alone.
        std::fs::set_permissions(&nested, std::fs::Permissions::from_mode(0o500)).expect("chmod");
        prepare_data_folder(&nested).expect("left");
        assert_eq!(mode(&nested), 0o500);
        std::fs::set_permissions(&nested, std::fs::Permissions::from_mode(0o700)).expect("chmod");

        // A shared folder is refused, never changed.
        for shared in [0o1777, 0o777, 0o1700] {
            std::fs::set_permissions(&nested, std::fs::Permissions::from_mode(shared)).expect("chmod");
            let e = prepare_data_folder(&nested).expect_err("refused");
            assert!(e.to_string().contains("a folder of its own"), "{e}");
            assert_eq!(mode(&nested), shared);
        }
        std::fs::set_permissions(&nested, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    }

    #[test]
    fn the_database_is_created_0600_and_loose_files_beside_it_are_tightened() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let db = dir.path().join("data").join("relay.db");
        prepare_database(&db).expect("prepared");
        assert_eq!(mode(&db), 0o600);
        assert_eq!(mode(&folder_of(&db)), 0o700);
        assert_eq!(std::fs::metadata(&db).expect("exists").len(), 0);

        let [_, wal, shm, _] = database_files(&db);
        for file in [&db, &wal, &shm] {
            std::fs::write(file, b"").expect("written");
            std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        }
        prepare_database(&db).expect("tightened");
        for file in [&db, &wal, &shm] {
            assert_eq!(mode(file), 0o600, "{}", file.display());
        }
    }

    #[tokio::test]
    async fn every_file_of_an_open_store_is_0600() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let folder = dir.path().join("data");
        let db = folder.join("pacerelle.db");
        let store = crate::store::sqlite::SqliteStore::open(&db).await.expect("opens");
        store
            .as_store()
            .register_agent("ag_1", "laptop", &[1; 32], pacerelle_core::Timestamp(1))
            .await
            .expect("stored");
        assert_eq!(mode(&folder), 0o700);
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&folder).expect("listed") {
            let entry = entry.expect("an entry");
            assert_eq!(mode(&entry.path()), 0o600, "{}", entry.path().display());
            names.push(entry.file_name().to_string_lossy().to_string());
        }
        names.sort();
        assert_eq!(
            names,
            [
                "pacerelle.db",
                "pacerelle.db-shm",
                "pacerelle.db-wal",
                "webhook.key"
            ]
        );
        store.close().await;
    }

    #[test]
    fn a_bare_file_name_lives_in_the_current_folder() {
        assert_eq!(folder_of(Path::new("relay.db")), PathBuf::from("."));
        assert_eq!(folder_of(Path::new("/srv/p/relay.db")), PathBuf::from("/srv/p"));
        let [db, wal, shm, journal] = database_files(Path::new("/srv/p/relay.db"));
        assert_eq!(db, PathBuf::from("/srv/p/relay.db"));
        assert_eq!(wal, PathBuf::from("/srv/p/relay.db-wal"));
        assert_eq!(shm, PathBuf::from("/srv/p/relay.db-shm"));
        assert_eq!(journal, PathBuf::from("/srv/p/relay.db-journal"));
    }
}
