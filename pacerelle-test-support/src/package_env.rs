//! The variables cargo sets for the program it runs (`cargo run`, `cargo test`), which a cargo started from
//! that program must not inherit. One file for both users: this crate's `cargo_command` and xtask's
//! `forget_package_env`, which includes it with `#[path]` (xtask links only std and anyhow).

/// True for a variable cargo sets for the program it runs: `CARGO_MANIFEST_DIR`, `CARGO_PKG_*` and the like.
/// Some build scripts ask to run again when one of them changes (ring's names `CARGO_MANIFEST_DIR` and
/// `CARGO_PKG_NAME`), so a cargo that inherits them rebuilds ring and everything above it, and the next one
/// rebuilds them back. `CARGO` (the path of cargo itself) is not one of them.
pub fn set_by_cargo(name: &str) -> bool {
    name.starts_with("CARGO_PKG_")
        || name.starts_with("CARGO_BIN_")
        || matches!(
            name,
            "CARGO_MANIFEST_DIR"
                | "CARGO_MANIFEST_PATH"
                | "CARGO_MANIFEST_LINKS"
                | "CARGO_CRATE_NAME"
                | "CARGO_PRIMARY_PACKAGE"
                | "CARGO_TARGET_TMPDIR"
                | "CARGO_RUSTC_CURRENT_DIR"
                | "OUT_DIR"
        )
}
