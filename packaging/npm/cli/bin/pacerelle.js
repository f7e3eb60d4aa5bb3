#!/usr/bin/env node
// `npx -y @pacerelle/cli up`: the `pacerelle` command (see this package's README).
require("../lib/launch.js").run("pacerelle");
