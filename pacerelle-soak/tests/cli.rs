//! The soak's command line, as `cargo xtask soak` runs it. Being an integration test, this also makes
//! `cargo test --workspace` build the `pacerelle-soak` program itself, which the `soak` step then runs as built.

use std::process::Command;

#[test]
fn the_soak_describes_its_settings_and_refuses_an_unknown_one() {
    let soak = env!("CARGO_BIN_EXE_pacerelle-soak");
    let help = Command::new(soak)
        .arg("--help")
        .output()
        .expect("run pacerelle-soak");
    assert!(help.status.success(), "{help:?}");
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(text.contains("--seconds") && text.contains("--seed"), "{text}");
    let wrong = Command::new(soak)
        .arg("--no-such-setting")
        .output()
        .expect("run pacerelle-soak");
    assert!(!wrong.status.success(), "an unknown setting is refused");
}
