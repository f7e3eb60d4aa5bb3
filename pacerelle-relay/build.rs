//! Rebuilds the relay when a migration is added: `sqlx::migrate!()` embeds the files of `migrations/` and
//! `migrations-postgres/` at compile time, and Cargo would not otherwise notice a new file in them.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=migrations-postgres");
}
