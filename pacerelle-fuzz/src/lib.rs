//! Fuzz targets over every parser Pacerelle feeds from the network or a file, and the small mutation engine
//! that drives them on stable Rust. `cargo xtask fuzz --time 10m` runs them (`src/main.rs`);
//! `cargo test -p pacerelle-fuzz` replays the committed crash inputs under `regressions/` and runs every
//! target for a fixed number of cases. `docs/testing.md` describes both.

pub mod engine;
pub mod relay;
pub mod targets;

use engine::Target;

/// Every target's name, in the order a run goes through them.
pub const TARGET_NAMES: &[&str] = &[
    "envelope",
    "credential",
    "cursor",
    "link",
    "offer",
    "wire",
    "policy",
    "hook",
    "webhook",
    "answer-log",
    "relay",
];

/// Builds the target called `name` (the relay target opens a relay in a temporary folder).
pub fn target(name: &str) -> anyhow::Result<Box<dyn Target>> {
    if name == "relay" {
        return Ok(Box::new(relay::RelayTarget::new()?));
    }
    targets::parser_targets()
        .into_iter()
        .find(|t| t.name() == name)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no fuzz target named {name:?}; the targets are {}",
                TARGET_NAMES.join(", ")
            )
        })
}
