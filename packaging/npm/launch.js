"use strict";
// Starts one of Pacerelle's programs from the platform package that npm chose for this machine through
// optionalDependencies (`@pacerelle/linux-x64`, …: each holds `bin/pacerelle` and `bin/pacerelle-mcp` and
// declares its `os`, `cpu` and `libc`, so npm installs only the one that fits). No download at install time.
// Standard input and output are the program's own (an MCP host speaks to pacerelle-mcp through them), and
// its exit status is this process's.

const { spawn } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");

const SCOPE = "@pacerelle/";

/** `linux-x64`, `darwin-arm64`, `linux-x64-musl`, …: what npm's `os`, `cpu` and `libc` fields select on. */
function platformKey() {
  // Only for tests of this launcher: pretend to run on another platform.
  const forced = process.env.PACERELLE_NPM_PLATFORM;
  if (forced) return forced;
  let key = `${process.platform}-${process.arch}`;
  if (process.platform === "linux" && !isGlibc()) key += "-musl";
  return key;
}

function isGlibc() {
  try {
    process.report.excludeNetwork = true;
    return Boolean(process.report.getReport().header.glibcVersionRuntime);
  } catch {
    return true;
  }
}

function fail(message) {
  process.stderr.write(`${message}\n`);
  process.exit(1);
}

/** Runs `program` (`pacerelle` or `pacerelle-mcp`) with this process's arguments. */
function run(program) {
  const own = require(path.join(__dirname, "..", "package.json"));
  const key = platformKey();
  const shipped = Object.keys(own.optionalDependencies || {})
    .filter((name) => name.startsWith(SCOPE))
    .map((name) => name.slice(SCOPE.length));
  const crate = program === "pacerelle" ? "pacerelle-cli" : program;
  if (!shipped.includes(key)) {
    fail(
      `${own.name} ${own.version}: no ${program} binary for this platform (${key}). ` +
        `Prebuilt for: ${shipped.join(", ") || "none"}. ` +
        `Build it from source instead, with a Rust toolchain: cargo install --locked ${crate}`,
    );
  }
  let dir;
  try {
    dir = path.dirname(require.resolve(`${SCOPE}${key}/package.json`));
  } catch {
    fail(
      `${own.name} ${own.version}: the package ${SCOPE}${key}, which holds ${program} for this platform ` +
        `(${key}), is not installed. npm leaves it out when optional dependencies are omitted ` +
        `(--omit=optional, --no-optional): install ${own.name} again without that option.`,
    );
  }
  const exe = path.join(dir, "bin", program + (process.platform === "win32" ? ".exe" : ""));
  try {
    fs.accessSync(exe, fs.constants.X_OK);
  } catch {
    // A package manager that dropped the executable bit.
    try {
      fs.chmodSync(exe, 0o755);
    } catch {}
  }
  const child = spawn(exe, process.argv.slice(2), { stdio: "inherit", windowsHide: true });
  const forward = (signal) => () => child.kill(signal);
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, forward(signal));
  child.on("error", (e) => fail(`${own.name}: cannot start ${exe}: ${e.message}`));
  child.on("exit", (code, signal) => {
    if (signal) {
      // The same end as the program's: killed by that signal.
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
    } else {
      process.exit(code ?? 1);
    }
  });
}

module.exports = { run, platformKey };
