// Stages and packs the npm packages from built binaries:
//
//   node packaging/npm/stage.mjs --version 0.1.0 --out DIR --platform linux-x64=BINDIR [--platform …]
//
// BINDIR holds `pacerelle` and `pacerelle-mcp` for that platform. Writes DIR/<package>/ for each platform
// package (`@pacerelle/linux-x64`: the two binaries, with `os`, `cpu` and `libc`) and for the two front
// packages (`@pacerelle/mcp-server`, `@pacerelle/cli`: the launcher, with exactly the staged platforms as
// optionalDependencies at the same version), then `npm pack`s each into DIR/tarballs/ and prints their paths.

import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));

// npm's `os`, `cpu` and `libc` of each platform package; the key is what the launcher computes.
const PLATFORMS = {
  "linux-x64": { os: ["linux"], cpu: ["x64"], libc: ["glibc"] },
  "linux-arm64": { os: ["linux"], cpu: ["arm64"], libc: ["glibc"] },
  "darwin-x64": { os: ["darwin"], cpu: ["x64"] },
  "darwin-arm64": { os: ["darwin"], cpu: ["arm64"] },
  "win32-x64": { os: ["win32"], cpu: ["x64"] },
};
const FRONTS = ["mcp-server", "cli"];
const PROGRAMS = ["pacerelle", "pacerelle-mcp"];

function parse(argv) {
  const args = { platforms: [] };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    if (flag === "--version") args.version = value;
    else if (flag === "--out") args.out = path.resolve(value);
    else if (flag === "--platform") {
      const [key, dir] = value.split("=");
      if (!PLATFORMS[key] || !dir) throw new Error(`--platform KEY=DIR, KEY one of ${Object.keys(PLATFORMS)}`);
      args.platforms.push({ key, dir: path.resolve(dir) });
    } else throw new Error(`unknown argument ${flag}`);
  }
  if (!args.version || !args.out || args.platforms.length === 0) {
    throw new Error("usage: stage.mjs --version V --out DIR --platform KEY=BINDIR [--platform …]");
  }
  return args;
}

function writeJson(file, value) {
  fs.writeFileSync(file, `${JSON.stringify(value, null, 2)}\n`);
}

function stagePlatform(out, version, { key, dir }) {
  const pkg = path.join(out, key);
  fs.mkdirSync(path.join(pkg, "bin"), { recursive: true });
  const exe = key.startsWith("win32") ? ".exe" : "";
  for (const program of PROGRAMS) {
    const target = path.join(pkg, "bin", program + exe);
    fs.copyFileSync(path.join(dir, program + exe), target);
    fs.chmodSync(target, 0o755);
  }
  const front = JSON.parse(fs.readFileSync(path.join(here, "mcp-server", "package.json"), "utf8"));
  writeJson(path.join(pkg, "package.json"), {
    name: `@pacerelle/${key}`,
    version,
    description: `Pacerelle's programs (pacerelle, pacerelle-mcp) for ${key}; installed by @pacerelle/mcp-server and @pacerelle/cli`,
    license: front.license,
    repository: front.repository,
    ...PLATFORMS[key],
    files: ["bin/"],
    preferUnplugged: true,
  });
  fs.writeFileSync(
    path.join(pkg, "README.md"),
    `# @pacerelle/${key}\n\nThe \`pacerelle\` and \`pacerelle-mcp\` programs for ${key}. Install ` +
      "`@pacerelle/mcp-server` or `@pacerelle/cli` instead: they pick this package when it fits the machine.\n",
  );
  return pkg;
}

function stageFront(out, version, name, platforms) {
  const source = path.join(here, name);
  const pkg = path.join(out, name);
  fs.mkdirSync(path.join(pkg, "lib"), { recursive: true });
  fs.cpSync(path.join(source, "bin"), path.join(pkg, "bin"), { recursive: true });
  fs.copyFileSync(path.join(here, "launch.js"), path.join(pkg, "lib", "launch.js"));
  fs.copyFileSync(path.join(source, "README.md"), path.join(pkg, "README.md"));
  const manifest = JSON.parse(fs.readFileSync(path.join(source, "package.json"), "utf8"));
  manifest.version = version;
  manifest.optionalDependencies = Object.fromEntries(platforms.map((p) => [`@pacerelle/${p.key}`, version]));
  writeJson(path.join(pkg, "package.json"), manifest);
  return pkg;
}

const args = parse(process.argv.slice(2));
fs.rmSync(args.out, { recursive: true, force: true });
const tarballs = path.join(args.out, "tarballs");
fs.mkdirSync(tarballs, { recursive: true });
const staged = [
  ...args.platforms.map((p) => stagePlatform(args.out, args.version, p)),
  ...FRONTS.map((name) => stageFront(args.out, args.version, name, args.platforms)),
];
for (const pkg of staged) {
  const packed = JSON.parse(
    execFileSync("npm", ["pack", "--json", "--pack-destination", tarballs], { cwd: pkg, encoding: "utf8" }),
  );
  console.log(path.join(tarballs, packed[0].filename));
}
