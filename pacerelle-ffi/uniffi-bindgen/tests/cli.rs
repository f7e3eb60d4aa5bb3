//! The bindings generator's command line, as the `kotlin` step of `cargo xtask test` runs it. Being an
//! integration test, this also makes `cargo test --workspace` build the `uniffi-bindgen` program itself.

use std::process::Command;

#[test]
fn the_generator_names_its_generate_command() {
    let bindgen = env!("CARGO_BIN_EXE_uniffi-bindgen");
    let help = Command::new(bindgen)
        .arg("--help")
        .output()
        .expect("run uniffi-bindgen");
    assert!(help.status.success(), "{help:?}");
    assert!(String::from_utf8_lossy(&help.stdout).contains("generate"));
    let wrong = Command::new(bindgen)
        .arg("no-such-command")
        .output()
        .expect("run uniffi-bindgen");
    assert!(!wrong.status.success(), "an unknown command is refused");
}
