//! Part of `cargo test --workspace`: every committed crash input is replayed, every target runs a fixed
//! number of cases from a fixed seed, and the engine is shown to find, keep and replay a planted failure.

use pacerelle_fuzz::engine::{self, Budget, Target};
use pacerelle_fuzz::{TARGET_NAMES, target};

/// Cases per target in the brief run: a few seconds in all on a debug build.
fn brief_cases(name: &str) -> u64 {
    match name {
        "relay" => 400,
        "policy" => 150,
        _ => 1500,
    }
}

#[test]
fn every_committed_regression_input_passes() {
    let dir = engine::regressions_dir();
    let mut replayed = 0;
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            assert!(
                TARGET_NAMES.contains(&name.as_str()),
                "regressions/{name} is not named after a target"
            );
        }
    }
    for name in TARGET_NAMES {
        let files = engine::regressions_of(&dir, name).expect("regressions readable");
        if files.is_empty() {
            continue;
        }
        let t = target(name).expect("target builds");
        for file in files {
            let input = std::fs::read(&file).expect("regression readable");
            if let Err(message) = engine::run_case(t.as_ref(), &input) {
                panic!("{} fails again: {message}", file.display());
            }
            replayed += 1;
        }
    }
    assert!(
        replayed > 0,
        "no regression input was found under {}",
        dir.display()
    );
}

#[test]
fn every_target_runs_briefly_without_failing() {
    for name in TARGET_NAMES {
        let t = target(name).expect("target builds");
        let seeds = t.seeds().len() as u64;
        let cases = brief_cases(name);
        let outcome = engine::fuzz(
            t.as_ref(),
            0x5eed,
            Budget {
                cases: Some(cases),
                time: None,
            },
        );
        if let Some(crash) = outcome.crash {
            panic!(
                "{name} failed on {:?}: {}",
                String::from_utf8_lossy(&crash.input),
                crash.message
            );
        }
        assert_eq!(outcome.cases, cases, "{name}");
        assert!(cases > seeds, "{name} would not get past its seeds");
        assert!(outcome.signals > 1, "{name}: every case took the same path");
    }
}

#[test]
fn every_seed_is_accepted_by_its_parser() {
    // The wire target's seeds are valid samples of each type: each must parse and round trip (signal 1),
    // or the target would only ever test refusals.
    let wire = target("wire").expect("wire");
    for seed in wire.seeds() {
        let signal = engine::run_case(wire.as_ref(), &seed).expect("a seed passes");
        assert_eq!(
            signal & 0xff,
            1,
            "type {} refuses its sample: {}",
            seed[0],
            String::from_utf8_lossy(&seed[1..])
        );
    }
    for (name, accepted) in [("cursor", 1), ("envelope", 1), ("link", 1)] {
        let t = target(name).expect("target");
        let first = t.seeds().into_iter().next().expect("a seed");
        assert_eq!(
            engine::run_case(t.as_ref(), &first).expect("passes"),
            accepted,
            "{name}"
        );
    }
}

/// Fails on any input containing `boom`; starts from `bo`.
struct Planted;

impl Target for Planted {
    fn name(&self) -> &'static str {
        "planted"
    }
    fn seeds(&self) -> Vec<Vec<u8>> {
        vec![b"bo".to_vec()]
    }
    fn dictionary(&self) -> Vec<Vec<u8>> {
        vec![b"om".to_vec()]
    }
    fn run(&self, input: &[u8]) -> u64 {
        assert!(!input.windows(4).any(|w| w == b"boom"), "planted failure");
        input.len() as u64
    }
}

#[test]
fn the_engine_finds_keeps_and_replays_a_planted_failure() {
    let budget = Budget {
        cases: Some(1_000_000),
        time: None,
    };
    let outcome = engine::fuzz(&Planted, 7, budget);
    let crash = outcome.crash.expect("the planted failure is found");
    assert!(crash.message.contains("planted failure"), "{}", crash.message);
    assert!(outcome.cases < 1_000_000);
    // The same seed finds the same input.
    let again = engine::fuzz(&Planted, 7, budget).crash.expect("found again");
    assert_eq!(again.input, crash.input);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = engine::save_crash(dir.path(), "planted", &crash.input).expect("saved");
    assert_eq!(
        engine::regressions_of(dir.path(), "planted").expect("listed"),
        vec![path.clone()]
    );
    let input = std::fs::read(&path).expect("read back");
    assert!(engine::run_case(&Planted, &input).is_err());
}
