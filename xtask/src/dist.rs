//! `cargo xtask dist`: the distributable artefacts, from one release build, into `dist/` (git-ignored):
//!
//! - `pacerelle-<version>-<target>.tar.gz`: the stripped `pacerelle` and `pacerelle-mcp`; on Linux they are
//!   linked through zig (`cargo-zigbuild` and `ziglang` from PyPI) against glibc 2.17, so that they run on
//!   any distribution of the last ten years;
//! - `install.sh`: fetches that archive from the release's base URL, checks it against `SHA256SUMS` and
//!   installs both programs into `~/.local/bin` (or `--prefix DIR`);
//! - the npm packages: `@pacerelle/mcp-server` and `@pacerelle/cli` (launchers), and the platform package
//!   `@pacerelle/<platform>` with both binaries, chosen through `optionalDependencies`;
//! - the wheels: `pacerelle` (the Python SDK, abi3, built by maturin with zig for manylinux2014, which
//!   maturin's auditwheel check confirms), and `pacerelle-cli` and `pacerelle-mcp` (the two programs as
//!   commands, for `pipx install` and `uvx`);
//! - the Kotlin SDK, `org.pacerelle:pacerelle-kotlin`, installed by `mvn install` into the local Maven
//!   repository: the generated binding and the native library for the JVM of this platform;
//! - `SHA256SUMS` of every file above.
//!
//! The `dist` step of `cargo xtask test` packages the debug build the same way (target/dist-test/) and uses
//! each artefact as a user would (`packaging/tests/test_dist.py`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::{command, run};

/// The tools venv of `dist` and its test step, with pinned tools from PyPI.
const VENV: &str = "target/dist-tools/venv";
/// What `cargo xtask dist` builds with: maturin for the SDK wheel, zig and cargo-zigbuild for the programs.
const DIST_TOOLS: &[&str] = &[
    "maturin==1.16.0",
    "ziglang==0.17.1",
    "cargo-zigbuild==0.24.0",
    "auditwheel==6.8.2",
];
/// What the test step needs: maturin for the SDK wheel of the debug build, pytest, the official MCP client.
/// Both check the command wheels' tags with auditwheel.
const TEST_TOOLS: &[&str] = &[
    "maturin==1.16.0",
    "pytest==9.2.0",
    "mcp==1.30.0",
    "auditwheel==6.8.2",
];
/// The oldest glibc the release programs and the SDK wheel are linked against (manylinux2014).
const GLIBC: &str = "2.17";
/// The two programs every artefact carries.
const PROGRAMS: [&str; 2] = ["pacerelle", "pacerelle-mcp"];

/// `cargo xtask dist [--base-url URL] [--no-kotlin]`.
pub fn task(root: &Path, args: &[String]) -> Result<ExitCode> {
    let version = workspace_version(root)?;
    let mut base_url = format!("https://github.com/pacerelle/pacerelle/releases/download/v{version}");
    let mut kotlin = true;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--base-url" => base_url = args.next().cloned().context("--base-url needs a URL")?,
            "--no-kotlin" => kotlin = false,
            other => bail!("unknown argument `{other}` (dist takes --base-url URL and --no-kotlin)"),
        }
    }
    let started = Instant::now();
    let commit = crate::git(root, &["rev-parse", "--short=12", "HEAD"])?
        .trim()
        .to_string();
    let triple = host_triple()?;
    let python = tools(root, DIST_TOOLS)?;
    let out = root.join("dist");
    fresh_dir(&out)?;

    // One release build of both programs, stripped, with the commit every artefact reports.
    let zig = triple.ends_with("-linux-gnu");
    let mut build = if zig {
        let mut c = command(root, python.with_file_name("cargo-zigbuild"));
        c.args(["zigbuild", "--target", &format!("{triple}.{GLIBC}")]);
        c
    } else {
        let mut c = command(root, "cargo");
        c.arg("build");
        c
    };
    build
        .args([
            "--release",
            "--locked",
            "-p",
            "pacerelle-cli",
            "-p",
            "pacerelle-mcp",
        ])
        .env("PACERELLE_COMMIT", &commit)
        .env("CARGO_PROFILE_RELEASE_STRIP", "symbols")
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("PATH", venv_path(&python)?);
    println!("$ {build:?}");
    let status = build.status().context("could not start the release build")?;
    if !status.success() {
        bail!("the release build failed ({status})");
    }
    let bins = if zig {
        root.join("target").join(&triple).join("release")
    } else {
        root.join("target/release")
    };
    package_programs(root, &bins, &out, &version, &triple, &base_url)?;
    check_wheel_tags(root, &python, &out)?;

    // The Python SDK: abi3, linked through zig for manylinux2014; maturin refuses a tag the symbols break.
    let mut wheel = vec!["build", "--release", "-m", "pacerelle-py/Cargo.toml", "--out"];
    let out_text = out.to_string_lossy().into_owned();
    wheel.push(&out_text);
    if zig {
        wheel.extend(["--zig", "--compatibility", "manylinux2014"]);
    }
    let mut maturin = command(root, python.with_file_name("maturin"));
    maturin.args(&wheel).env("PATH", venv_path(&python)?);
    println!("$ maturin {}", wheel.join(" "));
    if !maturin.status().context("could not start maturin")?.success() {
        bail!("building the pacerelle wheel failed");
    }
    if kotlin {
        kotlin_artifact(root, "release", None)?;
    }
    sums(&out)?;
    report(&out, &bins)?;
    println!(
        "xtask: dist/ holds version {version} ({commit}) for {triple}, made in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// The `dist` step of `cargo xtask test`: the debug build packaged as `cargo xtask dist` packages the release
/// one (the archive, `install.sh`, the npm packages, the wheels, the Kotlin artifact), then
/// `packaging/tests/test_dist.py` uses each as a user would, with no Rust toolchain on PATH.
pub fn step(root: &Path) -> Result<()> {
    // The programs the earlier steps built, with the same package set (so nothing is built again).
    crate::build_binaries(root)?;
    let version = workspace_version(root)?;
    let triple = host_triple()?;
    let python = tools(root, TEST_TOOLS)?;
    let out = root.join("target/dist-test/dist");
    fresh_dir(&out)?;
    let bins = root.join("target/debug");
    // The tests give install.sh its base URL (a local server's).
    package_programs(root, &bins, &out, &version, &triple, "")?;
    check_wheel_tags(root, &python, &out)?;
    // The Kotlin artifact before the wheel, while the build above is fresh: run after maturin's build, the
    // same cargo build recompiled ring and everything above it here (about 2 minutes).
    let repository = kotlin_for_tests(root)?;
    // The SDK wheel of the debug build (the `py` step's build, reused): maturin checks its manylinux tag.
    let out_text = out.to_string_lossy().into_owned();
    let args = [
        "build",
        "--profile",
        "dev",
        "-m",
        "pacerelle-py/Cargo.toml",
        "--out",
        &out_text,
    ];
    run(root, python.with_file_name("maturin"), &args)?;
    sums(&out)?;
    report(&out, &bins)?;

    let node = which("node").context("node is needed for the npm packages")?;
    let mut pytest = command(root, &python);
    pytest
        .args(["-m", "pytest", "-v", "-p", "no:cacheprovider", "packaging/tests"])
        .env("PACERELLE_DIST", &out)
        .env("PACERELLE_DIST_VERSION", &version)
        .env("PACERELLE_DIST_TARGET", &triple)
        .env("PACERELLE_DIST_BIN", &bins)
        .env("PACERELLE_DIST_MAVEN", &repository)
        .env("PACERELLE_DIST_NODE", &node)
        .env("PACERELLE_DIST_NPM_TOOLS", root.join("target/dist-tools/npm"));
    println!(
        "$ PACERELLE_DIST={} python -m pytest packaging/tests",
        out.display()
    );
    let status = pytest.status().context("could not start pytest")?;
    if let Ok(timings) = std::fs::read_to_string(root.join("target/dist-test/timings.json")) {
        println!("xtask: how long each user path took, in seconds: {timings}");
    }
    if !status.success() {
        bail!("packaging/tests failed ({status})");
    }
    Ok(())
}

/// Everything made from the two programs in `bins`: the archive, `install.sh`, the npm packages and the two
/// command wheels, in `out`.
fn package_programs(
    root: &Path,
    bins: &Path,
    out: &Path,
    version: &str,
    triple: &str,
    base_url: &str,
) -> Result<()> {
    // The archive: one folder named like it, the two programs stripped.
    let name = format!("pacerelle-{version}-{triple}");
    let staging = root.join("target/dist-stage");
    fresh_dir(&staging)?;
    let folder = staging.join(&name);
    std::fs::create_dir_all(&folder)?;
    for program in PROGRAMS {
        let from = bins.join(format!("{program}{}", std::env::consts::EXE_SUFFIX));
        let to = folder.join(format!("{program}{}", std::env::consts::EXE_SUFFIX));
        std::fs::copy(&from, &to).with_context(|| format!("cannot copy {}", from.display()))?;
        if which("strip").is_some() {
            run(root, "strip", &[&to.to_string_lossy()])?;
        }
    }
    for file in ["README.md", "CHANGELOG.md"] {
        std::fs::copy(root.join(file), folder.join(file)).with_context(|| format!("cannot copy {file}"))?;
    }
    let archive = out.join(format!("{name}.tar.gz"));
    let archive_text = archive.to_string_lossy().into_owned();
    let staging_text = staging.to_string_lossy().into_owned();
    let mtime = format!(
        "--mtime=@{}",
        crate::git(root, &["log", "-1", "--format=%ct"])?.trim()
    );
    run(
        root,
        "tar",
        &[
            "--sort=name",
            "--owner=0",
            "--group=0",
            "--numeric-owner",
            &mtime,
            "-czf",
            &archive_text,
            "-C",
            &staging_text,
            &name,
        ],
    )?;

    // install.sh, with this release's version and base URL as its defaults.
    let script =
        std::fs::read_to_string(root.join("packaging/install.sh")).context("packaging/install.sh")?;
    let script = script
        .replace("@VERSION@", version)
        .replace("@BASE_URL@", base_url);
    write_executable(&out.join("install.sh"), &script)?;

    // The npm packages, for this platform only: the one these binaries run on.
    let key = npm_platform(triple)?;
    let npm = root.join("target/dist-stage/npm");
    let folder_text = folder.to_string_lossy().into_owned();
    let tarballs = output(
        root,
        "node",
        &[
            "packaging/npm/stage.mjs",
            "--version",
            version,
            "--out",
            &npm.to_string_lossy(),
            "--platform",
            &format!("{key}={folder_text}"),
        ],
    )?;
    for tarball in tarballs.lines().map(Path::new) {
        let file = tarball.file_name().context("a tarball's name")?;
        std::fs::copy(tarball, out.join(file))?;
    }

    // The programs as commands for Python users: `pipx install pacerelle-cli`, `uvx pacerelle-mcp`.
    for (wheel, program, summary) in [
        (
            "pacerelle-cli",
            "pacerelle",
            "The pacerelle command: a relay, an agent and a pairing link in one command, devices, questions before acting",
        ),
        (
            "pacerelle-mcp",
            "pacerelle-mcp",
            "Pacerelle's MCP server: an end-to-end encrypted inbox of tasks from your phone for your MCP host",
        ),
    ] {
        let path = folder.join(program).to_string_lossy().into_owned();
        run(
            root,
            "python3",
            &[
                "packaging/python/bin_wheel.py",
                "--name",
                wheel,
                "--version",
                version,
                "--summary",
                summary,
                "--out",
                &out.to_string_lossy(),
                &path,
            ],
        )?;
    }
    Ok(())
}

/// The command wheels' platform tags, checked by auditwheel: `auditwheel show` must find each wheel
/// consistent with the tag in its name (bin_wheel.py reads the tag from the binaries' glibc symbols; this is
/// the reference tool's reading of the same symbols).
fn check_wheel_tags(root: &Path, python: &Path, out: &Path) -> Result<()> {
    let auditwheel = python.with_file_name("auditwheel");
    for entry in std::fs::read_dir(out)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let Some(tag) = name
            .strip_suffix(".whl")
            .and_then(|n| n.split_once("-py3-none-"))
            .map(|(_, tag)| tag.to_string())
        else {
            continue;
        };
        let shown = output(
            root,
            &auditwheel.to_string_lossy(),
            &["show", &out.join(&name).to_string_lossy()],
        )?;
        let words: String = shown.split_whitespace().collect::<Vec<_>>().join(" ");
        if !words.contains(&format!("consistent with the following platform tag: \"{tag}\"")) {
            bail!("auditwheel does not find {name} consistent with {tag}:\n{shown}");
        }
    }
    Ok(())
}

/// The Kotlin SDK artifact of the `profile` build (`release` or `debug`): the binding generated from the
/// library, then `mvn install` (tests skipped: the `kotlin` step runs them) puts the jar — the binding and the
/// library for this platform's JVM — into the local Maven repository, or into `repository` when given.
fn kotlin_artifact(root: &Path, profile: &str, repository: Option<&Path>) -> Result<()> {
    if profile == "release" {
        let build = [
            "build",
            "--release",
            "-p",
            "pacerelle-ffi",
            "-p",
            "uniffi-bindgen",
        ];
        run(root, "cargo", &build)?;
    } else {
        crate::build_binaries(root)?;
    }
    let file = format!(
        "{}pacerelle_ffi{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    let built = root.join("target").join(profile).join(&file);
    // The jar takes the library from a folder of its own, stripped (the release profile keeps line tables:
    // 42 MB instead of a few).
    let target = root.join("target/dist-stage/kotlin-library");
    fresh_dir(&target)?;
    let library = target.join(&file);
    std::fs::copy(&built, &library).with_context(|| format!("cannot copy {}", built.display()))?;
    if which("strip").is_some() {
        run(root, "strip", &["--strip-unneeded", &library.to_string_lossy()])?;
    }
    let bindings = root.join("target/dist-stage/kotlin");
    fresh_dir(&bindings)?;
    let (lib, out) = (
        library.to_string_lossy().into_owned(),
        bindings.to_string_lossy().into_owned(),
    );
    // The binding is generated from the library as built (its metadata symbols all there).
    let bindgen = root.join("target").join(profile).join("uniffi-bindgen");
    run(
        root,
        &bindgen,
        &[
            "generate",
            &built.to_string_lossy(),
            "--language",
            "kotlin",
            "--out-dir",
            &out,
            "--no-format",
        ],
    )?;
    let mut args = vec![
        "--batch-mode".to_string(),
        "--quiet".into(),
        "--file".into(),
        "pacerelle-ffi/kotlin/pom.xml".into(),
        "install".into(),
        "-DskipTests".into(),
        format!("-Dpacerelle.target={}", target.display()),
        format!("-Dpacerelle.bindings={out}"),
        format!("-Dpacerelle.library={lib}"),
    ];
    if let Some(repository) = repository {
        args.push(format!("-Dmaven.repo.local={}", repository.display()));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(root, "mvn", &args)
}

/// The local Maven repository of the tests' consumer project (`target/dist-test/m2`): the user's own local
/// repository hard-linked (what the `kotlin` step downloaded, so nothing is fetched again) without any
/// `org.pacerelle` artifact, then the SDK of the debug build installed into it by `mvn install`.
fn kotlin_for_tests(root: &Path) -> Result<PathBuf> {
    let repository = root.join("target/dist-test/m2");
    fresh_dir(&repository)?;
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
    let user = home.join(".m2/repository");
    if user.is_dir() {
        let from = format!("{}/.", user.display());
        let to = repository.to_string_lossy().into_owned();
        if run(root, "cp", &["-al", &from, &to]).is_err() {
            run(root, "cp", &["-a", &from, &to])?;
        }
        match std::fs::remove_dir_all(repository.join("org/pacerelle")) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
    }
    kotlin_artifact(root, "debug", Some(&repository))?;
    Ok(repository)
}

/// `SHA256SUMS` of every file in `out`, in the format `sha256sum --check` reads.
fn sums(out: &Path) -> Result<()> {
    let mut names: Vec<String> = std::fs::read_dir(out)?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "SHA256SUMS")
        .collect();
    names.sort();
    let mut args = vec!["--"];
    args.extend(names.iter().map(String::as_str));
    let listed = output(out, "sha256sum", &args)?;
    std::fs::write(out.join("SHA256SUMS"), listed)?;
    Ok(())
}

/// Prints the size of each program and of each file in `out`.
fn report(out: &Path, bins: &Path) -> Result<()> {
    let mb = |bytes: u64| bytes as f64 / 1_000_000.0;
    for program in PROGRAMS {
        let path = bins.join(program);
        println!(
            "xtask: {} {:.1} MB as built",
            path.display(),
            mb(std::fs::metadata(&path)?.len())
        );
    }
    let mut files: Vec<_> = std::fs::read_dir(out)?.filter_map(|e| e.ok()).collect();
    files.sort_by_key(|e| e.file_name());
    for file in files {
        println!(
            "xtask: {:>7.1} MB  {}",
            mb(file.metadata()?.len()),
            file.file_name().to_string_lossy()
        );
    }
    Ok(())
}

/// The venv of the packaging tools with `wanted` installed; returns its python.
fn tools(root: &Path, wanted: &[&str]) -> Result<PathBuf> {
    let venv = root.join(VENV);
    let python = venv.join("bin/python");
    if !python.exists() {
        run(root, "python3", &["-m", "venv", VENV])?;
    }
    let mut args = vec!["-m", "pip", "install", "--quiet", "--disable-pip-version-check"];
    args.extend(wanted);
    run(root, &python, &args)?;
    Ok(python)
}

/// PATH with the tools venv's `bin/` first (cargo-zigbuild runs `python3 -m ziglang` from it).
fn venv_path(python: &Path) -> Result<OsString> {
    let bin = python.parent().context("the venv's bin folder")?;
    let mut paths = vec![bin.to_path_buf()];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    Ok(std::env::join_paths(paths)?)
}

/// The workspace's version (`[workspace.package]` of the root manifest).
fn workspace_version(root: &Path) -> Result<String> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).context("cannot read Cargo.toml")?;
    manifest
        .split("[workspace.package]")
        .nth(1)
        .and_then(|rest| rest.lines().find_map(|l| l.trim().strip_prefix("version = \"")))
        .and_then(|v| v.strip_suffix('"'))
        .map(str::to_string)
        .context("no version in [workspace.package] of Cargo.toml")
}

/// The host's target triple, from `rustc -vV`.
fn host_triple() -> Result<String> {
    let out = Command::new("rustc")
        .arg("-vV")
        .output()
        .context("could not start rustc")?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(str::to_string)
        .context("rustc -vV names no host")
}

/// The npm platform key (`process.platform-process.arch`, `-musl` for musl) of a Rust target triple.
fn npm_platform(triple: &str) -> Result<&'static str> {
    Ok(match triple {
        "x86_64-unknown-linux-gnu" => "linux-x64",
        "aarch64-unknown-linux-gnu" => "linux-arm64",
        "x86_64-apple-darwin" => "darwin-x64",
        "aarch64-apple-darwin" => "darwin-arm64",
        "x86_64-pc-windows-msvc" => "win32-x64",
        other => bail!("no npm platform package for the target {other}"),
    })
}

/// A program on PATH.
fn which(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// Runs a command and returns its standard output; fails unless it exits with 0.
fn output(dir: &Path, program: &str, args: &[&str]) -> Result<String> {
    println!("$ {program} {}", args.join(" "));
    let out = command(dir, program)
        .args(args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("could not start `{program}`"))?;
    if !out.status.success() {
        bail!("`{program} {}` {}", args.join(" "), out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// An empty folder at `dir`.
fn fresh_dir(dir: &Path) -> Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("cannot remove {}", dir.display()));
        }
        _ => {}
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))
}

fn write_executable(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}
