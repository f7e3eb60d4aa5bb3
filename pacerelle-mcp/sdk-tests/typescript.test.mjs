// pacerelle-mcp driven by the official TypeScript MCP SDK (@modelcontextprotocol/sdk, the client most hosts embed),
// over stdio and over streamable HTTP with a bearer, against a real relay (`pacerelle serve` on 127.0.0.1:0 with
// its SQLite file) and a real device (the CLI paired as a terminal): the listening flow — a task from the phone
// waited for, replied to, marked processed — and a yes/no question answered on the phone.
//
// Run from `cargo xtask test --only mcp-sdks` (which builds the binaries first), or `npm test` here once
// target/debug/pacerelle and target/debug/pacerelle-mcp are built.

import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const PACERELLE = path.join(ROOT, "target/debug/pacerelle");
const MCP = path.join(ROOT, "target/debug/pacerelle-mcp");

const work = mkdtempSync(path.join(tmpdir(), "pacerelle-mcp-ts-"));
const homes = { relay: path.join(work, "relay-home"), agent: path.join(work, "agent"), phone: path.join(work, "phone") };
const children = [];
let relayUrl;
let agent;

/** Starts a process whose output is kept for failure messages. */
function start(program, args, env = {}) {
  const child = spawn(program, args, { env: { ...process.env, PACERELLE_LOG: "warn", ...env }, stdio: ["ignore", "pipe", "pipe"] });
  child.out = "";
  child.err = "";
  child.stdout.on("data", (d) => (child.out += d));
  child.stderr.on("data", (d) => (child.err += d));
  child.done = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
  children.push(child);
  return child;
}

/** Runs the CLI with `home` to its end and returns its JSON output (`--json`). */
async function cli(home, args) {
  const child = start(PACERELLE, ["--json", ...args], { PACERELLE_HOME: home, PACERELLE_RELAY_URL: relayUrl });
  const timer = setTimeout(() => child.kill("SIGKILL"), 30000);
  const code = await child.done;
  clearTimeout(timer);
  assert.equal(code, 0, `pacerelle ${args.join(" ")} failed: ${child.err}`);
  return JSON.parse(child.out);
}

/** What `line` prints first on the process's stream `stream`, parsed by `parse` (undefined: not yet). */
function firstOf(child, stream, parse, what) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} did not start: ${child.err}`)), 30000);
    const look = () => {
      const found = parse(child[stream]);
      if (found === undefined) return;
      clearTimeout(timer);
      resolve(found);
    };
    child[stream === "out" ? "stdout" : "stderr"].on("data", look);
    child.done.then(() => reject(new Error(`${what} exited: ${child.err}`)));
  });
}

/** The environment pacerelle-mcp runs with: the agent's credentials, as a host's configuration gives them. */
const mcpEnv = () => ({
  PACERELLE_AGENT_ID: agent.agentId,
  PACERELLE_AGENT_TOKEN: agent.token,
  PACERELLE_RELAY_URL: relayUrl,
  PACERELLE_HOME: homes.agent,
  PACERELLE_LOG: "warn",
});

before(async () => {
  const relay = start(PACERELLE, ["serve", "--listen", "127.0.0.1:0", "--data", path.join(work, "data"), "--json"], {
    PACERELLE_HOME: homes.relay,
  });
  relayUrl = await firstOf(
    relay,
    "out",
    (out) => {
      try {
        return JSON.parse(out).relayUrl;
      } catch {
        return undefined;
      }
    },
    "the relay",
  );
  agent = await cli(homes.agent, ["agent", "create", "--name", "TypeScript SDK agent"]);
  const pairing = await cli(homes.agent, ["pair", "--name", "phone"]);
  await cli(homes.phone, ["device", "join", pairing.link, "--name", "Phone"]);
});

after(() => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  rmSync(work, { recursive: true, force: true });
});

/** Calls a tool and returns its structured content; the call must have succeeded. */
async function call(client, name, args) {
  const result = await client.callTool({ name, arguments: args }, undefined, { timeout: 60000 });
  assert.ok(!result.isError, `${name} failed: ${JSON.stringify(result.content)}`);
  assert.ok(result.structuredContent, `${name} returned no structured content`);
  return result.structuredContent;
}

/**
 * The flow a listening host runs: a task sent from the phone is waited for, read, replied to and marked processed
 * (the phone reads the reply); then a yes/no question asked, answered yes on the phone, and waited for.
 */
async function listeningFlow(client, label) {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  for (const name of ["wait_for_messages", "reply", "mark_processed", "ask_user", "wait_for_answer"]) {
    assert.ok(names.includes(name), `${name} is not listed: ${names}`);
  }
  assert.ok(tools.every((t) => t.outputSchema), "every tool declares its output schema");

  const text = `Write the release notes (${label} ${randomBytes(4).toString("hex")})`;
  const sent = await cli(homes.phone, ["send", text]);
  let task;
  for (let round = 0; round < 5 && !task; round++) {
    const waited = await call(client, "wait_for_messages", { timeoutSeconds: 20 });
    task = waited.messages.find((m) => m.messageId === sent.messageId);
  }
  assert.ok(task, `the task ${sent.messageId} never arrived`);
  assert.equal(task.text, text);
  assert.equal(task.fromName, "Phone");

  const reply = await call(client, "reply", { sourceMessageId: task.messageId, text: `Done: ${text}` });
  assert.equal(reply.created, true);
  const processed = await call(client, "mark_processed", { messageId: task.messageId });
  assert.equal(processed.messageId, task.messageId);
  const inbox = await cli(homes.phone, ["inbox"]);
  const seen = inbox.find((i) => i.kind === "reply" && i.sourceMessageId === task.messageId);
  assert.ok(seen, `the phone does not show the reply: ${JSON.stringify(inbox)}`);
  assert.equal(seen.text, `Done: ${text}`);

  const asked = await call(client, "ask_user", { question: `Ship it? (${label})`, kind: "yes_no" });
  assert.match(asked.questionId, /\S/);
  await cli(homes.phone, ["answer", asked.questionId, "yes"]);
  let answer;
  for (let round = 0; round < 5; round++) {
    answer = await call(client, "wait_for_answer", { questionId: asked.questionId, timeoutSeconds: 20 });
    if (answer.state !== "pending") break;
  }
  assert.equal(answer.state, "answered", JSON.stringify(answer));
  assert.equal(answer.approved, true);
  assert.equal(answer.channel, "phone");
}

test("over stdio: the TypeScript SDK's client completes the listening flow and a question", async () => {
  // The SDK validates results against each tool's outputSchema (Ajv), which warns about any format it does not
  // know: the schemas use standard formats only.
  const warnings = [];
  const warn = console.warn;
  console.warn = (...args) => {
    warnings.push(args.join(" "));
    warn(...args);
  };
  const transport = new StdioClientTransport({ command: MCP, args: [], env: mcpEnv(), stderr: "pipe" });
  let log = "";
  transport.stderr?.on("data", (d) => (log += d));
  const client = new Client({ name: "pacerelle-ts-test", version: "1.0.0" });
  await client.connect(transport);
  try {
    const server = client.getServerVersion();
    assert.equal(server.name, "pacerelle-mcp", JSON.stringify(server));
    assert.ok(client.getInstructions()?.includes("wait_for_messages"), "the server's instructions name the loop");
    await listeningFlow(client, "stdio");
    assert.deepEqual(warnings.filter((w) => /format/.test(w)), [], "warnings about the schemas' formats");
  } catch (e) {
    e.message += `\npacerelle-mcp's log:\n${log}`;
    throw e;
  } finally {
    console.warn = warn;
    await client.close();
  }
});

test("over streamable HTTP with a bearer: the same flow; a wrong bearer is refused", async () => {
  const bearer = randomBytes(24).toString("hex");
  const server = start(MCP, ["--http", "127.0.0.1:0"], { ...mcpEnv(), PACERELLE_MCP_BEARER: bearer, PACERELLE_LOG: "info" });
  const url = await firstOf(
    server,
    "err",
    (err) => {
      const m = err.match(/MCP endpoint at (\S+)/);
      return m ? m[1] : undefined;
    },
    "pacerelle-mcp --http",
  );

  const wrong = new Client({ name: "pacerelle-ts-test", version: "1.0.0" });
  const refused = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${"x".repeat(48)}` } },
  });
  await assert.rejects(wrong.connect(refused), (e) => /401|nauthori/i.test(String(e)), "a wrong bearer connects");

  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${bearer}` } },
  });
  const client = new Client({ name: "pacerelle-ts-test", version: "1.0.0" });
  await client.connect(transport);
  try {
    await listeningFlow(client, "http");
  } catch (e) {
    e.message += `\npacerelle-mcp's log:\n${server.err}`;
    throw e;
  } finally {
    await client.close();
    server.kill("SIGTERM");
    assert.equal(await server.done, 0, `pacerelle-mcp --http did not stop cleanly: ${server.err}`);
  }
});
