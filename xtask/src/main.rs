//! Project tasks, run as `cargo xtask <task>` from anywhere in the workspace.
//!
//! - `cargo xtask test` runs every test suite, and is exactly what CI runs (`.ci/run`): `fmt`, then the one
//!   build the later steps share, then the other steps two at a time (`--jobs N`), each in a process of its
//!   own whose output is printed whole when it ends. A step whose project folder does not exist yet is
//!   skipped with a line saying so. A failed step does not stop the run: the summary at the end shows every
//!   step, with its time and its count of tests, and the exit status is non-zero if any failed.
//! - `cargo xtask bench` runs the relay benchmark; `cargo xtask bench --load [ARGS]` builds `pacerelle` and
//!   `pacerelle-load` in release and runs the load generator, the relay alone in its own process.
//! - `cargo xtask soak --minutes N` runs the soak (`pacerelle-soak`, release build) for that long; the `soak`
//!   step of `cargo xtask test` runs it for a minute on the debug build.
//!
//! Only std and anyhow, so that it builds in seconds and reads top to bottom.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

mod dist;
mod house;
#[path = "../../pacerelle-test-support/src/package_env.rs"]
mod package_env;

const USAGE: &str = "\
usage: cargo xtask <task>

tasks:
  test [--only STEP]... [--skip STEP]...   run the test suites (STEP may be a comma-separated list):
                                           fmt, the build, then two steps at a time, each one's output
                                           printed when it ends (target/xtask/logs/STEP.log)
  test --jobs N [...]                      N steps at a time; --jobs 1: one after another, output as it
                                           comes
  test --list                              list the steps
  test --timings [...]                     the same, with the time of every test and the ten slowest
  test --quick                             the daily loop: fmt, then clippy and the Rust tests of the
                                           workspace crates changed since HEAD (files edited or new)
  check-history BASE                       `cargo check --workspace --all-targets` at every commit since
                                           BASE (oldest first), in a worktree under target/; names each
                                           commit that does not build
  bench [ARGS]...                          cargo bench -p pacerelle-client --bench relay [-- ARGS]
  bench --load [ARGS]...                   the load generator against a release relay in its own process
                                           (target/release/pacerelle-load ARGS; --help for its ARGS;
                                           --database postgres --instances 2: two relays on PostgreSQL)
  fuzz [--time 10m] [--target NAME]...     run the fuzz targets (release), the time split between them
  soak [--minutes N] [ARGS]...             senders, a supervised agent and random SIGKILLs (release
                                           build), then a check; --seconds N for a short one
  dist [--base-url URL] [--no-kotlin]      the release artefacts into dist/: archive, install.sh, npm
                                           packages, wheels, the Kotlin SDK in the local Maven
                                           repository, SHA256SUMS (docs/install.md)
";

/// One test suite.
struct Step {
    /// Its name, for `--only` and `--skip` and the summary.
    name: &'static str,
    /// The folder it tests, relative to the workspace root; the step is skipped while it does not exist.
    needs: Option<&'static str>,
    /// Runs the suite's commands; an error means the suite failed.
    run: fn(&Path) -> Result<()>,
    /// It runs what [`build_binaries`] builds: side by side, that build runs once before every such step.
    built: bool,
    /// Steps of one group never run at the same time: they share a tool's state (the Maven repository of
    /// `~/.m2`) or a target folder whose lock the second one would only wait on.
    group: Option<&'static str>,
}

/// Every suite, in the order they run one after another (`--jobs 1`). Cheap checks first, so that a
/// formatting slip shows at once. Side by side, `fmt` and the build come first and the others start in this
/// order: the long Rust test run beside clippy, which compiles while the tests mostly wait on the network.
#[rustfmt::skip]
const STEPS: &[Step] = &[
    Step { name: "fmt", needs: None, run: fmt, built: false, group: None },
    Step { name: "test", needs: None, run: test, built: true, group: None },
    Step { name: "clippy", needs: None, run: clippy, built: false, group: Some("target/check") },
    Step { name: "postgres", needs: Some("pacerelle-relay/migrations-postgres"), run: postgres, built: true, group: None },
    Step { name: "layers", needs: None, run: layers, built: false, group: Some("target/check") },
    Step { name: "soak", needs: Some("pacerelle-soak"), run: soak, built: true, group: None },
    Step { name: "py", needs: Some("pacerelle-py"), run: py, built: true, group: None },
    Step { name: "mcp-sdks", needs: Some("pacerelle-mcp/sdk-tests"), run: mcp_sdks, built: true, group: None },
    Step { name: "web", needs: Some("pacerelle-relay/web-tests"), run: web, built: true, group: None },
    Step { name: "kotlin", needs: Some("pacerelle-ffi/kotlin"), run: kotlin, built: true, group: Some("maven") },
    Step { name: "dist", needs: Some("packaging"), run: dist::step, built: true, group: Some("maven") },
];

/// The target folder of the `clippy` and `layers` steps: a check (metadata only) of other feature sets
/// than the test build's, in a folder of its own so that it runs beside the tests without waiting on
/// `target/`'s lock.
const CHECK_TARGET: &str = "target/check";

fn fmt(root: &Path) -> Result<()> {
    run(root, "cargo", &["fmt", "--all", "--check"])
}

/// The dependency rules the compiler can prove (ARCHITECTURE.md): the adapters (MCP, Python, FFI) never
/// depend on the relay outside their dev-dependencies, the relay builds against the core without its
/// `content` feature — no content key, no envelope sealing or opening — so it cannot read what it stores, and
/// the accept loop both share (`pacerelle-serve`) depends on neither.
fn layers(root: &Path) -> Result<()> {
    for adapter in ["pacerelle-mcp", "pacerelle-py", "pacerelle-ffi"] {
        let manifest = root.join(adapter).join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest)
            .with_context(|| format!("cannot read {}", manifest.display()))?;
        if section_names_dependency(&text, "dependencies", "pacerelle-relay") {
            bail!(
                "{adapter} depends on pacerelle-relay outside its dev-dependencies: adapters go through pacerelle-client"
            );
        }
    }
    let manifest = root.join("pacerelle-relay/Cargo.toml");
    let text =
        std::fs::read_to_string(&manifest).with_context(|| format!("cannot read {}", manifest.display()))?;
    for forbidden in [
        "pacerelle-client",
        "pacerelle-core = { workspace = true, features",
    ] {
        if section_names_dependency(&text, "dependencies", forbidden) {
            bail!(
                "pacerelle-relay's [dependencies] name `{forbidden}`: the relay must not link the content keys"
            );
        }
    }
    // The shared accept loop sits below the relay and the MCP adapter: it names no crate of ours.
    let manifest = root.join("pacerelle-serve/Cargo.toml");
    let text =
        std::fs::read_to_string(&manifest).with_context(|| format!("cannot read {}", manifest.display()))?;
    if section_names_dependency(&text, "dependencies", "pacerelle-") {
        bail!(
            "pacerelle-serve's [dependencies] name a pacerelle crate: it serves HTTP and knows no relay or MCP"
        );
    }
    println!(
        "adapters do not depend on the relay; the relay's core has no `content` feature; pacerelle-serve names no crate of ours"
    );
    house::client_is_a_tree(root)?;
    house::no_code_comparisons(root)?;
    // Built alone, the relay's core is compiled without `content`: any use of a content key fails here.
    let check = [
        "check",
        "-p",
        "pacerelle-relay",
        "--lib",
        "--target-dir",
        CHECK_TARGET,
    ];
    run(root, "cargo", &check)
}

/// True when the `[section]` table of a Cargo manifest has a line starting with `name`.
fn section_names_dependency(manifest: &str, section: &str, name: &str) -> bool {
    let header = format!("[{section}]");
    let mut inside = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == header;
        } else if inside && line.starts_with(name) {
            return true;
        }
    }
    false
}

fn clippy(root: &Path) -> Result<()> {
    run(
        root,
        "cargo",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--target-dir",
            CHECK_TARGET,
            "--",
            "-D",
            "warnings",
        ],
    )
}

/// Every test suite on SQLite: `PACERELLE_TEST_POSTGRES=off`, since the `postgres` step runs what also runs
/// on PostgreSQL (a plain `cargo test` would run it in this step too, once more).
fn test(root: &Path) -> Result<()> {
    if TIMINGS.get().copied().unwrap_or(false) {
        return timed_test(root);
    }
    run_with(root, "cargo", &["test", "--workspace"], &[(TEST_POSTGRES, "off")])
}

/// The variable that tells the tests which PostgreSQL to use, or none (`pacerelle_test_support::postgres::ENV`).
const TEST_POSTGRES: &str = "PACERELLE_TEST_POSTGRES";

/// Set by `cargo xtask test --timings`.
static TIMINGS: OnceLock<bool> = OnceLock::new();

/// The `test` step with the time of every test (`cargo xtask test --timings`). libtest reports them only with
/// an unstable option, which a test binary accepts when `RUSTC_BOOTSTRAP` is set while it runs; set while cargo
/// builds, it would rebuild everything. So the test binaries are built first (`--no-run`), then each is run as
/// `cargo test` runs it, from its package's folder, with `--report-time`; the doc tests follow. Prints the
/// wall time of each binary and the ten slowest tests.
fn timed_test(root: &Path) -> Result<()> {
    let built = command(root, "cargo")
        .args([
            "test",
            "--workspace",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("could not start cargo")?;
    if !built.status.success() {
        bail!("building the tests failed: {}", built.status);
    }
    let deps = root.join("target/debug/deps");
    let library_path = match std::env::var_os("LD_LIBRARY_PATH") {
        Some(old) => format!("{}:{}", deps.display(), old.to_string_lossy()),
        None => deps.display().to_string(),
    };
    let mut times: Vec<(f64, String)> = Vec::new();
    let mut binaries: Vec<(f64, String)> = Vec::new();
    let mut failed = Vec::new();
    for line in String::from_utf8_lossy(&built.stdout).lines() {
        // A test harness: its profile says `"test":true` (the target's own `test` flag is true for any bin).
        let harness = line
            .split_once(r#""profile":{"#)
            .and_then(|(_, p)| p.split_once('}'))
            .is_some_and(|(profile, _)| profile.contains(r#""test":true"#));
        if !line.contains(r#""reason":"compiler-artifact""#) || !harness {
            continue;
        }
        let (Some(exe), Some(manifest), Some(target)) = (
            json_str(line, "executable"),
            json_str(line, "manifest_path"),
            json_str(line, "name"),
        ) else {
            continue;
        };
        let dir = Path::new(&manifest).parent().unwrap_or(root).to_path_buf();
        let package = dir.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let name = format!("{package}/{target}");
        println!("$ {name} --report-time");
        let start = Instant::now();
        let out = command(&dir, &exe)
            .args(["-Zunstable-options", "--report-time"])
            .env(TEST_POSTGRES, "off")
            .env("RUSTC_BOOTSTRAP", "1")
            .env("LD_LIBRARY_PATH", &library_path)
            .stderr(std::process::Stdio::inherit())
            .output()
            .with_context(|| format!("could not start {exe}"))?;
        binaries.push((start.elapsed().as_secs_f64(), name.clone()));
        let text = String::from_utf8_lossy(&out.stdout);
        print!("{text}");
        for l in text.lines() {
            let Some((test, tail)) = l.strip_prefix("test ").and_then(|r| r.split_once(" ... ")) else {
                continue;
            };
            let secs = tail
                .split_once('<')
                .and_then(|(_, t)| t.strip_suffix("s>"))
                .and_then(|t| t.parse::<f64>().ok());
            if let Some(secs) = secs {
                times.push((secs, format!("{name}: {test}")));
            }
        }
        if !out.status.success() {
            failed.push(name);
        }
    }
    run(root, "cargo", &["test", "--workspace", "--doc"])?;
    binaries.sort_by(|a, b| b.0.total_cmp(&a.0));
    println!("\nxtask: test binaries, slowest first");
    for (secs, name) in &binaries {
        println!("xtask: {secs:>7.1} s  {name}");
    }
    times.sort_by(|a, b| b.0.total_cmp(&a.0));
    println!("\nxtask: the ten slowest tests");
    for (secs, test) in times.iter().take(10) {
        println!("xtask: {secs:>7.2} s  {test}");
    }
    if !failed.is_empty() {
        bail!("tests failed in {}", failed.join(", "));
    }
    Ok(())
}

/// The first string member `key` of a line of cargo's JSON messages (`"key":"value"`), unescaped; enough for
/// paths and names, so that xtask needs no JSON library.
fn json_str(line: &str, key: &str) -> Option<String> {
    let start = line.find(&format!("\"{key}\":\""))? + key.len() + 4;
    let mut out = String::new();
    let mut chars = line[start..].chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => out.push(chars.next()?),
            c => out.push(c),
        }
    }
    None
}

/// What the `test` step leaves out (`off`), against PostgreSQL: the store's tests (each on SQLite and then on
/// PostgreSQL), the schema's, and the relay's HTTP suite again, on a throw-away cluster started by the test
/// support (`initdb` in a temporary folder, a free port, as `nobody` when run as root; `docs/testing.md`), a
/// fresh database per relay. Then the CLI's tests of real `serve --database` processes (`store copy`, two
/// instances, one relay's data in PostgreSQL). Both commands select `--workspace`, as the `test` step does, and
/// narrow to targets and tests: cargo resolves features for the packages a command names, so `-p
/// pacerelle-relay` would build the relay, the client and their dependencies a second time.
fn postgres(root: &Path) -> Result<()> {
    for line in [
        "test --workspace --lib --test relay --test postgres",
        "test --workspace --test it -- store_copy:: instances:: instances_outboxes:: operations::serve_keeps_its_data_in_postgresql",
    ] {
        let args: Vec<&str> = line.split(' ').collect();
        run_with(root, "cargo", &args, &[(TEST_POSTGRES, "start")])?;
    }
    Ok(())
}

/// The short soaks on the debug build (artefacts shared with the `test` step): random SIGKILLs of the relay and
/// the supervised agent under concurrent senders, then the check that every acknowledged task was handled once
/// and replied to once (`docs/testing.md`) — 45 s on SQLite, then 45 s on PostgreSQL with two relays and the
/// database itself killed (a throw-away cluster at its durable settings, as the `postgres` step needs).
fn soak(root: &Path) -> Result<()> {
    soak_run(root, "debug", &["--seconds", "45"])?;
    soak_run(root, "debug", &["--seconds", "45", "--database", "postgres"])
}

/// Every program the steps after `test` run (`pacerelle`, `pacerelle-mcp`, the echo agent, `pacerelle-soak`,
/// `uniffi-bindgen`, the phone SDK's library), built as the `test` step builds them: by `cargo test --workspace
/// --no-run`, which builds the programs of every package with integration tests (each of these has some).
/// Cargo resolves features for the packages a command names, and `cargo build -p …` would build the relay,
/// the client and their dependencies again with other features; after the `test` step this is a no-op.
pub(crate) fn build_binaries(root: &Path) -> Result<()> {
    run(root, "cargo", &["test", "--workspace", "--no-run"])?;
    // The phone SDK's library is built in deps/ for its tests, and cargo copies it up into target/debug/ only
    // for a command that names its package: copy it up here, as `cargo build -p pacerelle-ffi` would.
    let name = format!(
        "{}pacerelle_ffi{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    let debug = root.join("target/debug");
    std::fs::copy(debug.join("deps").join(&name), debug.join(&name))
        .with_context(|| format!("cannot copy target/debug/deps/{name} into target/debug/"))?;
    Ok(())
}

/// Builds `pacerelle` and `pacerelle-soak` in `profile` (`debug`: [`build_binaries`]; `release`: those two),
/// then runs the soak binary with `args`; it finds `pacerelle` beside itself.
fn soak_run(root: &Path, profile: &str, args: &[&str]) -> Result<()> {
    if profile == "release" {
        let build = [
            "build",
            "--release",
            "-p",
            "pacerelle-cli",
            "-p",
            "pacerelle-soak",
        ];
        run(root, "cargo", &build)?;
    } else {
        build_binaries(root)?;
    }
    let soak = root
        .join("target")
        .join(profile)
        .join(format!("pacerelle-soak{}", std::env::consts::EXE_SUFFIX));
    run(root, &soak, args)
}

/// The wheel, built and installed for real into a fresh venv under `target/`, then tested by pytest against
/// real relays (`target/debug/pacerelle`, built here if needed), with mypy checking the stubs. The wheel is
/// built with the `dev` cargo profile so that it reuses the workspace's debug build (a release build of the
/// whole client takes minutes on two cores); `pip install ./pacerelle-py` without it builds a release wheel.
/// The same venv (with `cryptography`) then runs `docs/examples/test_verify_answer_log.py`: the independent
/// answer-log verifier against `pacerelle-core/tests/vectors/signature.json`.
fn py(root: &Path) -> Result<()> {
    const VENV: &str = "target/xtask/venv";
    build_binaries(root)?;
    run(root, "python3", &["-m", "venv", "--clear", VENV])?;
    let python = root.join(VENV).join("bin/python");
    let install = [
        "-m",
        "pip",
        "install",
        "--quiet",
        "./pacerelle-py",
        "pytest",
        "mypy",
        // The independent answer-log verifier of docs/crypto.md §4.9 (docs/examples/verify_answer_log.py).
        "cryptography",
        // The official MCP Python SDK, a second client of pacerelle-mcp beside rmcp (tests/test_mcp_official_sdk.py).
        "mcp==1.30.0",
    ];
    println!(
        "$ MATURIN_PEP517_ARGS=\"--profile dev\" {VENV}/bin/python {}",
        install.join(" ")
    );
    let status = command(root, &python)
        .args(install)
        .env("MATURIN_PEP517_ARGS", "--profile dev")
        .status()
        .context("could not start the venv's python")?;
    if !status.success() {
        bail!("installing the wheel failed: {status}");
    }
    run(root, &python, &["-m", "pytest", "pacerelle-py/tests"])?;
    // The answer-log verifier written from the spec alone, against the core's signature vectors.
    run(root, &python, &["-m", "pytest", "docs/examples"])
}

/// The phone SDK's bindings: the library and the binaries the tests drive are built, the Kotlin, Swift and
/// Python bindings generated into `target/bindings/{kotlin,swift,python}` (Swift cannot be compiled here:
/// its sources, header and module map are only generated), then the Python smoke test and the Kotlin
/// binding's JUnit tests on the JVM run against the host-built library, a real relay and the echo agent.
fn kotlin(root: &Path) -> Result<()> {
    build_binaries(root)?;
    let target = root.join("target/debug");
    let library = target.join(format!(
        "{}pacerelle_ffi{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    let bindings = root.join("target/bindings");
    match std::fs::remove_dir_all(&bindings) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("cannot remove {}", bindings.display()));
        }
        _ => {}
    }
    let lib = library.to_string_lossy();
    let bindgen = target.join("uniffi-bindgen");
    for language in ["kotlin", "swift", "python"] {
        let out = format!("target/bindings/{language}");
        let args = [
            "generate",
            &lib,
            "--language",
            language,
            "--out-dir",
            &out,
            "--no-format",
        ];
        run(root, &bindgen, &args)?;
    }
    let python = bindings.join("python");
    std::fs::copy(&library, python.join(library.file_name().unwrap_or_default()))
        .with_context(|| format!("cannot copy {} beside the Python binding", library.display()))?;
    run(
        root,
        "python3",
        &[
            "pacerelle-ffi/python-smoke/smoke.py",
            "--bindings",
            "target/bindings/python",
            "--target",
            "target/debug",
        ],
    )?;
    run(
        root,
        "mvn",
        &[
            "--batch-mode",
            "--file",
            "pacerelle-ffi/kotlin/pom.xml",
            "test",
            &format!("-Dpacerelle.target={}", target.display()),
            &format!("-Dpacerelle.bindings={}", bindings.join("kotlin").display()),
            &format!("-Dpacerelle.library={lib}"),
        ],
    )
}

/// `pacerelle-mcp` driven from the outside by two more official MCP SDKs (`pacerelle-mcp/sdk-tests/`), against
/// a real relay and a device paired through the CLI, both built first: the TypeScript SDK
/// (`@modelcontextprotocol/sdk`, pinned in `package-lock.json`), the client most hosts embed, over stdio and
/// streamable HTTP with a bearer; and the Python SDK 2.3.0 on a 2026-07-28 session (input requests for asking at
/// the computer), in a venv of its own: the `py` step's suite stays on the 1.x SDK and 2025-11-25.
fn mcp_sdks(root: &Path) -> Result<()> {
    const VENV: &str = "target/xtask/mcp-sdk-venv";
    let dir = root.join("pacerelle-mcp/sdk-tests");
    run(&dir, "npm", &["ci", "--no-audit", "--no-fund"])?;
    build_binaries(root)?;
    run(
        &dir,
        "node",
        &["--test", "--test-concurrency=1", "typescript.test.mjs"],
    )?;
    run(root, "python3", &["-m", "venv", "--clear", VENV])?;
    let python = root.join(VENV).join("bin/python");
    run(root, &python, &["-m", "pip", "install", "--quiet", "mcp==2.3.0"])?;
    run(&dir, &python, &["python_2026.py"])
}

/// The web app: its crypto module against the core's vectors (node's test runner), then end to end in
/// Debian's Chromium (`/usr/bin/chromium`, installed by `.ci/run`; playwright-core downloads no browser)
/// against a real relay, the echo agent and the CLI, which are built first: the app is embedded in them. The
/// end-to-end suite runs whole on the relay's SQLite file, then its pairing, task, question and push tests
/// ([`WEB_ON_POSTGRES`]) again on a throw-away PostgreSQL cluster (`pacerelle-test-postgres`).
fn web(root: &Path) -> Result<()> {
    let dir = root.join("pacerelle-relay/web-tests");
    run(&dir, "npm", &["ci", "--no-audit", "--no-fund"])?;
    run(&dir, "node", &["--test", "crypto.test.mjs"])?;
    build_binaries(root)?;
    let e2e = [
        "--test",
        "--test-concurrency=1",
        // Under node 20 this bounds the whole file, not each test: the file takes about 135 s here.
        "--test-timeout=300000",
    ];
    run(&dir, "node", &[&e2e[..], &["e2e.test.mjs"]].concat())?;
    let cluster = root.join("target/debug/pacerelle-test-postgres");
    let pattern = format!("--test-name-pattern=^({})", WEB_ON_POSTGRES.join("|"));
    println!(
        "$ PACERELLE_TEST_POSTGRES_BIN={} (on PostgreSQL)",
        cluster.display()
    );
    let status = command(&dir, "node")
        .args(e2e)
        .args([pattern.as_str(), "e2e.test.mjs"])
        .env("PACERELLE_TEST_POSTGRES_BIN", &cluster)
        .status()
        .context("could not start node")?;
    if !status.success() {
        bail!("the web app's end-to-end tests failed on PostgreSQL ({status})");
    }
    Ok(())
}

/// The beginnings of the names of the web app's end-to-end tests that run on PostgreSQL too: pairing, tasks
/// (with a retried send), every kind of question, pushes (registration, the worker's actions, a real encrypted
/// push), live updates, unpairing, and the relay's files read for plaintext — PostgreSQL's tables and its
/// write-ahead log.
const WEB_ON_POSTGRES: &[&str] = &[
    "the app is served",
    "opening a pairing link",
    "a task typed",
    "an agent with two sessions",
    "a yes/no question",
    "the approval is signed",
    "a question left alone",
    "a choice question answered",
    "a text question answered",
    "a send whose answer is lost",
    "the settings screen shows",
    "turning notifications on",
    "a question pushed to the worker",
    "Deny from a pushed",
    "a real push",
    "the app shows a task processed",
    "unpairing from the settings",
    "the relay's files",
    "the app made requests",
];

/// The `PACERELLE_HOME` of every process `cargo xtask test` starts (`target/xtask/home`), set before its
/// first step.
static TEST_HOME: OnceLock<PathBuf> = OnceLock::new();

/// A command for `program` run from `dir`, with the test home once `cargo xtask test` has set one, and
/// without the variables `cargo run` set for xtask itself ([`forget_package_env`]).
fn command(dir: &Path, program: impl AsRef<OsStr>) -> Command {
    let mut command = Command::new(program);
    command.current_dir(dir);
    forget_package_env(&mut command);
    if let Some(home) = TEST_HOME.get() {
        command.env("PACERELLE_HOME", home);
    }
    command
}

/// Removes from `command`'s environment the variables `cargo run` set for xtask itself
/// (`package_env::set_by_cargo`): a cargo started with them and one started without them would rebuild ring,
/// and everything above it, in turn — minutes per step.
pub(crate) fn forget_package_env(command: &mut Command) {
    for (name, _) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        if package_env::set_by_cargo(name) {
            command.env_remove(name);
        }
    }
}

/// Prints a command, runs it from `dir` with inherited output, and fails unless it exits with 0.
fn run(dir: &Path, program: impl AsRef<OsStr>, args: &[&str]) -> Result<()> {
    run_with(dir, program, args, &[])
}

/// [`run`] with these variables set for the program (shown before the command line).
fn run_with(dir: &Path, program: impl AsRef<OsStr>, args: &[&str], envs: &[(&str, &str)]) -> Result<()> {
    let program = program.as_ref();
    let shown = Path::new(program)
        .strip_prefix(dir)
        .map_or(program, |p| p.as_os_str());
    let vars: String = envs.iter().map(|(k, v)| format!("{k}={v} ")).collect();
    let line = format!("{vars}{} {}", shown.to_string_lossy(), args.join(" "));
    println!("$ {line}");
    let status = command(dir, program)
        .args(args)
        .envs(envs.iter().copied())
        .status()
        .with_context(|| format!("could not start `{}`", shown.to_string_lossy()))?;
    if !status.success() {
        bail!("`{line}` {status}");
    }
    Ok(())
}

fn main() -> ExitCode {
    match try_main() {
        Ok(code) => code,
        Err(err) => {
            eprintln!("xtask: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn try_main() -> Result<ExitCode> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root();
    match args.first().map(String::as_str) {
        Some("test") if args.get(1).is_some_and(|a| a == "--quick") => quick(&root),
        Some("test") => test_all(&root, &args[1..]),
        Some("check-history") => match args.get(1) {
            Some(base) => check_history(&root, base),
            None => bail!("check-history needs a base commit, e.g. `cargo xtask check-history main~10`"),
        },
        Some("bench") if args.get(1).is_some_and(|a| a == "--load") => {
            run(
                &root,
                "cargo",
                &[
                    "build",
                    "--release",
                    "-p",
                    "pacerelle-cli",
                    "-p",
                    "pacerelle-load",
                ],
            )?;
            let load = root
                .join("target/release")
                .join(format!("pacerelle-load{}", std::env::consts::EXE_SUFFIX));
            let args: Vec<&str> = args[2..]
                .iter()
                .map(String::as_str)
                .filter(|a| *a != "--")
                .collect();
            run(&root, &load, &args)?;
            Ok(ExitCode::SUCCESS)
        }
        Some("bench") => {
            let mut cmd = vec!["bench", "-p", "pacerelle-client", "--bench", "relay"];
            if args.len() > 1 {
                cmd.push("--");
                cmd.extend(args[1..].iter().map(String::as_str).filter(|a| *a != "--"));
            }
            run(&root, "cargo", &cmd)?;
            Ok(ExitCode::SUCCESS)
        }
        Some("fuzz") => {
            let mut cmd = vec!["run", "--release", "-p", "pacerelle-fuzz", "--"];
            cmd.extend(args[1..].iter().map(String::as_str));
            run(&root, "cargo", &cmd)?;
            Ok(ExitCode::SUCCESS)
        }
        Some("soak") => {
            let args: Vec<&str> = args[1..].iter().map(String::as_str).collect();
            soak_run(&root, "release", &args)?;
            Ok(ExitCode::SUCCESS)
        }
        Some("dist") => dist::task(&root, &args[1..]),
        Some("help" | "-h" | "--help") => {
            print!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        Some(other) => bail!("unknown task `{other}`\n\n{USAGE}"),
        None => bail!("no task given\n\n{USAGE}"),
    }
}

/// The output of `git args…` in `root`, or an error naming the command.
fn git(root: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .current_dir(root)
        .args(args)
        .output()
        .context("could not start git")?;
    if !out.status.success() {
        bail!(
            "`git {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The workspace package a path of the tree belongs to: the member folder that holds it, the longest one
/// (`pacerelle-ffi/uniffi-bindgen` before `pacerelle-ffi`), read from the workspace manifest.
fn packages_of(root: &Path, paths: &[String]) -> Result<Vec<String>> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).context("cannot read Cargo.toml")?;
    let members: Vec<&str> = manifest
        .split("members = [")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .map(|list| list.split('"').skip(1).step_by(2).collect())
        .unwrap_or_default();
    let mut packages = Vec::new();
    for path in paths {
        let Some(member) = members
            .iter()
            .filter(|m| path.starts_with(&format!("{m}/")))
            .max_by_key(|m| m.len())
        else {
            continue;
        };
        let text = std::fs::read_to_string(root.join(member).join("Cargo.toml")).unwrap_or_default();
        let name = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("name = \""))
            .and_then(|l| l.strip_suffix('"'));
        if let Some(name) = name
            && !packages.iter().any(|p| p == name)
        {
            packages.push(name.to_string());
        }
    }
    Ok(packages)
}

/// `cargo xtask test --quick`: fmt, then clippy and `cargo test` of the workspace crates whose files differ
/// from HEAD (edited, staged or new). Not a substitute for `cargo xtask test`: the crates that depend on a
/// changed one are not tested, nor are the Python, Kotlin and web suites.
fn quick(root: &Path) -> Result<ExitCode> {
    let mut paths: Vec<String> = git(root, &["diff", "--name-only", "HEAD"])?
        .lines()
        .map(str::to_string)
        .collect();
    paths.extend(
        git(root, &["ls-files", "--others", "--exclude-standard"])?
            .lines()
            .map(str::to_string),
    );
    let packages = packages_of(root, &paths)?;
    run(root, "cargo", &["fmt", "--all", "--check"])?;
    if packages.is_empty() {
        println!("xtask: no workspace crate changed since HEAD: nothing more to check");
        return Ok(ExitCode::SUCCESS);
    }
    println!("xtask: changed since HEAD: {}", packages.join(", "));
    let selected: Vec<&str> = packages.iter().flat_map(|p| ["-p", p.as_str()]).collect();
    let mut clippy = vec!["clippy"];
    clippy.extend(&selected);
    clippy.extend(["--all-targets", "--", "-D", "warnings"]);
    run(root, "cargo", &clippy)?;
    let mut test = vec!["test"];
    test.extend(&selected);
    run(root, "cargo", &test)?;
    Ok(ExitCode::SUCCESS)
}

/// `cargo xtask check-history BASE`: checks out every commit of `BASE..HEAD`, oldest first, in one detached
/// worktree (`target/xtask/history`, its own target folder beside it so that the main one stays warm) and
/// runs `cargo check --workspace --all-targets --locked` there. Fails naming the commits that do not build.
fn check_history(root: &Path, base: &str) -> Result<ExitCode> {
    let range = format!("{base}..HEAD");
    let commits: Vec<String> = git(root, &["rev-list", "--reverse", &range])?
        .lines()
        .map(str::to_string)
        .collect();
    if commits.is_empty() {
        println!("xtask: no commit in {range}");
        return Ok(ExitCode::SUCCESS);
    }
    let tree = root.join("target/xtask/history");
    let tree_text = tree.to_string_lossy().into_owned();
    if !tree.join(".git").exists() {
        // A worktree left by an earlier run whose folder was removed is pruned first.
        git(root, &["worktree", "prune"])?;
        git(root, &["worktree", "add", "--detach", &tree_text, &commits[0]])?;
    }
    let target = root.join("target/xtask/history-target");
    let mut broken = Vec::new();
    for (n, commit) in commits.iter().enumerate() {
        let title = git(root, &["log", "-1", "--format=%h %s", commit])?;
        let title: String = title.trim().chars().take(100).collect();
        println!("\nxtask: [{}/{}] {title}", n + 1, commits.len());
        git(&tree, &["checkout", "--quiet", "--detach", commit])?;
        let mut check = Command::new("cargo");
        forget_package_env(&mut check);
        let status = check
            .current_dir(&tree)
            .args(["check", "--workspace", "--all-targets", "--locked", "--quiet"])
            .env("CARGO_TARGET_DIR", &target)
            .status()
            .context("could not start cargo")?;
        if !status.success() {
            println!("xtask: {title}: does not build");
            broken.push(title);
        }
    }
    println!();
    for title in &broken {
        println!("xtask: does not build: {title}");
    }
    println!("{} passed, {} failed", commits.len() - broken.len(), broken.len());
    Ok(if broken.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The workspace root: the folder above this crate's.
fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

fn step_names() -> String {
    STEPS.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
}

/// The steps `--only` and `--skip` select, in table order.
fn select(args: &[String]) -> Result<Vec<&'static Step>> {
    let (mut only, mut skip) = (Vec::new(), Vec::new());
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let (flag, value) = match arg.split_once('=') {
            Some((flag, value)) => (flag, Some(value.to_string())),
            None => (arg.as_str(), None),
        };
        let list = match flag {
            "--only" => &mut only,
            "--skip" => &mut skip,
            _ => bail!("unknown argument `{arg}`\n\n{USAGE}"),
        };
        let value = match value {
            Some(value) => value,
            None => args
                .next()
                .cloned()
                .with_context(|| format!("{flag} needs a step name"))?,
        };
        for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if !STEPS.iter().any(|s| s.name == name) {
                bail!("no step named `{name}` (steps: {})", step_names());
            }
            list.push(name.to_string());
        }
    }
    let wanted = |s: &&Step| only.is_empty() || only.iter().any(|n| n == s.name);
    let kept = |s: &&Step| !skip.iter().any(|n| n == s.name);
    Ok(STEPS.iter().filter(wanted).filter(kept).collect())
}

enum Outcome {
    /// How long it took, and how many tests its output reports as passed (when it runs side by side).
    Passed(Duration, Option<u64>),
    Failed(Duration),
    Skipped(String),
}

/// `cargo xtask test [--only STEP]... [--skip STEP]... [--jobs N] [--timings]`.
fn test_all(root: &Path, args: &[String]) -> Result<ExitCode> {
    if args.iter().any(|a| a == "--list") {
        for step in STEPS {
            println!(
                "{}{}",
                step.name,
                step.needs.map(|d| format!(" (needs {d}/)")).unwrap_or_default()
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let timings = args.iter().any(|a| a == "--timings");
    TIMINGS.get_or_init(|| timings);
    // `--in-lane`: one step run by a side-by-side run, its output going to the step's log.
    let in_lane = args.iter().any(|a| a == "--in-lane");
    let mut jobs = 2;
    let mut rest = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--timings" | "--in-lane" => {}
            "--jobs" => {
                jobs = iter
                    .next()
                    .and_then(|n| n.parse::<usize>().ok())
                    .filter(|n| *n > 0)
                    .context("--jobs needs a number of steps, 1 or more")?;
            }
            _ => rest.push(arg.clone()),
        }
    }
    let steps = select(&rest)?;
    // The suites' agents keep a roster mark in `PACERELLE_HOME`, else in the user's config folder: give every
    // process the steps start a home of its own under `target/`, so that a test run writes nothing in the
    // real one. The tests that need a home of their own still set it themselves.
    let home = root.join("target/xtask/home");
    std::fs::create_dir_all(&home).with_context(|| format!("cannot create {}", home.display()))?;
    TEST_HOME.get_or_init(|| home);
    let mut outcomes = Vec::new();
    let mut runnable = Vec::new();
    for step in steps {
        if let Some(dir) = step.needs
            && !root.join(dir).is_dir()
        {
            println!("xtask: skipping {}: {dir}/ does not exist yet", step.name);
            outcomes.push((step.name, Outcome::Skipped(format!("{dir}/ not found"))));
        } else {
            runnable.push(step);
        }
    }
    if in_lane {
        let [step] = runnable[..] else {
            bail!("--in-lane runs exactly one step");
        };
        return Ok(match (step.run)(root) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                println!("xtask: {} failed: {err:#}", step.name);
                ExitCode::FAILURE
            }
        });
    }
    if jobs == 1 {
        one_after_another(root, &runnable, &mut outcomes);
    } else {
        side_by_side(root, &runnable, jobs, timings, &mut outcomes)?;
    }
    // The summary in table order, whatever order the steps ended in.
    let rank = |name: &str| STEPS.iter().position(|s| s.name == name).unwrap_or(0);
    outcomes.sort_by_key(|(name, _)| if *name == "build" { 1 } else { rank(name) * 2 });

    println!("\nxtask: summary");
    let (mut passed, mut failed, mut tests) = (0, 0, 0);
    for (name, outcome) in &outcomes {
        match outcome {
            Outcome::Passed(d, count) => {
                passed += 1;
                tests += count.unwrap_or(0);
                let count = count.map(|n| format!(", {n} tests")).unwrap_or_default();
                println!("xtask: {name} passed ({:.1} s{count})", d.as_secs_f64());
            }
            Outcome::Failed(d) => {
                failed += 1;
                println!("xtask: {name} failed ({:.1} s)", d.as_secs_f64());
            }
            Outcome::Skipped(why) => println!("xtask: {name} skipped ({why})"),
        }
    }
    if tests > 0 {
        println!("xtask: {tests} tests passed in all");
    }
    println!("{passed} passed, {failed} failed");
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `--jobs 1`: each step in table order, in this process, its output as it comes.
fn one_after_another(root: &Path, steps: &[&'static Step], outcomes: &mut Vec<(&'static str, Outcome)>) {
    for step in steps {
        println!("\nxtask: ── {} ──", step.name);
        let start = Instant::now();
        let result = (step.run)(root);
        let elapsed = start.elapsed();
        match result {
            Ok(()) => outcomes.push((step.name, Outcome::Passed(elapsed, None))),
            Err(err) => {
                println!("xtask: {} failed: {err:#}", step.name);
                outcomes.push((step.name, Outcome::Failed(elapsed)));
            }
        }
    }
}

/// The default: `fmt`, then the build every later step shares ([`build_binaries`]), then the other steps
/// `jobs` at a time, in table order, two of one group never together. Each runs in a process of its own
/// (`cargo xtask test --in-lane --only STEP`) with its output in `target/xtask/logs/STEP.log`, printed whole
/// when the step ends, so that the outputs of two steps never interleave. On two cores this is the gain:
/// the test binaries spend most of their time waiting on sockets and timers, clippy compiles beside them.
fn side_by_side(
    root: &Path,
    steps: &[&'static Step],
    jobs: usize,
    timings: bool,
    outcomes: &mut Vec<(&'static str, Outcome)>,
) -> Result<()> {
    let mut queue: Vec<&'static Step> = Vec::new();
    for step in steps {
        if step.name == "fmt" {
            one_after_another(root, &[step], outcomes);
        } else {
            queue.push(step);
        }
    }
    if queue.iter().any(|s| s.built) {
        println!("\nxtask: ── build ──");
        let start = Instant::now();
        match build_binaries(root) {
            Ok(()) => outcomes.push(("build", Outcome::Passed(start.elapsed(), None))),
            Err(err) => {
                println!("xtask: the build failed: {err:#}");
                outcomes.push(("build", Outcome::Failed(start.elapsed())));
                queue.retain(|s| {
                    if s.built {
                        outcomes.push((s.name, Outcome::Skipped("the build failed".into())));
                    }
                    !s.built
                });
            }
        }
    }
    let logs = root.join("target/xtask/logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("cannot create {}", logs.display()))?;
    let exe = std::env::current_exe().context("cannot find xtask's own program")?;
    struct Board {
        queue: Vec<&'static Step>,
        groups: Vec<&'static str>,
        done: Vec<(&'static str, Outcome)>,
    }
    let board = std::sync::Mutex::new(Board {
        queue,
        groups: Vec::new(),
        done: Vec::new(),
    });
    let changed = std::sync::Condvar::new();
    let lane = || -> Result<()> {
        loop {
            let step = {
                let mut b = board.lock().map_err(|_| anyhow::anyhow!("a lane panicked"))?;
                loop {
                    if b.queue.is_empty() {
                        return Ok(());
                    }
                    let free = b
                        .queue
                        .iter()
                        .position(|s| s.group.is_none_or(|g| !b.groups.contains(&g)));
                    if let Some(i) = free {
                        let step = b.queue.remove(i);
                        b.groups.extend(step.group);
                        break step;
                    }
                    b = changed.wait(b).map_err(|_| anyhow::anyhow!("a lane panicked"))?;
                }
            };
            let log = logs.join(format!("{}.log", step.name));
            println!("xtask: {} started (output in {})", step.name, log.display());
            let start = Instant::now();
            let status = (|| -> Result<std::process::ExitStatus> {
                let out = std::fs::File::create(&log)
                    .with_context(|| format!("cannot create {}", log.display()))?;
                let err = out.try_clone()?;
                let mut child = command(root, &exe);
                child.args(["test", "--in-lane", "--only", step.name]);
                if timings {
                    child.arg("--timings");
                }
                let status = child
                    .stdout(out)
                    .stderr(err)
                    .status()
                    .context("could not start xtask")?;
                Ok(status)
            })();
            let elapsed = start.elapsed();
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let outcome = match &status {
                Ok(status) if status.success() => Outcome::Passed(elapsed, tests_passed(&text)),
                _ => Outcome::Failed(elapsed),
            };
            {
                // One step's whole output at a time.
                let mut stdout = std::io::stdout().lock();
                use std::io::Write as _;
                let verdict = if matches!(outcome, Outcome::Passed(..)) {
                    "passed"
                } else {
                    "failed"
                };
                let _ = writeln!(
                    stdout,
                    "\nxtask: ── {} ── {verdict} ({:.1} s)",
                    step.name,
                    elapsed.as_secs_f64()
                );
                let _ = stdout.write_all(text.as_bytes());
                if let Err(err) = &status {
                    let _ = writeln!(stdout, "xtask: {} failed: {err:#}", step.name);
                }
                let _ = stdout.flush();
            }
            let mut b = board.lock().map_err(|_| anyhow::anyhow!("a lane panicked"))?;
            b.groups.retain(|g| Some(*g) != step.group);
            b.done.push((step.name, outcome));
            changed.notify_all();
        }
    };
    std::thread::scope(|scope| -> Result<()> {
        let lanes: Vec<_> = (0..jobs).map(|_| scope.spawn(lane)).collect();
        for lane in lanes {
            lane.join().map_err(|_| anyhow::anyhow!("a lane panicked"))??;
        }
        Ok(())
    })?;
    let board = board
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a lane panicked"))?;
    outcomes.extend(board.done);
    Ok(())
}

/// How many tests a step's output reports as passed, summed over the test runners it uses: libtest (`test
/// result: ok. N passed`), pytest (`N passed` in its last line), node's runner (`# pass N` or `ℹ pass N`) and
/// Maven's Surefire (the total `Tests run: N, …` line, the one without a time). None when it names none.
fn tests_passed(log: &str) -> Option<u64> {
    let number_before = |text: &str, word: &str| -> Option<u64> {
        let head = text.split(word).next()?.trim_end();
        let digits: String = head.chars().rev().take_while(char::is_ascii_digit).collect();
        digits.chars().rev().collect::<String>().parse().ok()
    };
    let mut total = None;
    let mut add = |n: u64| *total.get_or_insert(0) += n;
    let mut surefire = None;
    for line in log.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("test result: ") {
            if let Some(n) = rest
                .split_once(". ")
                .and_then(|(_, r)| number_before(r, " passed"))
            {
                add(n);
            }
        } else if line.starts_with('=') && line.contains(" passed") {
            if let Some(n) = number_before(line, " passed") {
                add(n);
            }
        } else if let Some(n) = line
            .strip_prefix("# pass ")
            .or_else(|| line.strip_prefix("ℹ pass "))
            .and_then(|n| n.trim().parse().ok())
        {
            add(n);
        } else if let Some(rest) = line
            .trim_start_matches("[INFO] ")
            .trim_start_matches("[ERROR] ")
            .strip_prefix("Tests run: ")
            && !line.contains("Time elapsed")
        {
            surefire = rest.split(',').next().and_then(|n| n.trim().parse::<u64>().ok());
        }
    }
    if let Some(n) = surefire {
        add(n);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::tests_passed;

    #[test]
    fn the_test_count_adds_every_runner_s_summary_lines() {
        let log = "\
running 3 tests
test result: ok. 77 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 71.09s
test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s
test result: ok. 5 passed; 0 failed; 2 ignored; 0 measured; 0 filtered out; finished in 2.17s
======================== 1 failed, 41 passed, 2 skipped in 30.12s ========================
# pass 12
ℹ pass 3
[INFO] Tests run: 4, Failures: 0, Errors: 0, Skipped: 0, Time elapsed: 1.2 s - in RelayTest
[INFO] Tests run: 9, Failures: 0, Errors: 0, Skipped: 0
";
        assert_eq!(tests_passed(log), Some(77 + 5 + 41 + 12 + 3 + 9));
        assert_eq!(tests_passed("Finished `dev` profile\nno tests here\n"), None);
    }
}
