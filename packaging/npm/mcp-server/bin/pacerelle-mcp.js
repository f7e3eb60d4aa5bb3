#!/usr/bin/env node
// `npx -y @pacerelle/mcp-server`: Pacerelle's MCP server over stdio (see this package's README).
require("../lib/launch.js").run("pacerelle-mcp");
