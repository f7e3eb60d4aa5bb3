// End-to-end tests of the web app in Debian's Chromium (driven by playwright-core, no downloaded browser),
// against a real relay (`pacerelle serve`, its own SQLite file in a temporary folder), the real echo agent,
// and the real CLI for the agent side (`agent create`, `pair`, `ask`, `notify`, `cancel`, and the PreToolUse gate
// `hook claude-code` with a policy that offers grants).
//
// Run from this folder after `cargo build -p pacerelle-cli -p echo-agent`:  node --test e2e.test.mjs
// Environment: PACERELLE_BIN, ECHO_AGENT_BIN (default: target/debug/…), CHROMIUM (default /usr/bin/chromium),
// UPDATE_SCREENSHOT=1 to also write docs/images/conversation.png and agents-*.png, PACERELLE_TEST_POSTGRES_BIN (the
// `pacerelle-test-postgres` program) to run the relay on a throw-away PostgreSQL cluster that it starts instead
// of its SQLite file (`cargo xtask test --only web` runs the pairing, task, question and push tests so too).

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { X509Certificate, createECDH, createHash, createPublicKey, randomBytes, verify as nodeVerify } from "node:crypto";
import { createServer } from "node:http";
import { execFileSync } from "node:child_process";

import { chromium } from "playwright-core";

import { decryptPush } from "./webpush.mjs";
import { signedAnswerBytes, signedGrantBytes } from "../web/app/crypto.js";

const ROOT = path.resolve(fileURLToPath(new URL("../..", import.meta.url)));
const PACERELLE = process.env.PACERELLE_BIN || path.join(ROOT, "target/debug/pacerelle");
const ECHO_AGENT = process.env.ECHO_AGENT_BIN || path.join(ROOT, "target/debug/echo-agent");
const MCP = process.env.PACERELLE_MCP_BIN || path.join(ROOT, "target/debug/pacerelle-mcp");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const POSTGRES = process.env.PACERELLE_TEST_POSTGRES_BIN || "";
const SCREENSHOT = path.join(ROOT, "target/web-tests/conversation.png");
const README_SCREENSHOT = path.join(ROOT, "docs/images/conversation.png");
/** The relay's test certificate (for localhost, 127.0.0.1, ::1), signed by a throwaway test CA. */
const TLS_CERT = path.join(ROOT, "pacerelle-relay/tests/tls/cert.pem");
const TLS_KEY = path.join(ROOT, "pacerelle-relay/tests/tls/key.pem");

/** Chromium trusts the test certificate by its public key, as it would a real one. */
function spkiHash(pemFile) {
  const spki = new X509Certificate(readFileSync(pemFile)).publicKey.export({ type: "spki", format: "der" });
  return createHash("sha256").update(spki).digest("base64");
}

/** Texts typed in the browser: none may ever appear in the relay's files. */
const typed = [];
const unique = (label) => {
  const text = `${label} ${randomBytes(6).toString("hex")}`;
  typed.push(text);
  return text;
};

const work = mkdtempSync(path.join(tmpdir(), "pacerelle-web-e2e-"));
const dataDir = path.join(work, "relay");
const home = path.join(work, "home");
const children = [];
let relayUrl;
/** On PostgreSQL: the cluster's folder, whose files are the relay's database. */
let postgresFolder;
let agentId;
let agentToken;
let deviceId;
let context;
let page;
const requests = [];
const problems = [];

/** Starts a process; its output is kept for failure messages. `stdin` "pipe" keeps its standard input open. */
function start(program, args, env = {}, stdin = "ignore") {
  const child = spawn(program, args, {
    env: { ...process.env, PACERELLE_HOME: home, PACERELLE_LOG: "warn", ...env },
    stdio: [stdin, "pipe", "pipe"],
  });
  child.out = "";
  child.err = "";
  child.stdout.on("data", (d) => (child.out += d));
  child.stderr.on("data", (d) => (child.err += d));
  child.done = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  children.push(child);
  return child;
}

/** Starts `pacerelle serve` with `args` and returns its URL once it listens. */
async function startRelay(args) {
  const relay = start(PACERELLE, ["serve", "--listen", "127.0.0.1:0", "--json", ...args]);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the relay did not start: ${relay.err}`)), 20000);
    relay.stdout.on("data", () => {
      // `--json` prints one JSON object, possibly over several lines.
      try {
        const url = JSON.parse(relay.out).relayUrl;
        clearTimeout(timer);
        resolve(url);
      } catch {
        /* not complete yet */
      }
    });
    relay.done.then(() => reject(new Error(`the relay exited: ${relay.err}`)));
  });
}

/** Starts a throw-away PostgreSQL cluster (`pacerelle-test-postgres`, which removes it when its input ends) and
 * returns the URL of a fresh database in it. */
async function startPostgres() {
  const cluster = start(POSTGRES, [], {}, "pipe");
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no PostgreSQL cluster: ${cluster.err}`)), 60000);
    cluster.stdout.on("data", () => {
      const line = cluster.out.split("\n");
      if (line.length < 2) return;
      clearTimeout(timer);
      const [url, folder] = line[0].split("\t");
      postgresFolder = folder;
      resolve(url);
    });
    cluster.done.then(() => reject(new Error(`the cluster's program exited: ${cluster.err}`)));
  });
}

/** The files below `dir`, at any depth. */
function filesBelow(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    return e.isDirectory() ? filesBelow(full) : e.isFile() ? [full] : [];
  });
}

/** Runs the CLI to its end: `{code, out, err}`. */
async function cli(args, timeoutMs = 30000) {
  const child = start(PACERELLE, args, { PACERELLE_RELAY_URL: relayUrl });
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  const { code } = await child.done;
  clearTimeout(timer);
  return { code, out: child.out, err: child.err };
}

async function cliJson(args) {
  const r = await cli(["--json", ...args]);
  assert.equal(r.code, 0, `pacerelle ${args.join(" ")} failed: ${r.err}`);
  return JSON.parse(r.out);
}

/** Starts `pacerelle ask …` and returns the running child; `await child.done` for its exit. */
function ask(args) {
  return start(PACERELLE, ["ask", ...args], { PACERELLE_RELAY_URL: relayUrl });
}

/** Starts `pacerelle ask --here …`, its standard input open: `child.stdin.write("yes\n")` answers at the computer. */
function askHere(args) {
  return start(PACERELLE, ["ask", "--here", ...args], { PACERELLE_RELAY_URL: relayUrl }, "pipe");
}

/**
 * A second owner device: the CLI as a terminal device, paired in a home of its own (`folder` under the work folder)
 * with the name `name`. `run(args)` runs the CLI as that device: `{code, out, err}`. Leave with `run(["device",
 * "leave"])`, so that the other tests find the one phone they expect.
 */
async function terminalDevice(folder, name) {
  const deviceHome = path.join(work, folder);
  mkdirSync(deviceHome, { recursive: true });
  const run = async (args) => {
    const child = start(PACERELLE, args, { PACERELLE_HOME: deviceHome, PACERELLE_RELAY_URL: relayUrl });
    const code = await exitOf(child);
    return { code, out: child.out, err: child.err };
  };
  const pairing = await cliJson(["pair", "--name", "tablet"]);
  const joined = await run(["device", "join", pairing.link, "--name", name]);
  assert.equal(joined.code, 0, joined.err);
  return { run, deviceId: pairing.deviceId };
}

/** The question `id` as terminal device `device` reads it from the relay (its inbox): `{state, approvals, answers, …}`. */
async function questionSeenBy(device, id) {
  const inbox = await device.run(["--json", "inbox"]);
  assert.equal(inbox.code, 0, inbox.err);
  const item = JSON.parse(inbox.out).find((i) => i.id === id);
  assert.ok(item && item.question, `${id} is not in the device's inbox: ${inbox.out}`);
  return item.question;
}

/** Whether a process is still running `ms` milliseconds from now (an `ask` still waiting for its answer). */
async function stillRunningAfter(child, ms) {
  await new Promise((resolve) => setTimeout(resolve, ms));
  return child.exitCode === null && child.signalCode === null;
}

/** The bodies of the answer requests the page sends from now on, by question id, until `stop()`. */
function watchAnswers(target = page) {
  const bodies = {};
  const watch = (r) => {
    const m = new URL(r.url()).pathname.match(/^\/v1\/device\/questions\/([^/]+)\/answer$/);
    if (m && r.method() === "POST") (bodies[decodeURIComponent(m[1])] ||= []).push(JSON.parse(r.postData()));
  };
  target.on("request", watch);
  return { bodies, stop: () => target.off("request", watch) };
}

async function exitOf(child, timeoutMs = 30000) {
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  const { code } = await child.done;
  clearTimeout(timer);
  return code;
}

/** Saves what a screen looks like under target/web-tests/, to look at after a run. */
async function shot(name, target = page) {
  mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
  await target.screenshot({ path: path.join(path.dirname(SCREENSHOT), `${name}.png`), fullPage: true });
}

const question = (id) => page.locator(`#thread li.question[data-id="${id}"]`);

// ── push: what the browser's push service would hand to the service worker ─────────────────────

/**
 * Every item of the conversation, read by the page with the device's own token, as the app reads them: the device of
 * the pairing the app shows, or of agent `agent`'s.
 */
async function deviceItems(agent = null) {
  return page.evaluate(async (agent) => {
    const db = await new Promise((resolve, reject) => {
      const req = indexedDB.open("pacerelle");
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
    // The pairing the app shows (one per agent is kept, at "pairing:<agentId>"), or agent's.
    const device = await (await import("/app/store.js")).loadDevice(agent || undefined);
    db.close();
    const items = [];
    let cursor = null;
    for (;;) {
      const q = new URLSearchParams({ wait: "0", updates: "true" });
      if (cursor) q.set("cursor", cursor);
      const res = await fetch(`/v1/device/conversation?${q}`, { headers: { Authorization: `Bearer ${device.deviceToken}` } });
      const page = await res.json();
      items.push(...page.items);
      if (page.items.length < 200) return items;
      cursor = page.cursor;
    }
  }, agent);
}

/** The conversation item `find` selects, once the relay has it (in agent `agent`'s conversation, when given). */
async function deviceItem(find, what, agent = null) {
  for (let i = 0; i < 100; i++) {
    const item = (await deviceItems(agent)).find(find);
    if (item) return item;
    await page.waitForTimeout(200);
  }
  throw new Error(`no ${what} in the device's conversation`);
}

/** The payload of the relay's push for `item` (docs/push.md): what the service worker gets once decrypted. */
const pushPayload = (item, extra = {}) => ({
  v: 1,
  relay: relayUrl,
  agentId,
  deviceId,
  kind: item.kind,
  id: item.id,
  cursor: item.cursor,
  item,
  ...extra,
});

/** Hands a push to the app's service worker through the DevTools protocol, as the push service would. */
async function deliverPush(payload) {
  const cdp = await context.newCDPSession(page);
  const origin = new URL(relayUrl).origin;
  const registered = new Promise((resolve) => {
    cdp.on("ServiceWorker.workerRegistrationUpdated", ({ registrations }) => {
      const r = registrations.find((x) => !x.isDeleted && x.scopeURL === `${origin}/`);
      if (r) resolve(r.registrationId);
    });
  });
  await cdp.send("ServiceWorker.enable");
  const registrationId = await registered;
  // Running, as when the push service wakes it (delivery to a worker being stopped can be lost in headless runs).
  await cdp.send("ServiceWorker.startWorker", { scopeURL: `${origin}/` });
  await cdp.send("ServiceWorker.deliverPushMessage", { origin, registrationId, data: JSON.stringify(payload) });
  await cdp.detach();
}

/** The notifications the app's service worker shows, with `tag` (a question's id). */
async function notifications(tag) {
  return page.evaluate(async (tag) => {
    const registration = await navigator.serviceWorker.getRegistration("/");
    const shown = await registration.getNotifications(tag ? { tag } : undefined);
    return shown.map((n) => ({
      title: n.title,
      body: n.body,
      tag: n.tag,
      requireInteraction: n.requireInteraction,
      actions: (n.actions || []).map((a) => [a.action, a.title]),
      data: n.data,
    }));
  }, tag);
}

async function waitForNotification(tag, test, what, tries = 200) {
  for (let i = 0; i < tries; i++) {
    const shown = await notifications(tag);
    if (test(shown)) return shown;
    await page.waitForTimeout(100);
  }
  throw new Error(`${what}: ${JSON.stringify(await notifications(tag))} (all shown: ${JSON.stringify(await notifications())})`);
}

/**
 * Delivers a push and waits for what it shows. A push handed to a worker that headless Chromium is still starting
 * (or stopping) can be dropped before its handler runs; the push service would deliver again, so does this, up to
 * three times. Showing a notification under the same tag replaces it, so a repeat shows nothing twice.
 */
async function pushShown(payload, tag, test, what) {
  for (let attempt = 1; ; attempt++) {
    await deliverPush(payload);
    try {
      return await waitForNotification(tag, test, what, attempt < 3 ? 50 : 200);
    } catch (e) {
      if (attempt >= 3) throw e;
    }
  }
}

/**
 * Whether this relay writes `update` items (by now, tasks of this device were processed: a relay that has them
 * wrote some). The tests of what only such a relay does are skipped, with the reason, against an older one.
 */
async function relayHasUpdates() {
  return (await deviceItems()).some((i) => i.kind === "update");
}
const OLD_RELAY = "this relay writes no update items (docs/push.md)";

/** The payload of a push the relay sent to the test's subscription (docs/push.md). */
const openPush = (body, uaKeys, authSecret) => JSON.parse(decryptPush(body, uaKeys, authSecret).toString("utf8"));

/** A push service on 127.0.0.1 standing in for the browser vendor's: it keeps what the relay posts. */
async function startPushService() {
  const received = [];
  const waiters = [];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      received.push({ path: req.url, headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(201).end();
      for (const w of waiters.splice(0)) w();
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    received,
    /** The first push that `test` accepts, waiting for it. */
    async next(test, what) {
      const deadline = Date.now() + 20000;
      for (;;) {
        const found = received.find(test);
        if (found) return found;
        if (Date.now() > deadline) throw new Error(`no push for ${what}: ${received.length} received`);
        await new Promise((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 500);
        });
      }
    },
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/** Makes the page's push manager return a subscription to `endpoint` with these keys (Chromium here has no vendor). */
async function standInSubscription(endpoint, p256dh, auth) {
  await page.evaluate(([endpoint, p256dh, auth]) => {
    let current = null;
    PushManager.prototype.subscribe = async (options) => {
      current = {
        endpoint,
        expirationTime: null,
        options: { userVisibleOnly: true, applicationServerKey: options.applicationServerKey },
        toJSON: () => ({ endpoint, expirationTime: null, keys: { p256dh, auth } }),
        unsubscribe: async () => {
          current = null;
          return true;
        },
      };
      return current;
    };
    PushManager.prototype.getSubscription = async () => current;
  }, [endpoint, p256dh, auth]);
}

/** The app's service worker, as Playwright reaches it (DevTools protocol). */
async function serviceWorker() {
  const found = context.serviceWorkers().find((w) => w.url().endsWith("/app/sw.js"));
  return found || context.waitForEvent("serviceworker", { predicate: (w) => w.url().endsWith("/app/sw.js") });
}

/**
 * Runs what the worker runs on `notificationclick` (a test cannot click a system notification): the same function,
 * on the notification the worker shows, with `action` ("yes", "no", or "" for a tap on its body).
 */
async function clickNotification(tag, action) {
  const worker = await serviceWorker();
  return worker.evaluate(async ([tag, action]) => {
    const [notification] = await self.registration.getNotifications({ tag });
    if (!notification) throw new Error(`no notification ${tag}`);
    return self.pacerelle.handleNotificationClick(notification, action);
  }, [tag, action]);
}

// ── signing keys: what the browser keeps, and what it signed ─────────────────────────────────────

/** The signing key a page's browser keeps beside its pairing (IndexedDB), as far as a page can see it; null if none. */
async function storedSigning(target = page) {
  return target.evaluate(async () => {
    const db = await new Promise((resolve, reject) => {
      const req = indexedDB.open("pacerelle");
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
    // The pairing the app shows (one per agent is kept, at "pairing:<agentId>").
    const device = await (await import("/app/store.js")).loadDevice();
    db.close();
    const s = device && device.signing;
    if (!s) return null;
    let exported = true;
    try {
      await crypto.subtle.exportKey("pkcs8", s.privateKey);
    } catch {
      exported = false;
    }
    return {
      signingKey: s.signingKey,
      registered: s.registered === true,
      conflict: s.conflict === true,
      isKey: s.privateKey instanceof CryptoKey,
      algorithm: s.privateKey.algorithm.name,
      type: s.privateKey.type,
      extractable: s.privateKey.extractable,
      usages: s.privateKey.usages,
      exported,
    };
  });
}

/** Waits until the page's signing key is registered with the relay (the app checks at each start). */
async function registeredSigning(target = page) {
  for (let i = 0; i < 100; i++) {
    const s = await storedSigning(target);
    if (s && s.registered) return s;
    await target.waitForTimeout(200);
  }
  throw new Error(`the signing key was never registered: ${JSON.stringify(await storedSigning(target))}`);
}

/**
 * The answer payload this browser sealed for a question (kept sealed in IndexedDB once the relay took it), opened
 * in the page with its device key by the app's own crypto module.
 */
async function sealedAnswer(questionId, target = page) {
  for (let i = 0; i < 100; i++) {
    const opened = await target.evaluate(async (questionId) => {
      const c = await import("/app/crypto.js");
      const db = await new Promise((resolve, reject) => {
        const req = indexedDB.open("pacerelle");
        req.onsuccess = () => resolve(req.result);
        req.onerror = () => reject(req.error);
      });
      const get = (key) =>
        new Promise((resolve) => {
          const req = db.transaction("kv").objectStore("kv").get(key);
          req.onsuccess = () => resolve(req.result);
        });
      const device = await (await import("/app/store.js")).loadDevice();
      const envelope = await get(`answer:${questionId}`);
      db.close();
      if (!envelope) return null;
      return c.openJson(device.key, c.context.answer(device.agentId, device.deviceId, questionId), envelope);
    }, questionId);
    if (opened) return opened;
    await target.waitForTimeout(200);
  }
  throw new Error(`no answer to ${questionId} kept in the browser`);
}

/**
 * Whether `payload` (an answer payload) carries `publicKey`'s signature of its SignedAnswer bytes, checked with
 * node's own Ed25519 (OpenSSL), not the browser's.
 */
function signedBy(publicKey, agent, device, payload) {
  if (typeof payload.signature !== "string") return false;
  const bytes = signedAnswerBytes({
    agentId: agent,
    deviceId: device,
    questionId: payload.questionId,
    questionDigest: payload.questionDigest,
    answeredAt: payload.answeredAt,
    answer: payload.answer,
  });
  const key = createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: publicKey }, format: "jwk" });
  return nodeVerify(null, bytes, key, Buffer.from(payload.signature, "base64url"));
}

/** `first 12 bytes of SHA-256(key)` in six groups of four hex digits: the fingerprint the app and the export show. */
const fingerprintOf = (publicKey) =>
  createHash("sha256").update(Buffer.from(publicKey, "base64url")).digest("hex").slice(0, 24).match(/.{4}/g).join(" ");

/** A page whose WebCrypto has no Ed25519, as in a browser without it (generateKey rejects, as such browsers do). */
async function withoutEd25519(target) {
  await target.addInitScript(() => {
    const generateKey = SubtleCrypto.prototype.generateKey;
    SubtleCrypto.prototype.generateKey = function (algorithm, ...rest) {
      const name = typeof algorithm === "string" ? algorithm : algorithm && algorithm.name;
      if (String(name).toLowerCase() === "ed25519") {
        return Promise.reject(new DOMException("Unrecognized algorithm name", "NotSupportedError"));
      }
      return generateKey.call(this, algorithm, ...rest);
    };
  });
}

before(async () => {
  for (const file of [PACERELLE, ECHO_AGENT, CHROMIUM]) {
    assert.ok(existsSync(file), `${file} is missing (cargo build -p pacerelle-cli -p echo-agent; apt-get install chromium)`);
  }
  mkdirSync(dataDir, { recursive: true });
  mkdirSync(home, { recursive: true });

  // A relay that pushes may send to the test's own push service on 127.0.0.1.
  const help = execFileSync(PACERELLE, ["serve", "--help"], { encoding: "utf8" });
  const pushFlag = help.includes("--allow-private-push-endpoints") ? ["--allow-private-push-endpoints"] : [];
  const database = POSTGRES ? ["--database", await startPostgres()] : [];
  relayUrl = await startRelay(["--data", dataDir, ...database, ...pushFlag]);

  const agent = await cliJson(["agent", "create", "--name", "Ana’s laptop — Claude Code"]);
  agentId = agent.agentId;
  agentToken = agent.token;
  start(ECHO_AGENT, ["--takeover"], {
    PACERELLE_RELAY_URL: relayUrl,
    PACERELLE_AGENT_ID: agent.agentId,
    PACERELLE_AGENT_TOKEN: agent.token,
  });

  context = await chromium.launchPersistentContext(path.join(work, "chromium-profile"), {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      `--ignore-certificate-errors-spki-list=${spkiHash(TLS_CERT)}`,
    ],
    viewport: { width: 390, height: 844 },
    deviceScaleFactor: 2,
    isMobile: true,
    hasTouch: true,
    locale: "en-GB",
    timezoneId: "Europe/Paris",
    colorScheme: "light",
    reducedMotion: "reduce",
  });
  context.on("request", (r) => requests.push(r.url()));
  page = context.pages()[0] || (await context.newPage());
  page.on("console", (m) => {
    if (m.type() === "error" && !/Failed to load resource/.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.setDefaultTimeout(20000);
}, { timeout: 90000 });

after(async () => {
  if (context) await context.close().catch(() => {});
  for (const child of children) if (child.exitCode === null) child.kill("SIGTERM");
  await Promise.all(children.map((c) => Promise.race([c.done, new Promise((r) => setTimeout(r, 5000))])));
  rmSync(work, { recursive: true, force: true });
});

test("the app is served with a strict policy, no inline code, and is installable", async () => {
  const response = await fetch(`${relayUrl}/`);
  assert.equal(response.status, 200);
  const csp = response.headers.get("content-security-policy");
  assert.match(csp, /default-src 'self'/);
  assert.match(csp, /script-src 'self'/);
  assert.doesNotMatch(csp, /unsafe/);
  assert.equal(response.headers.get("x-content-type-options"), "nosniff");
  assert.equal(response.headers.get("referrer-policy"), "no-referrer");
  const unpaired = await page.goto(`${relayUrl}/`);
  assert.equal(unpaired.status(), 200);
  await page.locator("#screen-unpaired").waitFor();
  // Installable: Chromium finds nothing missing in the manifest, icons or page.
  const cdp = await context.newCDPSession(page);
  const manifest = await cdp.send("Page.getAppManifest");
  assert.deepEqual(manifest.errors, []);
  assert.ok(manifest.url.endsWith("/app/manifest.webmanifest"));
  const { installabilityErrors } = await cdp.send("Page.getInstallabilityErrors");
  assert.deepEqual(installabilityErrors, []);
  await cdp.detach();
});

test("opening a pairing link pairs the browser", async () => {
  const pairing = await cliJson(["pair", "--name", "phone"]);
  assert.match(pairing.link, /\/pair#v1\./);
  deviceId = pairing.deviceId;
  await page.goto(pairing.link);
  // The secret leaves the address bar at once.
  await page.locator("#pair-form").waitFor();
  assert.equal(new URL(page.url()).hash, "");
  assert.equal(await page.locator("#pair-agent").textContent(), "Ana’s laptop — Claude Code");
  // The first pairing in this browser offers the label given with `pair --name`.
  assert.equal(await page.locator("#pair-name").inputValue(), "phone");
  await shot("pair");
  await page.locator("#pair-name").fill("Ana’s phone");
  await page.locator("#pair-submit").click();
  await page.locator("#screen-conversation").waitFor();
  assert.equal(new URL(page.url()).pathname, "/");

  const { devices } = await cliJson(["agent", "devices"]);
  assert.deepEqual(
    devices.map((d) => [d.deviceId, d.name, d.trusted]),
    [[pairing.deviceId, "Ana’s phone", true]],
  );

  // The key is kept as a non-extractable CryptoKey, the token beside it.
  const stored = await page.evaluate(async () => {
    const db = await new Promise((resolve, reject) => {
      const req = indexedDB.open("pacerelle");
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
    // The pairing the app shows (one per agent is kept, at "pairing:<agentId>").
    const device = await (await import("/app/store.js")).loadDevice();
    let exported = true;
    try {
      await crypto.subtle.exportKey("raw", device.key);
    } catch {
      exported = false;
    }
    return {
      isKey: device.key instanceof CryptoKey,
      extractable: device.key.extractable,
      algorithm: device.key.algorithm.name,
      exported,
      keyBytes: "keyBytes" in device,
      token: device.deviceToken.split(".")[0],
    };
  });
  assert.deepEqual(stored, {
    isKey: true,
    extractable: false,
    algorithm: "AES-GCM",
    exported: false,
    keyBytes: false,
    token: pairing.deviceId,
  });

  // Beside it, the device's signing key: an Ed25519 private key that cannot leave the browser, whose public half
  // the relay lists as the claim gave it (and the agent gets sealed with the device key).
  const signing = await registeredSigning();
  assert.deepEqual({ ...signing, signingKey: Buffer.from(signing.signingKey, "base64url").length }, {
    signingKey: 32,
    registered: true,
    conflict: false,
    isKey: true,
    algorithm: "Ed25519",
    type: "private",
    extractable: false,
    usages: ["sign"],
    exported: false,
  });
  const listed = (await cliJson(["agent", "devices"])).devices.find((d) => d.deviceId === pairing.deviceId);
  if ("signingKey" in listed) assert.equal(listed.signingKey, signing.signingKey);

  // The same link again: single use, refused, and the pairing here is kept.
  const again = await context.newPage();
  await again.goto(pairing.link);
  await again.locator("#notice", { hasText: "already used" }).waitFor();
  assert.match(await again.locator("#notice-text").textContent(), /you are paired with: Ana’s laptop — Claude Code/);
  await again.locator("#screen-conversation").waitFor();
  await shot("pair-used", again);
  await again.close();
});

test("a task typed in the app gets the echo agent's reply, shown under it", async () => {
  const text = unique("Rename the draft « Été 2026 » ✓");
  await page.locator("#task-text").fill(text);
  await page.locator("#send").click();
  const task = page.locator("li.task").filter({ hasText: text });
  await task.waitFor();
  await task.locator(".replies .reply", { hasText: `echo: ${text}` }).waitFor();
  await page.locator(`li.task[data-state="processed"]`).filter({ hasText: text }).waitFor({ timeout: 20000 });
  await page.locator('#banner[data-presence="listening"]').waitFor({ timeout: 20000 });

  // A second task, sent while the first is answered.
  const second = unique("Summarise today’s changes");
  await page.locator("#task-text").fill(second);
  await page.locator("#task-text").press("Control+Enter");
  await page.locator("li.task", { hasText: second }).locator(".reply", { hasText: `echo: ${second}` }).waitFor();

  // After a reload, the conversation is read and opened again with the stored key.
  await page.reload();
  await page.locator("li.task", { hasText: text }).locator(".reply", { hasText: `echo: ${text}` }).waitFor();
  assert.equal(await page.locator("li.task").count(), 2);
});

test("an over-long paste is refused whole, with the limit shown, and nothing is sent", async () => {
  const tasksBefore = await page.locator("li.task").count();
  const posts = [];
  await page.route("**/v1/device/messages", (route) => {
    posts.push(route.request().postData());
    return route.continue();
  });
  // 200 000 characters pasted: kept whole in the box (never cut to 65 536), refused, never sent.
  const long = `Too long ${randomBytes(6).toString("hex")} ` + "x".repeat(200000 - 22);
  await page.locator("#task-text").fill(long);
  const note = page.locator("#too-long");
  await note.waitFor();
  assert.match(await note.textContent(), /the limit is 64 KiB \(65,536 bytes\)/);
  assert.equal((await page.locator("#task-text").inputValue()).length, long.length, "the text is never cut");
  await page.locator("#send").click();
  await page.locator("#toast", { hasText: "64 KiB of UTF-8 at most. Nothing was sent." }).waitFor();
  assert.equal((await page.locator("#task-text").inputValue()).length, long.length, "the text stays for editing");

  // 80 KB of multi-byte text (fewer characters than 64 Ki): counted in UTF-8 bytes, refused too.
  await page.locator("#task-text").fill("é".repeat(40000));
  await note.waitFor();
  assert.match(await note.textContent(), /78\.1 KiB/);
  await page.locator("#task-text").press("Control+Enter");

  // Exactly at the limit is accepted: the note goes away.
  await page.locator("#task-text").fill("y".repeat(64 * 1024));
  await note.waitFor({ state: "hidden" });
  await page.locator("#task-text").fill("");
  await page.waitForTimeout(500);
  await page.unroute("**/v1/device/messages");
  assert.deepEqual(posts, [], "nothing reached the relay");
  assert.equal(await page.locator("li.task").count(), tasksBefore);
  assert.equal(await page.locator("li.task", { hasText: "Too long" }).count(), 0);
});

test("a long message folds with “Show more” and unfolds, the agent's long reply too", async () => {
  const lines = Array.from({ length: 80 }, (_, i) => `Step ${i + 1}: check the migration of table number ${i + 1}`);
  const text = `${lines.join("\n")}\n${unique("Long task")}`;
  await page.locator("#task-text").fill(text);
  await page.locator("#send").click();
  const task = page.locator("li.task", { hasText: "Step 80:" }).last();
  const reply = task.locator(".reply", { hasText: "echo: Step 1:" });
  await reply.waitFor();
  const checks = [
    [task.locator(":scope > .bubble"), task.locator(":scope > button.show-more")],
    [reply.locator(".bubble"), reply.locator("button.show-more")],
  ];
  for (const [bubble, toggle] of checks) {
    await bubble.scrollIntoViewIfNeeded();
    assert.equal(await toggle.textContent(), "Show more");
    assert.equal(await toggle.getAttribute("aria-expanded"), "false");
    const folded = (await bubble.boundingBox()).height;
    assert.ok(folded < 400, `folded to ${folded}px`);
    const full = await bubble.evaluate((n) => n.scrollHeight);
    assert.ok(full > 3 * folded, `the whole text (${full}px) is much taller than the folded one`);
    await toggle.click();
    assert.equal(await toggle.textContent(), "Show less");
    assert.equal(await toggle.getAttribute("aria-expanded"), "true");
    const unfolded = (await bubble.boundingBox()).height;
    assert.ok(unfolded >= full - 1, `unfolded to ${unfolded}px of ${full}px`);
    await toggle.click();
    assert.equal(await toggle.textContent(), "Show more");
    assert.equal((await bubble.boundingBox()).height, folded);
  }
  // The whole text is in the page, folded or not; short texts have no toggle.
  assert.equal(await task.locator(":scope > .bubble").textContent(), text);
  const short = page.locator("li.task", { hasText: "Summarise today’s changes" });
  assert.equal(await short.locator("button.show-more").count(), 0);
  await shot("folded");
});

test("a yes/no question: Approve makes `pacerelle ask` exit 0", async () => {
  const child = ask(["Deploy v2.3 to production?", "--id", "qst_e2e_approve", "--details", "Tests pass — 3 migrations"]);
  const card = question("qst_e2e_approve");
  await card.locator("button.approve").waitFor();
  assert.match(await card.locator(".time-left").textContent(), /min .* left/);
  // A question that offers no grant keeps Approve and Deny, without Allow for ….
  assert.deepEqual(await card.locator(".q-controls button").allTextContents(), ["Approve", "Deny"]);
  await card.locator("button.approve").click();
  assert.equal(await exitOf(child), 0, child.err);
  await card.locator(".q-status", { hasText: "Approved — by this device" }).waitFor();
  assert.equal(await card.locator("button").count(), 0);
});

test("the approval is signed with the browser's key, and the agent's signed answer log verifies", async () => {
  const { signingKey } = await storedSigning();
  const payload = await sealedAnswer("qst_e2e_approve");
  assert.deepEqual(payload.answer, { type: "yes" });
  assert.match(payload.answeredAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  assert.ok(signedBy(signingKey, agentId, deviceId, payload), "the answer carries the browser key's signature");
  assert.ok(!signedBy(signingKey, agentId, deviceId, { ...payload, answer: { type: "no" } }), "a no is not what was signed");

  // The agent's export (pacerelle audit export --format signed) holds the same signature and key, and verifies.
  const exported = path.join(work, "answers.json");
  const made = await cli(["audit", "export", "--format", "signed", "--output", exported]);
  assert.equal(made.code, 0, made.err);
  const log = JSON.parse(readFileSync(exported, "utf8"));
  const record = log.records.find((r) => r.questionId === "qst_e2e_approve");
  assert.ok(record, `the export lists the answer: ${JSON.stringify(log.records.map((r) => r.questionId))}`);
  assert.equal(record.deviceId, deviceId);
  assert.equal(record.signature, payload.signature);
  assert.equal(record.signingKey, signingKey);
  assert.equal(record.answeredAt, payload.answeredAt);
  const device = log.devices.find((d) => d.deviceId === deviceId);
  assert.equal(device.signingKey, signingKey);
  assert.equal(device.fingerprint, fingerprintOf(signingKey));
  const verified = await cli(["audit", "verify", exported]);
  assert.equal(verified.code, 0, `${verified.out}${verified.err}`);

  // One field changed (the answer): the export no longer verifies, and the record is named.
  const index = log.records.indexOf(record) + 1;
  record.answer = { type: "no" };
  record.approved = false;
  const tampered = path.join(work, "answers-tampered.json");
  writeFileSync(tampered, JSON.stringify(log, null, 2));
  const refused = await cli(["audit", "verify", tampered]);
  assert.equal(refused.code, 1, `${refused.out}${refused.err}`);
  assert.match(`${refused.out}${refused.err}`, new RegExp(`record ${index}\\b[^\\n]*qst_e2e_approve`));
});

test("a yes from the browser whose signature covers another answer is rejected, never approved (`pacerelle ask` exits 3)", async () => {
  const child = ask(["Drop the staging database?", "--id", "qst_e2e_forged", "--json"]);
  await question("qst_e2e_forged").locator("button.approve").waitFor();
  // What a page script holding the device key could do without the person: seal a yes that carries this key's
  // signature of a no. It opens with the device key; only the signature is wrong.
  const item = await deviceItem((i) => i.kind === "question" && i.id === "qst_e2e_forged", "question");
  const status = await page.evaluate(async (item) => {
    const c = await import("/app/crypto.js");
    const a = await import("/app/answer.js");
    const store = await import("/app/store.js");
    const device = await store.loadDevice();
    const { digest } = await a.openQuestion(device, item);
    const payload = { questionId: item.id, answer: { type: "yes" }, answeredAt: new Date().toISOString(), questionDigest: digest };
    payload.signature = await c.signAnswer(device.signing.privateKey, {
      agentId: device.agentId, deviceId: device.deviceId, ...payload, answer: { type: "no" },
    });
    const envelope = await c.sealJson(device.key, c.context.answer(device.agentId, device.deviceId, item.id), payload);
    const res = await fetch(`/v1/device/questions/${item.id}/answer`, {
      method: "POST",
      headers: { Authorization: `Bearer ${device.deviceToken}`, "Content-Type": "application/json" },
      body: JSON.stringify({ envelope }),
    });
    return res.status;
  }, item);
  assert.equal(status, 200, "the relay takes it: it cannot tell");
  assert.equal(await exitOf(child), 3, `${child.out}${child.err}`);
  const outcome = JSON.parse(child.out);
  assert.equal(outcome.approved, false);
  assert.ok(outcome.rejected, `a reason is given: ${child.out}`);
});

test("a yes/no question: Deny makes `pacerelle ask` exit 1", async () => {
  const child = ask(["Delete the old backups?", "--id", "qst_e2e_deny"]);
  const card = question("qst_e2e_deny");
  await card.locator("button.deny").click();
  assert.equal(await exitOf(child), 1, child.err);
  await card.locator(".q-status", { hasText: "Denied" }).waitFor();
});

/** The last card of the thread lies fully in the visible part of the page: under the header and banner, above the composer. */
async function assertLastCardVisible(what) {
  const last = page.locator("#thread > li").last();
  const card = await last.boundingBox();
  const composer = await page.locator("#composer").boundingBox();
  const banner = await page.locator("#banner").boundingBox();
  const top = banner ? banner.y + banner.height : (await page.locator("header.top").boundingBox()).height;
  const { width, height } = page.viewportSize();
  assert.deepEqual([width, height], [390, 844]);
  assert.ok(composer.y + composer.height <= height + 0.5, "the composer is at the bottom of the screen");
  assert.ok(card.y + card.height <= composer.y + 0.5,
    `${what}: the last card ends at ${card.y + card.height}px, under the composer from ${composer.y}px`);
  assert.ok(card.y >= top - 0.5, `${what}: the last card starts at ${card.y}px, under the banner (to ${top}px)`);
}

test("a question left alone expires, and the app shows it expired", async () => {
  // Read at the bottom of the conversation, as on a phone.
  await page.evaluate(() => window.scrollTo(0, document.documentElement.scrollHeight));
  const child = ask(["Restart the staging server?", "--id", "qst_e2e_expire", "--expires", "3s",
    "--details", "The deploy finished; a restart picks up the new configuration."]);
  const card = question("qst_e2e_expire");
  await card.locator("button.approve").waitFor();
  await page.waitForTimeout(300);
  await assertLastCardVisible("waiting");
  await card.locator(".q-status", { hasText: "Expired" }).waitFor({ timeout: 15000 });
  assert.equal(await card.locator("button").count(), 0, "an expired question is never answerable");
  assert.equal(await card.getAttribute("data-state"), "expired");
  await page.waitForTimeout(300);
  await assertLastCardVisible("expired");
  await page.screenshot({ path: path.join(path.dirname(SCREENSHOT), "expired-viewport.png") });
  await shot("questions");
  assert.equal(await exitOf(child), 2, child.err);
});

test("a choice question answered in the app reaches the agent with the chosen option", async () => {
  const child = ask(["Which day for the meeting?", "--choice", "A", "--choice", "B", "--id", "qst_e2e_choice", "--json"]);
  const card = question("qst_e2e_choice");
  await card.locator("button.option", { hasText: "B" }).click();
  assert.equal(await exitOf(child), 0, child.err);
  const outcome = JSON.parse(child.out);
  assert.equal(outcome.state, "answered");
  assert.equal(outcome.approved, true);
  assert.deepEqual(outcome.answer, { type: "options", value: ["B"] });
  await card.locator(".q-status", { hasText: "Chosen: B" }).waitFor();
});

test("a question with several choices: the options ticked reach the agent", async () => {
  const child = ask(["Which files may I delete?", "--choice", "a.log", "--choice", "b.log", "--choice", "c.log",
    "--multiple", "--id", "qst_e2e_multiple", "--json"]);
  const card = question("qst_e2e_multiple");
  await card.locator("label.choice", { hasText: "a.log" }).click();
  await card.locator("label.choice", { hasText: "c.log" }).click();
  await card.locator("button", { hasText: "Send choice" }).click();
  assert.equal(await exitOf(child), 0, child.err);
  assert.deepEqual(JSON.parse(child.out).answer, { type: "options", value: ["a.log", "c.log"] });
});

test("a send whose answer is lost is retried with the same id and stored once", async () => {
  let posts = 0;
  const ids = new Set();
  await page.route("**/v1/device/messages", async (route) => {
    posts += 1;
    ids.add(JSON.parse(route.request().postData()).messageId);
    if (posts === 1) {
      // The relay stores the task, but its answer never reaches the app.
      await route.fetch();
      await route.abort("connectionreset");
    } else {
      await route.continue();
    }
  });
  const text = unique("Retried once");
  await page.locator("#task-text").fill(text);
  await page.locator("#send").click();
  const task = page.locator("li.task", { hasText: text });
  await task.locator(".reply", { hasText: `echo: ${text}` }).waitFor();
  // The reply can come through the conversation before the app's retry (the task was stored by the first send):
  // the send is retried all the same, until the relay's answer reaches the app.
  for (let i = 0; i < 100 && posts < 2; i++) await page.waitForTimeout(100);
  await page.unroute("**/v1/device/messages");
  assert.ok(posts >= 2, `${posts} requests`);
  assert.equal(ids.size, 1, "every retry carries the id chosen first");

  // Offline: the banner says so; back online, the app carries on.
  await context.setOffline(true);
  await page.locator('#banner[data-presence="disconnected"]').waitFor({ timeout: 20000 });
  await context.setOffline(false);
  await page.locator('#banner[data-presence="listening"]').waitFor({ timeout: 30000 });

  await page.reload();
  await page.locator("li.task", { hasText: text }).locator(".reply").first().waitFor();
  assert.equal(await page.locator("li.task", { hasText: text }).count(), 1);
  assert.equal(await page.locator("li.task", { hasText: text }).locator(".reply").count(), 1);
});

test("a text question answered in the app reaches the agent with the text", async () => {
  const child = ask(["Name for the release?", "--text", "--id", "qst_e2e_text", "--json"]);
  const card = question("qst_e2e_text");
  const answer = unique("Nebula");
  await card.locator("textarea").fill(answer);
  await card.locator("button", { hasText: "Send answer" }).click();
  assert.equal(await exitOf(child), 0, child.err);
  assert.deepEqual(JSON.parse(child.out).answer, { type: "text", value: answer });
});

test("answering a question already answered on another device shows the answer that counts, not the refused one", async () => {
  // A second device: the CLI, paired in a home of its own.
  const tabletHome = path.join(work, "tablet");
  mkdirSync(tabletHome, { recursive: true });
  const asTablet = async (args) => {
    const child = start(PACERELLE, args, { PACERELLE_HOME: tabletHome, PACERELLE_RELAY_URL: relayUrl });
    const timer = setTimeout(() => child.kill("SIGKILL"), 30000);
    const { code } = await child.done;
    clearTimeout(timer);
    return { code, out: child.out, err: child.err };
  };
  const pairing = await cliJson(["pair", "--name", "tablet"]);
  const joined = await asTablet(["device", "join", pairing.link, "--name", "Bob’s tablet"]);
  assert.equal(joined.code, 0, joined.err);

  // The browser does not learn of the tablet's answer before its own is sent: neither from the question list nor
  // from the conversation's `update` item (taken out of what the relay answers, until then). Its first reading
  // of the question after the refusal fails too (the network drops it): the app reads it again on its own.
  let hold = true;
  let refusedSeen = false;
  let rereadFailed;
  const rereadDropped = new Promise((resolve) => (rereadFailed = resolve));
  const answerUrl = "/v1/device/questions/qst_e2e_closed/answer";
  const onResponse = (r) => {
    if (r.url().includes(answerUrl)) refusedSeen = true;
  };
  page.on("response", onResponse);
  const listing = (url) => url.pathname === "/v1/device/questions";
  const conversation = (url) => url.pathname === "/v1/device/conversation";
  await page.route(listing, (route) => {
    if (!hold) return route.continue();
    if (refusedSeen) rereadFailed();
    return route.abort("connectionreset");
  });
  await page.route(conversation, async (route) => {
    let response;
    try {
      response = await route.fetch({ timeout: 0 });
    } catch {
      return route.abort("connectionreset").catch(() => {});
    }
    const json = await response.json();
    if (hold && Array.isArray(json.items)) {
      json.items = json.items.filter((i) => !(i.kind === "update" && i.subjectId === "qst_e2e_closed"));
    }
    await route.fulfill({ response, json }).catch(() => {});
  });
  const child = ask(["Ship the release notes?", "--id", "qst_e2e_closed", "--json"]);
  const card = question("qst_e2e_closed");
  await card.locator("button.deny").waitFor();
  const yes = await asTablet(["--json", "answer", "qst_e2e_closed", "yes"]);
  assert.equal(yes.code, 0, yes.err);
  assert.equal(await exitOf(child), 0, child.err);
  assert.equal(JSON.parse(child.out).answeredByName, "Bob’s tablet");

  const answered = page.waitForResponse((r) => r.url().includes(answerUrl));
  await card.locator("button.deny").click();
  assert.equal((await answered).status(), 409);
  await rereadDropped;
  hold = false;
  page.off("response", onResponse);
  await card.locator(".q-status", { hasText: "Approved — by Bob’s tablet" }).waitFor();
  assert.equal(await card.getAttribute("data-state"), "answered");
  assert.equal(await card.locator("button").count(), 0);
  assert.match(await card.textContent(), /Your answer \(Denied\) was not recorded/);
  assert.equal(await card.locator(".q-status.denied").count(), 0, "the refused no is never shown as the answer");
  await page.locator("#toast", { hasText: "Already answered by Bob’s tablet: Approved" }).waitFor();
  await shot("answered-elsewhere");
  await page.unroute(listing);
  await page.unroute(conversation);

  // After a reload, the same: the answer that counts, read from its copy.
  await page.reload();
  await question("qst_e2e_closed").locator(".q-status", { hasText: "Approved — by Bob’s tablet" }).waitFor();

  const left = await asTablet(["device", "leave"]);
  assert.equal(left.code, 0, left.err);
});

test("`pacerelle ask --here` answered at the computer: the card says so with the answer, never “this device”, and `ask` exits 0", async () => {
  const child = askHere(["Restart the staging database?", "--id", "qst_e2e_here"]);
  const card = question("qst_e2e_here");
  await card.locator("button.approve").waitFor();
  child.stdin.write("yes\n");
  assert.equal(await exitOf(child), 0, child.err);
  assert.match(child.err, /answered here at the computer/);
  await card.locator(".q-status", { hasText: "Answered at the computer: yes" }).waitFor({ timeout: 20000 });
  assert.equal(await card.getAttribute("data-state"), "answered");
  assert.equal(await card.locator(".q-status").getAttribute("data-channel"), "host");
  assert.equal(await card.locator("button").count(), 0);
  assert.doesNotMatch(await card.textContent(), /this device|another device/);
  await shot("answered-at-the-computer");

  // A no typed at the computer shows as denied; an answer the app then tries is refused and says who answered.
  const no = askHere(["Drop the cache tables?", "--id", "qst_e2e_here_no"]);
  const noCard = question("qst_e2e_here_no");
  await noCard.locator("button.approve").waitFor();
  no.stdin.write("no\n");
  assert.equal(await exitOf(no), 1, no.err);
  await noCard.locator(".q-status.denied", { hasText: "Answered at the computer: no" }).waitFor({ timeout: 20000 });

  // After a reload, the same: read from the copy the agent sealed.
  await page.reload();
  await question("qst_e2e_here").locator(".q-status", { hasText: "Answered at the computer: yes" }).waitFor();
  await question("qst_e2e_here_no").locator(".q-status", { hasText: "Answered at the computer: no" }).waitFor();
});

test("a question answered at the computer before the app's answer is sent: the refusal names the computer and its answer", async () => {
  // The app does not learn of the answer at the computer before its own is sent: the listing is held until the
  // click, the update item until the refusal came back (a conversation answer that reaches the route late must
  // not tell the app first).
  let hold = true;
  let holdUpdates = true;
  const listing = (url) => url.pathname === "/v1/device/questions";
  const conversation = (url) => url.pathname === "/v1/device/conversation";
  await page.route(listing, (route) => (hold ? route.abort("connectionreset") : route.continue()));
  await page.route(conversation, async (route) => {
    let response;
    try {
      response = await route.fetch({ timeout: 0 });
    } catch {
      return route.abort("connectionreset").catch(() => {});
    }
    const json = await response.json();
    if (holdUpdates && Array.isArray(json.items)) {
      json.items = json.items.filter((i) => !(i.kind === "update" && i.subjectId === "qst_e2e_here_first"));
    }
    await route.fulfill({ response, json }).catch(() => {});
  });
  const child = askHere(["Bump the version?", "--id", "qst_e2e_here_first"]);
  const card = question("qst_e2e_here_first");
  await card.locator("button.deny").waitFor();
  child.stdin.write("y\n");
  assert.equal(await exitOf(child), 0, child.err);
  const answered = page.waitForResponse((r) => r.url().includes("/v1/device/questions/qst_e2e_here_first/answer"));
  hold = false;
  await card.locator("button.deny").click();
  assert.equal((await answered).status(), 409);
  holdUpdates = false;
  await card.locator(".q-status", { hasText: "Answered at the computer: yes" }).waitFor();
  assert.match(await card.textContent(), /Your answer \(Denied\) was not recorded/);
  await page.locator("#toast", { hasText: "Already answered at the computer: yes. Your answer (Denied) was not recorded." }).waitFor();
  await page.unroute(listing);
  await page.unroute(conversation);
});

test("a yes/no question that needs 2 approvals: the browser's yes is recorded and waits for 1 more, the tablet's yes makes `pacerelle ask` exit 0; a no from the browser denies at once (exit 1)", async () => {
  const tablet = await terminalDevice("tablet-approvals", "Bob’s tablet");
  const sent = watchAnswers();
  await page.evaluate(() => window.scrollTo(0, document.documentElement.scrollHeight));
  const child = ask(["Deploy?", "--approvals", "2", "--id", "qst_e2e_two"]);
  const card = question("qst_e2e_two");
  await card.locator("button.approve").waitFor();
  // Everyone asked sees what it needs, before any answer.
  assert.equal(await card.locator(".q-approvals").textContent(), "Needs 2 approvals — 0 of 2 so far");
  assert.equal(await card.locator(".approval-mark").count(), 2);
  assert.equal(await card.locator(".approval-mark.given").count(), 0);
  assert.deepEqual(await card.locator(".q-controls button").allTextContents(), ["Approve", "Deny"]);

  // The browser approves: recorded, not an error; the question stays open, and this browser has nothing left to answer.
  await card.locator("button.approve").click();
  await card.locator(".q-status.waiting", { hasText: "You approved — waiting for 1 more" }).waitFor();
  assert.equal(await card.locator(".q-approvals").textContent(), "Needs 2 approvals — 1 of 2 so far");
  assert.equal(await card.locator(".approval-mark.given").count(), 1);
  assert.equal(await card.getAttribute("data-state"), "pending");
  assert.equal(await card.locator("button").count(), 0, "no buttons left for a device that approved");
  assert.equal(await card.locator(".q-status.error, .q-status.not-recorded").count(), 0);
  assert.equal(sent.bodies.qst_e2e_two.length, 1);
  assert.equal("closes" in sent.bodies.qst_e2e_two[0], false, "a yes does not close the question");
  // The relay kept the browser's yes: the tablet reads it among the answers, and `ask` is still waiting.
  const seen = await questionSeenBy(tablet, "qst_e2e_two");
  assert.deepEqual([seen.state, seen.approvals, seen.answers], ["pending", 2, [deviceId]]);
  assert.ok(await stillRunningAfter(child, 1500), `ask ended after one approval: ${child.out}${child.err}`);

  // Read again (a reload): the same, and the card fits a 390 × 844 screen.
  await page.reload();
  await card.locator(".q-status.waiting", { hasText: "You approved — waiting for 1 more" }).waitFor();
  assert.equal(await card.locator(".q-approvals").textContent(), "Needs 2 approvals — 1 of 2 so far");
  assert.equal(await card.locator("button").count(), 0);
  await page.evaluate(() => window.scrollTo(0, document.documentElement.scrollHeight));
  await page.waitForTimeout(300);
  await assertFitsWidth("a card waiting for approvals", card, card.locator(".q-approvals"), card.locator(".q-status"));
  await assertLastCardVisible("waiting for approvals");
  await shot("approvals-waiting");

  // The tablet's yes is the second approval: `ask` exits 0, and the card reads answered, as usual.
  const yes = await tablet.run(["--json", "answer", "qst_e2e_two", "yes"]);
  assert.equal(yes.code, 0, yes.err);
  assert.equal(await exitOf(child), 0, `${child.out}${child.err}`);
  await card.locator(".q-status.answered", { hasText: "Approved — by Bob’s tablet" }).waitFor({ timeout: 15000 });
  assert.equal(await card.getAttribute("data-state"), "answered");
  assert.equal(await card.locator(".q-approvals, .q-status.waiting").count(), 0);

  // The tablet approves first: the browser reads the count again on its own (the relay writes no update for a yes
  // that others must join), and still has its buttons; its yes is then the second.
  const second = ask(["Deploy the hotfix?", "--approvals", "2", "--id", "qst_e2e_two_second"]);
  const secondCard = question("qst_e2e_two_second");
  await secondCard.locator("button.approve").waitFor();
  assert.equal((await tablet.run(["answer", "qst_e2e_two_second", "yes"])).code, 0);
  await secondCard.locator(".q-approvals", { hasText: "Needs 2 approvals — 1 of 2 so far" }).waitFor({ timeout: 15000 });
  assert.deepEqual(await secondCard.locator(".q-controls button").allTextContents(), ["Approve", "Deny"]);
  assert.equal(await secondCard.locator(".q-status.waiting").count(), 0, "this browser has not approved");
  await secondCard.locator("button.approve").click();
  assert.equal(await exitOf(second), 0, `${second.out}${second.err}`);
  await secondCard.locator(".q-status.answered", { hasText: "Approved — by this device" }).waitFor();

  // A no from the browser closes the question at once: `ask` exits 1 without waiting for the tablet.
  const denied = ask(["Deploy to every region?", "--approvals", "2", "--id", "qst_e2e_two_no"]);
  const deniedCard = question("qst_e2e_two_no");
  await deniedCard.locator("button.deny").click();
  assert.equal(await exitOf(denied, 15000), 1, `${denied.out}${denied.err}`);
  await deniedCard.locator(".q-status.denied", { hasText: "Denied — by this device" }).waitFor();
  assert.equal(await deniedCard.locator(".q-approvals, button").count(), 0);
  assert.deepEqual(sent.bodies.qst_e2e_two_no.map((b) => b.closes), [true], "a no closes the question");
  sent.stop();

  const left = await tablet.run(["device", "leave"]);
  assert.equal(left.code, 0, left.err);
});

/**
 * A `pacerelle-mcp` of the test's agent, listening as session `name` in a project folder `folder`, driven over stdio
 * as an MCP host drives it (JSON-RPC lines). `call(tool, args)` gives the tool's structured result.
 */
async function mcpSession(name, folder) {
  const dir = path.join(work, "projects", folder);
  mkdirSync(dir, { recursive: true });
  const child = spawn(MCP, [], {
    cwd: dir,
    env: {
      ...process.env,
      PACERELLE_HOME: home,
      PACERELLE_RELAY_URL: relayUrl,
      PACERELLE_AGENT_ID: agentId,
      PACERELLE_AGENT_TOKEN: agentToken,
      PACERELLE_SESSION: name,
      RUST_LOG: "warn",
    },
    stdio: ["pipe", "pipe", "pipe"],
  });
  children.push(child);
  child.done = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  let buffer = "";
  let err = "";
  const waiting = new Map();
  child.stderr.on("data", (d) => (err += d));
  child.stdout.on("data", (d) => {
    buffer += d;
    let line;
    while ((line = buffer.indexOf("\n")) >= 0) {
      const text = buffer.slice(0, line);
      buffer = buffer.slice(line + 1);
      if (!text.trim()) continue;
      const message = JSON.parse(text);
      if (message.id !== undefined && waiting.has(message.id)) waiting.get(message.id)(message);
    }
  });
  let next = 0;
  const request = (method, params) =>
    new Promise((resolve, reject) => {
      const id = ++next;
      const timer = setTimeout(() => reject(new Error(`${name}: no answer to ${method}: ${err}`)), 30000);
      waiting.set(id, (message) => {
        clearTimeout(timer);
        if (message.error) reject(new Error(`${name}: ${method}: ${JSON.stringify(message.error)}`));
        else resolve(message.result);
      });
      child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
    });
  await request("initialize", {
    protocolVersion: "2025-06-18",
    capabilities: {},
    clientInfo: { name: "web-e2e", version: "1" },
  });
  child.stdin.write(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) + "\n");
  const call = async (tool, args = {}) => {
    const result = await request("tools/call", { name: tool, arguments: args });
    assert.ok(!result.isError, `${name}: ${tool}: ${JSON.stringify(result.content)}`);
    return result.structuredContent;
  };
  const stop = async () => {
    child.stdin.end();
    await Promise.race([child.done, new Promise((r) => setTimeout(r, 10000))]);
  };
  return { call, stop };
}

test("an agent with two sessions in two folders: the app sends a task to one of them only", async () => {
  const api = await mcpSession("api", "billing-api");
  const web = await mcpSession("web", "storefront");
  // Each takes its session's lease (list_sessions takes it when it is free).
  assert.equal((await api.call("list_sessions")).thisSession, "api");
  const listed = await web.call("list_sessions");
  assert.deepEqual(
    listed.sessions.map((s) => [s.name, s.folder]).filter(([n]) => n !== "default"),
    [["api", "billing-api"], ["web", "storefront"]],
  );
  // The composer offers the sessions once the status has them (read every 5 s).
  const row = page.locator("#task-session-row");
  await row.waitFor({ state: "visible", timeout: 20000 });
  const options = await page.locator("#task-session option").evaluateAll((o) => o.map((n) => [n.value, n.textContent]));
  assert.deepEqual(options.slice(0, 1), [["", "Any session"]]);
  for (const expected of [["api", "api (billing-api)"], ["web", "web (storefront)"]]) {
    assert.ok(options.some(([v, t]) => v === expected[0] && t === expected[1]), JSON.stringify(options));
  }
  await page.locator("#task-session").selectOption("web");
  const text = unique("Fix the checkout button");
  await page.locator("#task-text").fill(text);
  await page.locator("#toast").waitFor({ state: "hidden", timeout: 10000 });
  await agentsShot("sessions-390");
  await page.locator("#send").click();
  await page.locator("li.task", { hasText: text }).locator(".meta .to", { hasText: "to web" }).waitFor();
  // Only web receives it: api's wait ends empty, and the echo agent (the default session) never answers it.
  const got = await web.call("wait_for_messages", { timeoutSeconds: 10 });
  assert.deepEqual(got.messages.map((m) => m.text), [text]);
  assert.deepEqual((await api.call("wait_for_messages", { timeoutSeconds: 1 })).messages, []);
  await web.call("reply", { sourceMessageId: got.messages[0].messageId, text: `web: ${text}` });
  await web.call("mark_processed", { messageId: got.messages[0].messageId });
  const task = page.locator("li.task", { hasText: text });
  await task.locator(".reply", { hasText: `web: ${text}` }).waitFor();
  await page.locator(`li.task[data-state="processed"]`).filter({ hasText: text }).waitFor({ timeout: 20000 });
  assert.equal(await task.locator(".reply", { hasText: `echo: ${text}` }).count(), 0);

  // Once they are gone, only the echo agent's default session is left: the choice hides again.
  await api.stop();
  await web.stop();
  await row.waitFor({ state: "hidden", timeout: 20000 });
});

test("notifications and cancelled questions are shown as such", async () => {
  const note = await cliJson(["notify", "3 files renamed in drafts/", "--title", "Drafts tidied", "--level", "success"]);
  await page.locator(`li.notification[data-id="${note.notificationId}"]`, { hasText: "3 files renamed" }).waitFor();

  const child = ask(["Send the draft to the team?", "--id", "qst_e2e_cancel"]);
  const card = question("qst_e2e_cancel");
  await card.locator("button.approve").waitFor();
  const cancelled = await cli(["cancel", "qst_e2e_cancel"]);
  assert.equal(cancelled.code, 0, cancelled.err);
  assert.equal(await exitOf(child), 2, child.err);
  await card.locator(".q-status", { hasText: "Cancelled" }).waitFor({ timeout: 15000 });
  assert.equal(await card.locator("button").count(), 0);
});

// ── the gate (`pacerelle hook claude-code`): what is approved, exactly ──────────────────────────────────────

/** A project folder under the test's work folder, with `.pacerelle/policy.toml`. */
function project(name, policy) {
  const dir = path.join(work, name);
  mkdirSync(path.join(dir, ".pacerelle"), { recursive: true });
  writeFileSync(path.join(dir, ".pacerelle/policy.toml"), policy);
  return dir;
}

/**
 * Starts the real gate, `pacerelle hook claude-code --budget …`, on one PreToolUse call of Claude Code (`tool` with
 * `input`, in the project folder `cwd`), as the agent's host runs it: the call on its standard input, the decision
 * on its standard output, the conclusion in its log.
 */
function gate(cwd, tool, input, budget = 60) {
  const child = start(PACERELLE, ["hook", "claude-code", "--budget", String(budget)], {
    PACERELLE_RELAY_URL: relayUrl,
    PACERELLE_LOG: "warn,pacerelle::gate=info",
  }, "pipe");
  child.stdin.end(JSON.stringify({
    session_id: "8f2d7c1e-1b2a-4c3d-9e8f-0a1b2c3d4e5f",
    cwd,
    hook_event_name: "PreToolUse",
    tool_name: tool,
    tool_input: input,
  }));
  return child;
}

/** The gate's decision once it exits: `{allow, reason, conclusion}` (the conclusion from its log line "decided"). */
async function decisionOf(child) {
  const code = await exitOf(child, 90000);
  assert.equal(code, 0, child.err);
  const h = JSON.parse(child.out).hookSpecificOutput;
  const log = child.err.replace(/\x1b\[[0-9;]*m/g, "");
  const conclusion = (log.match(/conclusion=(\w+)/) || [])[1];
  return { allow: h.permissionDecision === "allow", reason: h.permissionDecisionReason, conclusion };
}

/** The ids of the question cards the app shows. */
const shownQuestions = () => page.locator("li.question").evaluateAll((nodes) => nodes.map((n) => n.dataset.id));

/** The card of the first question the app shows that is not among `known`, once it is there: `{id, card}`. */
async function newQuestion(known, what) {
  for (let i = 0; i < 150; i++) {
    const fresh = (await shownQuestions()).find((id) => !known.includes(id));
    if (fresh) return { id: fresh, card: question(fresh) };
    await page.waitForTimeout(200);
  }
  throw new Error(`the app shows no new question for ${what}`);
}

/** The questions the relay holds for the device. */
async function questionsAsked() {
  return (await deviceItems()).filter((i) => i.kind === "question").map((i) => i.id);
}

/** Each of `locators` lies within the 390 px of the screen's width, and the page does not scroll sideways. */
async function assertFitsWidth(what, ...locators) {
  const { width } = page.viewportSize();
  assert.equal(width, 390);
  for (const l of locators) {
    const box = await l.boundingBox();
    assert.ok(box && box.x >= 0 && box.x + box.width <= width + 0.5, `${what}: ${JSON.stringify(box)} is outside 0–${width}px`);
  }
  const scrollWidth = await page.evaluate(() => document.scrollingElement.scrollWidth);
  assert.ok(scrollWidth <= width, `${what}: the page is ${scrollWidth}px wide`);
}

const isMonospace = (locator) => locator.evaluate((n) => /mono|consolas|menlo/i.test(getComputedStyle(n).fontFamily));

test("what is approved, exactly: a gated Edit's details are shown whole, in monospace, folded behind “Show all”, its diff's added and removed lines coloured", async () => {
  const folder = project("edit-project", 'default = "ask"\n');
  await page.evaluate(() => window.scrollTo(0, document.documentElement.scrollHeight));
  const known = await shownQuestions();
  const lines = Array.from({ length: 40 }, (_, i) => `    let step_${i} = check(${i}); // the migration of table ${i}`);
  const input = { file_path: path.join(folder, "src/lib.rs"), old_string: lines.join("\n"), new_string: lines.join("\n").replace("check(3)", "check(30)") };
  const editing = gate(folder, "Edit", input);
  const { card } = await newQuestion(known, "the Edit");
  const details = card.locator("pre.q-details");
  await details.waitFor();
  assert.ok(await isMonospace(details), "the details are in monospace");
  // The whole text is in the page, line for line as the gate wrote it, folded or not.
  const text = await details.textContent();
  assert.match(text, /^Tool: Edit\nWhy asked: .+\nDirectory: /);
  assert.ok(text.includes(`Directory: ${folder}\n`), text);
  assert.ok(text.includes(`"new_string": ${JSON.stringify(input.new_string)}`), "the input is there, whole");
  assert.equal(await details.locator(".line.heading", { hasText: "Input:" }).count(), 1);
  // The gate's diff (docs/hooks.md): its heading with the file and the counts, the line removed and the line added,
  // each in its own colour, marked across the width; the context as written.
  assert.deepEqual(await details.locator(".line.heading").allTextContents(), [`Diff: ${input.file_path} (+1 -1)`, "Input:"]);
  assert.deepEqual(await details.locator(".line.del").allTextContents(), [`-${lines[3]}`]);
  assert.deepEqual(await details.locator(".line.add").allTextContents(), [`+${lines[3].replace("check(3)", "check(30)")}`]);
  assert.deepEqual(await details.locator(".line.context").allTextContents(), [1, 2, 4, 5].map((i) => ` ${lines[i]}`));
  const look = (l) => l.evaluate((n) => [getComputedStyle(n).color, getComputedStyle(n).backgroundColor]);
  const [added, removed, plain] = [await look(details.locator(".line.add")), await look(details.locator(".line.del")),
    await look(details.locator(".line.context").first())];
  assert.notEqual(added[0], plain[0], "an added line has its own colour");
  assert.notEqual(removed[0], plain[0], "a removed line has its own colour");
  assert.notEqual(added[0], removed[0]);
  for (const [what, bg] of [["added", added[1]], ["removed", removed[1]]]) {
    assert.notEqual(bg, "rgba(0, 0, 0, 0)", `a ${what} line is marked`);
  }
  assert.ok((await details.locator(".line.add").boundingBox()).width > 250, "marked across the width");
  // Long: folded, with "Show all", which unfolds it; "Show less" folds it again.
  const toggle = card.locator("button.show-all");
  assert.equal(await toggle.textContent(), "Show all");
  assert.equal(await toggle.getAttribute("aria-expanded"), "false");
  const folded = (await details.boundingBox()).height;
  const full = await details.evaluate((n) => n.scrollHeight);
  assert.ok(full > 1.5 * folded, `folded to ${folded}px of ${full}px`);
  await toggle.click();
  assert.equal(await toggle.textContent(), "Show less");
  assert.ok((await details.boundingBox()).height >= full - 1, "unfolded, all of it shows");
  // Never cut sideways: long lines wrap within the screen.
  await assertFitsWidth("the details", card, details);
  await shot("edit-details");
  await toggle.click();
  assert.equal(await toggle.textContent(), "Show all");
  assert.equal((await details.boundingBox()).height, folded);
  await card.locator("button.deny").click();
  const denied = await decisionOf(editing);
  assert.equal(denied.allow, false);
  assert.equal(denied.conclusion, "denied");
});

// ── grants: "Allow for …" (docs/hooks.md "Grants", crypto.md §4.8b) ────────────────────────────────────────

/** A policy that asks every call and offers grants of 15 min or 1 h; `cargo test …` may also be granted as a prefix. */
const GRANT_POLICY = `default = "ask"
grant = ["15m", "1h"]

[[rule]]
tool = "Bash"
command = "cargo *"
decision = "ask"
grant_prefix = ["cargo test"]
`;

/** Whether a grant in an answer payload carries `publicKey`'s signature of its bytes (crypto.md §4.8b), checked by node. */
function grantSignedBy(publicKey, agent, device, payload) {
  const bytes = signedGrantBytes({
    agentId: agent,
    deviceId: device,
    questionId: payload.questionId,
    questionDigest: payload.questionDigest,
    grantedAt: payload.answeredAt,
    grant: payload.grant,
  });
  const key = createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: publicKey }, format: "jwk" });
  return nodeVerify(null, bytes, key, Buffer.from(payload.grant.signature, "base64url"));
}

/** The project of the grant tests, and the grant given there (the question's id). */
let grantFolder;
let grantId;

test("a gate question that offers grants: “Allow for” 15 min at 390×844 lets the same command run granted, and another is still asked", async () => {
  grantFolder = project("grants-project", GRANT_POLICY);
  await page.evaluate(() => window.scrollTo(0, document.documentElement.scrollHeight));
  const known = await shownQuestions();
  const first = gate(grantFolder, "Bash", { command: "cargo test" });
  const { id, card } = await newQuestion(known, "`cargo test`");
  grantId = id;
  await card.locator("button.allow-for").waitFor();
  assert.match(await card.locator(".q-text").textContent(), /cargo test/);
  assert.match(await card.locator("pre.q-details").textContent(), /\nCommand:\ncargo test\n/);
  // Allow and Deny as for any approval, and Allow for …, which opens the menu.
  assert.deepEqual(await card.locator(".q-controls > button").allTextContents(), ["Allow", "Deny", "Allow for …"]);
  const menu = card.locator(".grant-menu");
  assert.equal(await menu.isVisible(), false);
  assert.equal(await card.locator("button.allow-for").getAttribute("aria-expanded"), "false");
  await card.locator("button.allow-for").click();
  await menu.waitFor();
  assert.equal(await card.locator("button.allow-for").getAttribute("aria-expanded"), "true");
  assert.deepEqual(await menu.locator("button.grant-duration").allTextContents(), ["15 min", "1 h"]);
  // The offer's two scopes: the exact command (chosen unless changed) and the policy's prefix, each with the folder.
  const scopes = menu.locator("label.grant-scope");
  assert.equal(await scopes.count(), 2);
  assert.deepEqual(await menu.locator("label.grant-scope code.scope-code").allTextContents(), ["cargo test", "cargo test …"]);
  assert.deepEqual(await menu.locator("label.grant-scope .scope-how").allTextContents(), ["exactly this command", "with any arguments"]);
  assert.deepEqual(await menu.locator("label.grant-scope .scope-folder code").allTextContents(), [grantFolder, grantFolder]);
  assert.ok(await isMonospace(scopes.nth(1).locator("code.scope-code")), "a command is shown in monospace");
  assert.equal(await scopes.nth(0).locator("input").isChecked(), true);
  assert.equal(await scopes.nth(1).locator("input").isChecked(), false);
  // Usable on a phone: every control within the screen's width, none under the composer once scrolled to.
  await menu.locator("button.grant-duration").last().scrollIntoViewIfNeeded();
  await assertFitsWidth("the grant menu", card, menu, ...(await menu.locator("button, label").all()));
  const composer = await page.locator("#composer").boundingBox();
  const last = await menu.locator("button.grant-cancel").boundingBox();
  assert.ok(last.y + last.height <= composer.y + 0.5, "the menu's last button is above the composer");
  await page.screenshot({ path: path.join(path.dirname(SCREENSHOT), "grant-menu-viewport.png") });
  // Cancel closes it, the menu opens again as it was.
  await menu.locator("button.grant-cancel").click();
  assert.equal(await menu.isVisible(), false);
  await card.locator("button.allow-for").click();
  await menu.locator("button.grant-duration", { hasText: "15 min" }).click();

  const granted = await decisionOf(first);
  assert.ok(granted.allow, granted.reason);
  assert.equal(granted.conclusion, "approved");
  assert.match(granted.reason, /granted for the same calls until/);
  await card.locator(".q-status", { hasText: "Approved — by this device" }).waitFor();
  const line = card.locator(".q-granted");
  await line.waitFor();
  assert.match(await line.textContent(), /^Also allowed until \d\d:\d\d: cargo test exactly this command/);

  // What the browser sealed: the yes, signed as ever, and the grant of the exact command for 15 min from the
  // answer, signed with the browser's key over the grant's bytes (checked here with node's Ed25519; the gate,
  // which allowed the call, checked it with Rust's).
  const payload = await sealedAnswer(id);
  const { signingKey } = await storedSigning();
  assert.deepEqual(Object.keys(payload), ["questionId", "answer", "answeredAt", "questionDigest", "signature", "grant"]);
  assert.deepEqual(payload.answer, { type: "yes" });
  assert.ok(signedBy(signingKey, agentId, deviceId, payload), "the yes is signed");
  assert.deepEqual(Object.keys(payload.grant), ["scope", "expiresAt", "policy", "signature"]);
  assert.deepEqual(payload.grant.scope, { tool: "Bash", command: "cargo test", match: "exact", folder: grantFolder });
  assert.equal(Date.parse(payload.grant.expiresAt) - Date.parse(payload.answeredAt), 15 * 60 * 1000);
  const policyDigest = createHash("sha256").update(GRANT_POLICY).digest("base64url");
  assert.equal(payload.grant.policy, policyDigest);
  assert.ok(grantSignedBy(signingKey, agentId, deviceId, payload), "the grant carries the browser key's signature");
  const wider = { ...payload, grant: { ...payload.grant, scope: { ...payload.grant.scope, match: "prefix" } } };
  assert.ok(!grantSignedBy(signingKey, agentId, deviceId, wider), "a wider scope is not what was signed");

  // The same command again: it runs, granted, and nothing is asked.
  const before = await questionsAsked();
  const again = await decisionOf(gate(grantFolder, "Bash", { command: "cargo test" }, 10));
  assert.ok(again.allow, again.reason);
  assert.equal(again.conclusion, "granted");
  assert.match(again.reason, new RegExp(`^allowed by grant ${id}, given on Ana’s phone`));
  assert.deepEqual(await questionsAsked(), before, "no question was asked");

  // Another command (the exact scope was chosen, not the prefix): asked, with its own offer.
  const other = gate(grantFolder, "Bash", { command: "cargo test -p core" });
  const next = await newQuestion([...known, id], "`cargo test -p core`");
  await next.card.locator("button.allow-for").waitFor();
  await next.card.locator("button.deny").click();
  const denied = await decisionOf(other);
  assert.equal(denied.allow, false);
  assert.equal(denied.conclusion, "denied");
  await shot("grants");
});

test("the grants screen lists the grant with what it covers, who gave it, until when and its uses; Revoke makes the next call ask again", async () => {
  assert.ok(grantId, "the grant of the test before");
  // One more use, so that the screen counts two (the run after the grant, and this one).
  const used = await decisionOf(gate(grantFolder, "Bash", { command: "cargo test" }, 10));
  assert.equal(used.conclusion, "granted", used.reason);

  await page.locator("#open-settings").click();
  await page.locator("#screen-settings").waitFor();
  await page.locator("#open-grants").click();
  await page.locator("#screen-grants").waitFor();
  assert.equal(new URL(page.url()).hash, "#grants");
  const card = page.locator(`#grants-list li.grant[data-grant-id="${grantId}"]`);
  await card.waitFor();
  assert.equal(await card.getAttribute("data-state"), "live");
  assert.equal(await card.locator(".grant-uses").textContent(), "2 uses");
  // What it covers, read from the signed grant in the answer's copy: the exact command, in monospace, in its folder.
  assert.equal(await card.locator(".grant-scope code.scope-code").textContent(), "cargo test");
  assert.equal(await card.locator(".grant-scope .scope-how").textContent(), "exactly this command");
  assert.equal(await card.locator(".grant-scope .scope-folder code").textContent(), grantFolder);
  assert.ok(await isMonospace(card.locator("code.scope-code")));
  const facts = Object.fromEntries(
    await card.locator("dl.facts dt").evaluateAll((dts) => dts.map((dt) => [dt.textContent, dt.nextElementSibling.textContent])),
  );
  const record = (await page.evaluate(async () => {
    const device = await (await import("/app/store.js")).loadDevice();
    const res = await fetch("/v1/device/grants", { headers: { Authorization: `Bearer ${device.deviceToken}` } });
    return res.json();
  })).grants.find((g) => g.grantId === grantId);
  const hhmm = (iso) => new Date(iso).toLocaleTimeString("en-GB", { hour: "2-digit", minute: "2-digit", timeZone: "Europe/Paris" });
  assert.equal(record.uses, 2);
  assert.equal(facts["Granted by"], "this device");
  assert.equal(facts.Granted, hhmm(record.grantedAt));
  assert.match(facts.Until, new RegExp(`^${hhmm(record.expiresAt)} \\(1[45] min left\\)$`));
  assert.equal(facts.Uses, `2, last at ${hhmm(record.lastUsedAt)}`);
  assert.equal(facts.Question, "Allow Claude Code to run `cargo test`?");
  await assertFitsWidth("the grants screen", card, card.locator("button.revoke"));
  await page.screenshot({ path: path.join(path.dirname(SCREENSHOT), "grants-viewport.png") });

  // Revoke: the relay records it (this device, now), the card says so and offers nothing more.
  await card.locator("button.revoke").click();
  const revoked = page.locator(`#grants-list li.grant[data-grant-id="${grantId}"][data-state="revoked"]`);
  await revoked.waitFor();
  assert.equal(await revoked.locator(".grant-state").textContent(), "Revoked");
  assert.equal(await revoked.locator("button.revoke").count(), 0);
  await revoked.locator("dd", { hasText: /by this device$/ }).waitFor();
  await shot("grants-screen");

  // The next `cargo test` is asked again.
  await page.locator("#grants-back").click();
  await page.locator("#screen-settings").waitFor();
  await page.locator("#settings-back").click();
  await page.locator("#screen-conversation").waitFor();
  const known = await shownQuestions();
  const asking = gate(grantFolder, "Bash", { command: "cargo test" });
  const { card: asked } = await newQuestion(known, "`cargo test` after the revocation");
  await asked.locator("button.deny").click();
  const denied = await decisionOf(asking);
  assert.equal(denied.allow, false);
  assert.equal(denied.conclusion, "denied");

  // Reloaded on the grants screen, it lists the grant revoked.
  await page.goto(`${relayUrl}/#grants`);
  await page.locator(`#grants-list li.grant[data-grant-id="${grantId}"][data-state="revoked"]`).waitFor();
  assert.equal(await page.locator(`#grants-list li.grant[data-grant-id="${grantId}"] .grant-uses`).textContent(), "2 uses");
  await page.locator("#grants-back").click();
  await page.locator("#screen-settings").waitFor();
  await page.locator("#settings-back").click();
  await page.locator("#screen-conversation").waitFor();
  assert.equal(new URL(page.url()).hash, "");
});

// ── Partner mode: a product's user pairs under the product's look and answers their own questions ──────

/** Whether this CLI has Partner mode's `pacerelle user` (the test that needs it is skipped otherwise). */
function hasUserCommand() {
  try {
    execFileSync(PACERELLE, ["user", "connect", "--help"], { stdio: "pipe" });
    return true;
  } catch {
    return false;
  }
}

/** The WCAG contrast ratio of two computed colours (`rgb(r, g, b)`). */
function contrast(a, b) {
  const lum = (css) => {
    const [r, g, bl] = css.match(/\d+(\.\d+)?/g).slice(0, 3).map((v) => {
      const x = Number(v) / 255;
      return x <= 0.04045 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * bl;
  };
  const [hi, lo] = [lum(a), lum(b)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
}

/** A page's stored pairing, without its keys. */
async function storedPairing(target) {
  return target.evaluate(async () => {
    const db = await new Promise((resolve, reject) => {
      const req = indexedDB.open("pacerelle");
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
    // The pairing the app shows (one per agent is kept, at "pairing:<agentId>").
    const device = await (await import("/app/store.js")).loadDevice();
    db.close();
    return { deviceId: device.deviceId, role: device.role, user: device.user, branding: device.branding };
  });
}

const USER_COMMAND = hasUserCommand() ? false : "this pacerelle has no `user` command (Partner mode's CLI)";

test("Partner mode: a user's link shows the product's name, colour and icon; the user pairs and approves the question asked for them", { skip: USER_COMMAND }, async () => {
  const svg =
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64"><rect width="64" height="64" rx="14" fill="#0a7d5a"/>' +
    '<path d="M17 33l10 10 20-22" stroke="#fff" stroke-width="7" fill="none"/></svg>';
  const iconFile = path.join(work, "shop-icon.svg");
  writeFileSync(iconFile, svg);
  const iconUrl = `data:image/svg+xml;base64,${Buffer.from(svg).toString("base64")}`;
  const made = await cli(["user", "connect", "alice", "--name", "Alice", "--accent", "#0a7d5a", "--icon", iconFile, "--json"]);
  assert.equal(made.code, 0, made.err);
  const connected = JSON.parse(made.out);
  assert.equal(connected.externalId, "alice");
  assert.equal(connected.name, "Alice");
  assert.match(connected.link, /\/pair#v1\./);

  // Alice's phone: a browser of its own (the owner's phone stays paired in the other).
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
  try {
    const phone = await browser.newContext({
      viewport: { width: 390, height: 844 },
      deviceScaleFactor: 2,
      isMobile: true,
      hasTouch: true,
      locale: "en-GB",
      colorScheme: "light",
      reducedMotion: "reduce",
    });
    const seen = [];
    phone.on("request", (r) => seen.push(r.url()));
    const alice = await phone.newPage();
    alice.setDefaultTimeout(20000);
    const errors = [];
    alice.on("console", (m) => {
      if (m.type() === "error" && !/Failed to load resource/.test(m.text())) errors.push(`console: ${m.text()}`);
    });
    alice.on("pageerror", (e) => errors.push(`page error: ${e.message}`));

    // Before accepting: the product's name and icon, who this phone will answer as, the accent colour.
    await alice.goto(connected.link);
    await alice.locator("#pair-form").waitFor();
    assert.equal(new URL(alice.url()).hash, "");
    assert.equal(await alice.locator("#pair-agent").textContent(), "Ana’s laptop — Claude Code");
    assert.equal(await alice.locator("#agent-name").textContent(), "Ana’s laptop — Claude Code");
    assert.equal(await alice.locator("#pair-user-name").textContent(), "Alice");
    assert.ok(await alice.locator("#pair-user").isVisible());
    for (const icon of ["#pair-icon", "#brand-icon"]) {
      assert.equal(await alice.locator(icon).getAttribute("src"), iconUrl);
      assert.ok(await alice.locator(icon).isVisible(), `${icon} is shown`);
      // Drawn: the policy allows data: images, and nothing is fetched for it.
      assert.ok(await alice.locator(icon).evaluate((img) => img.complete && img.naturalWidth > 0), `${icon} is drawn`);
    }
    const [background, ink] = await alice.locator("#pair-submit").evaluate((b) => {
      const st = getComputedStyle(b);
      return [st.backgroundColor, st.color];
    });
    assert.deepEqual([background, ink], ["rgb(10, 125, 90)", "rgb(255, 255, 255)"]);
    assert.ok(contrast(background, ink) >= 4.5, `contrast ${contrast(background, ink)}`);
    await shot("pair-user", alice);

    await alice.locator("#pair-name").fill("Alice’s phone");
    await alice.locator("#pair-submit").click();
    await alice.locator("#screen-conversation").waitFor();
    assert.deepEqual(await storedPairing(alice), {
      deviceId: connected.deviceId,
      role: "user",
      user: { externalId: "alice", name: "Alice" },
      branding: { accentColor: "#0a7d5a", icon: iconUrl },
    });

    // The conversation: the agent under its name, in the product's colour and icon; "You answer as Alice".
    const header = async () => ({
      agent: await alice.locator("#agent-name").textContent(),
      line: await alice.locator("#device-name").textContent(),
      icon: await alice.locator("#brand-icon").getAttribute("src"),
      underline: await alice.locator("header.top").evaluate((h) => getComputedStyle(h).borderBottomColor),
    });
    const expected = {
      agent: "Ana’s laptop — Claude Code",
      line: "You answer as Alice · end to end encrypted",
      icon: iconUrl,
      underline: "rgb(10, 125, 90)",
    };
    assert.deepEqual(await header(), expected);
    assert.equal(
      await alice.locator("#empty").textContent(),
      "No question yet. What Ana’s laptop — Claude Code asks you will appear here.",
    );
    // Whether the agent listens for tasks is the owner's business: no presence banner here.
    await alice.waitForTimeout(1000);
    assert.ok(await alice.locator("#banner").isHidden());

    const asked = ask(["--user", "alice", "Refund order 42?", "--id", "qst_e2e_user_refund"]);
    const card = alice.locator('li.question[data-id="qst_e2e_user_refund"]');
    await card.locator("button.approve").waitFor();
    assert.equal(await card.locator(".q-text").textContent(), "Refund order 42?");
    assert.equal(await card.evaluate((n) => getComputedStyle(n).borderTopColor), "rgb(10, 125, 90)");
    await shot("user-question", alice);
    await card.locator("button.approve").click();
    assert.equal(await exitOf(asked), 0, asked.err);
    await card.locator(".q-status", { hasText: "Approved — by this device" }).waitFor();
    const answer = await sealedAnswer("qst_e2e_user_refund", alice);
    assert.deepEqual(answer.answer, { type: "yes" });

    // Addressed to Alice only: the owner's phone never got it, and keeps its own look.
    assert.equal((await deviceItems()).filter((i) => i.id === "qst_e2e_user_refund").length, 0);
    assert.equal(await page.locator("#brand-icon").getAttribute("src"), "/app/icon.svg");
    assert.equal(await page.locator("body.branded").count(), 0);
    assert.match(await page.locator("#device-name").textContent(), /^Ana’s phone · /);

    // The agent lists Alice's phone, paired.
    const shown = await cli(["user", "show", "alice", "--json"]);
    assert.equal(shown.code, 0, shown.err);
    const info = JSON.parse(shown.out);
    assert.equal(info.externalId, "alice");
    assert.ok(info.devices.some((d) => d.deviceId === connected.deviceId && d.paired), JSON.stringify(info.devices));

    // The settings say who this phone answers as; after a reload the look is read from the stored pairing.
    await alice.locator("#open-settings").click();
    await alice.locator("#s-user", { hasText: "Alice" }).waitFor();
    assert.ok(await alice.locator("#s-user-label").isVisible());
    await alice.reload();
    await alice.locator("#screen-settings").waitFor();
    await alice.locator("#s-user", { hasText: "Alice" }).waitFor();
    await alice.locator("#settings-back").click();
    await alice.locator("#screen-conversation").waitFor();
    assert.deepEqual(await header(), expected);

    // A light accent gets dark text on it, still readable.
    const light = await cli(["user", "connect", "bob", "--name", "Bob", "--accent", "#f5d90a", "--json"]);
    assert.equal(light.code, 0, light.err);
    const bob = await phone.newPage();
    await bob.goto(JSON.parse(light.out).link);
    await bob.locator("#pair-form").waitFor();
    const [bg, fg] = await bob.locator("#pair-submit").evaluate((b) => [getComputedStyle(b).backgroundColor, getComputedStyle(b).color]);
    assert.deepEqual([bg, fg], ["rgb(245, 217, 10)", "rgb(0, 0, 0)"]);
    assert.ok(contrast(bg, fg) >= 4.5);
    assert.ok(await bob.locator("#pair-icon").isHidden(), "no icon: none shown");
    assert.equal(await bob.locator("#brand-icon").getAttribute("src"), "/app/icon.svg");
    await bob.close();

    // Disconnecting Alice revokes her phone, which says so in the product's words.
    const disconnected = await cli(["user", "disconnect", "alice", "--json"]);
    assert.equal(disconnected.code, 0, disconnected.err);
    await alice.locator("#screen-revoked").waitFor({ timeout: 20000 });
    assert.equal(
      await alice.locator("#revoked-text").textContent(),
      "Ana’s laptop — Claude Code disconnected this device. To answer here again, ask Ana’s laptop — Claude Code for a new link and open it here.",
    );
    await shot("user-revoked", alice);

    const origin = new URL(relayUrl).origin;
    assert.deepEqual(seen.filter((u) => !u.startsWith(origin) && !u.startsWith("data:")), [], "nothing fetched elsewhere");
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});

test("the settings screen shows the pairing, the relay's version and notifications off", async () => {
  await page.locator("#open-settings").click();
  await page.locator("#screen-settings").waitFor();
  assert.equal(new URL(page.url()).hash, "#settings");
  assert.equal(await page.locator("#s-agent").textContent(), "Ana’s laptop — Claude Code");
  assert.equal(await page.locator("#s-relay").textContent(), new URL(relayUrl).host);
  assert.equal(await page.locator("#s-device").textContent(), "Ana’s phone");
  assert.equal(await page.locator("#s-device-id").textContent(), deviceId);
  assert.match(await page.locator("#s-role").textContent(), /Owner/);
  const { devices } = await cliJson(["agent", "devices"]);
  const created = new Date(devices.find((d) => d.deviceId === deviceId).createdAt);
  const expected = created.toLocaleString("en-GB", { dateStyle: "long", timeStyle: "short", timeZone: "Europe/Paris" });
  await page.locator("#s-paired", { hasText: expected }).waitFor();
  const health = await (await fetch(`${relayUrl}/v1/health`)).json();
  await page.locator("#s-version", { hasText: `Pacerelle ${health.version}` }).waitFor();
  // The signing key's fingerprint, as the agent's answer log shows it.
  const { signingKey } = await storedSigning();
  assert.equal(await page.locator("#s-signing code.fingerprint").textContent(), fingerprintOf(signingKey));
  assert.equal(await page.locator("#s-signing").getAttribute("data-state"), "signed");
  assert.match(await page.locator("#s-signing-help").textContent(), /Every answer from this browser is signed/);
  // Notifications: off, and the switch can be turned on (the permission is asked on the tap).
  assert.equal(await page.locator("#push-switch").isChecked(), false);
  assert.equal(await page.locator("#push-switch").isDisabled(), false);
  assert.match(await page.locator("#push-text").textContent(), /only while the app is open/);
  await shot("settings");
  await page.screenshot({ path: path.join(path.dirname(SCREENSHOT), "settings-viewport.png") });
  // The browser's back goes back to the conversation, as the screen's own back button does.
  await page.goBack();
  await page.locator("#screen-conversation").waitFor();
  assert.ok(await page.locator("#composer").isVisible());
});

test("notifications blocked for the site: the switch says so and cannot be turned on", async () => {
  const other = await context.newPage();
  // What a page sees when the person blocked notifications (Chromium's headless profile cannot be told to deny).
  await other.addInitScript(() => {
    Object.defineProperty(Notification, "permission", { get: () => "denied" });
  });
  await other.goto(`${relayUrl}/#settings`);
  await other.locator("#screen-settings").waitFor();
  await other.locator('.switch-row[data-state="denied"]').waitFor();
  assert.equal(await other.locator("#push-switch").isDisabled(), true);
  assert.match(await other.locator("#push-text").textContent(), /blocked for this site/);
  await shot("settings-denied", other);
  // Back from a settings screen opened directly: the conversation, not the previous site.
  await other.locator("#settings-back").click();
  await other.locator("#screen-conversation").waitFor();
  await other.close();
});

test("turning notifications on registers the worker and sends the subscription to the relay", async () => {
  const origin = new URL(relayUrl).origin;
  await context.grantPermissions(["notifications"], { origin });
  const keyResponse = await fetch(`${relayUrl}/v1/push/key`);
  const relayPushes = keyResponse.status === 200;

  await page.locator("#open-settings").click();
  await page.locator("#screen-settings").waitFor();
  // With the browser's own push service: Chromium here has none it can reach (no network, no vendor keys), so the
  // subscription is refused or never comes, and the switch says why; it stays off.
  await page.locator("#push-switch").click();
  await page.locator("#push-error").waitFor({ timeout: 30000 });
  const refusal = await page.locator("#push-error").textContent();
  assert.match(refusal, relayPushes ? /push service (refused the subscription|did not answer)/ : /does not send notifications/);
  assert.equal(await page.locator("#push-switch").isChecked(), false);
  // The worker is registered over the whole app, from /app/sw.js, as a module.
  const registration = await page.evaluate(async () => {
    const r = await navigator.serviceWorker.ready;
    return { scope: r.scope, script: r.active.scriptURL, permission: Notification.permission };
  });
  assert.deepEqual(registration, { scope: `${origin}/`, script: `${origin}/app/sw.js`, permission: "granted" });
  const sw = await fetch(`${relayUrl}/app/sw.js`);
  assert.equal(sw.headers.get("service-worker-allowed"), "/");
  assert.equal(sw.headers.get("content-type"), "text/javascript; charset=utf-8");

  // A push service that accepts: the browser's subscription (a real P-256 key, a 16-byte secret) stands in for
  // the one Chromium would get from its vendor. What the app sends the relay is checked on the way.
  await page.evaluate(async (relayKey) => {
    const pair = await crypto.subtle.generateKey({ name: "ECDH", namedCurve: "P-256" }, true, ["deriveBits"]);
    const raw = new Uint8Array(await crypto.subtle.exportKey("raw", pair.publicKey));
    const b64 = (b) => btoa(String.fromCharCode(...b)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
    const auth = crypto.getRandomValues(new Uint8Array(16));
    let current = null;
    const make = (options) => ({
      endpoint: `https://push.example.com/send/${b64(crypto.getRandomValues(new Uint8Array(12)))}`,
      expirationTime: null,
      options,
      toJSON() {
        return { endpoint: this.endpoint, expirationTime: null, keys: { p256dh: b64(raw), auth: b64(auth) } };
      },
      async unsubscribe() {
        current = null;
        return true;
      },
    });
    PushManager.prototype.subscribe = async function (options) {
      window.subscribedWith = {
        userVisibleOnly: options.userVisibleOnly,
        key: b64(new Uint8Array(options.applicationServerKey)),
      };
      current = make({ userVisibleOnly: true, applicationServerKey: options.applicationServerKey });
      return current;
    };
    PushManager.prototype.getSubscription = async () => current;
    window.expectedRelayKey = relayKey;
  }, relayPushes ? (await keyResponse.json()).publicKey : null);
  const posted = [];
  await page.route("**/v1/device/push", async (route) => {
    const request = route.request();
    posted.push({ method: request.method(), body: JSON.parse(request.postData()), auth: request.headers().authorization });
    if (relayPushes) {
      const response = await route.fetch();
      posted.at(-1).status = response.status();
      await route.fulfill({ response });
    } else {
      // A relay without push (older than the app): the relay's future answer, per docs/push.md.
      await route.fulfill({ status: request.method() === "POST" ? 201 : 204, contentType: "application/json",
        body: request.method() === "POST" ? JSON.stringify({ endpoint: posted.at(-1).body.endpoint, createdAt: new Date().toISOString() }) : "" });
    }
  });
  if (!relayPushes) {
    await page.route("**/v1/push/key", (route) =>
      route.fulfill({ status: 200, contentType: "application/json",
        body: JSON.stringify({ publicKey: "BAAA" + "A".repeat(83) }) }));
  }
  await page.locator("#push-switch").click();
  await page.locator('.switch-row[data-state="on"]').waitFor();
  assert.equal(await page.locator("#push-switch").isChecked(), true);
  assert.equal(await page.locator("#push-error").isHidden(), true);
  assert.equal(posted.length, 1);
  const [{ method, body, auth, status }] = posted;
  assert.equal(method, "POST");
  assert.match(auth, new RegExp(`^Bearer ${deviceId}\\.`));
  assert.deepEqual(Object.keys(body).sort(), ["endpoint", "expirationTime", "keys"]);
  assert.match(body.endpoint, /^https:\/\/push\.example\.com\/send\//);
  assert.equal(body.expirationTime, null);
  assert.deepEqual(Object.keys(body.keys).sort(), ["auth", "p256dh"]);
  assert.equal(Buffer.from(body.keys.p256dh, "base64url").length, 65);
  assert.equal(Buffer.from(body.keys.p256dh, "base64url")[0], 4);
  assert.equal(Buffer.from(body.keys.auth, "base64url").length, 16);
  const subscribed = await page.evaluate(() => window.subscribedWith);
  assert.equal(subscribed.userVisibleOnly, true);
  if (relayPushes) {
    assert.equal(status, 201, "the relay stores the subscription");
    assert.equal(subscribed.key, await page.evaluate(() => window.expectedRelayKey), "subscribed with the relay's key");
  }
  await shot("settings-on");

  // Off again: the relay is told to forget the endpoint, then the browser unsubscribes.
  await page.locator("#push-switch").click();
  await page.locator('.switch-row[data-state="off"]').waitFor();
  assert.equal(posted.length, 2);
  assert.equal(posted[1].method, "DELETE");
  assert.deepEqual(posted[1].body, { endpoint: body.endpoint });
  if (relayPushes) assert.equal(posted[1].status, 204);
  await page.unroute("**/v1/device/push");
  await page.unroute("**/v1/push/key");
  await page.locator("#settings-back").click();
  await page.locator("#screen-conversation").waitFor();
});

test("a question pushed to the worker shows its text with Approve and Deny; Approve from the notification makes `pacerelle ask` exit 0", async () => {
  const child = ask(["Merge the pull request #42?", "--id", "qst_push_approve", "--details", "CI green — 2 reviews"]);
  const item = await deviceItem((i) => i.kind === "question" && i.id === "qst_push_approve", "question");
  // The item carries only the envelope: the worker opens it with the device key from IndexedDB.
  assert.equal(JSON.stringify(item).includes("Merge the pull request"), false);
  const [shown] = await pushShown(pushPayload(item), "qst_push_approve", (n) => n.length === 1, "the question's notification");
  assert.equal(shown.title, "Ana’s laptop — Claude Code");
  assert.equal(shown.body, "Merge the pull request #42?\nCI green — 2 reviews");
  assert.equal(shown.requireInteraction, true);
  assert.deepEqual(shown.actions, [["yes", "Approve"], ["no", "Deny"]]);
  assert.equal(shown.data.url, "/?question=qst_push_approve");
  assert.equal(JSON.stringify(shown.data).includes("Merge the pull request"), false, "only the sealed item is kept");

  const fromPage = [];
  const watch = (r) => r.url().includes("/v1/device/questions/qst_push_approve/answer") && fromPage.push(r.url());
  page.on("request", watch);
  const outcome = await clickNotification("qst_push_approve", "yes");
  assert.deepEqual(outcome, { answered: "yes", ok: true });
  assert.equal(await exitOf(child), 0, child.err);
  // The notification now says what was sent; the app shows the answer that counts, read from its copy.
  const [after] = await notifications("qst_push_approve");
  assert.equal(after.body, "Approved — Merge the pull request #42?");
  assert.deepEqual(after.actions, []);
  await question("qst_push_approve").locator(".q-status", { hasText: "Approved — by this device" }).waitFor();
  // The answer went out from the worker, not the page (the page made no answer request of its own).
  page.off("request", watch);
  assert.deepEqual(fromPage, [], "the page sent no answer");
  // Signed by the worker with the key the page keeps.
  const payload = await sealedAnswer("qst_push_approve");
  assert.ok(signedBy((await storedSigning()).signingKey, agentId, deviceId, payload), "the worker signed the answer");
});

test("Deny from a pushed notification makes `pacerelle ask` exit 1", async () => {
  const child = ask(["Force-push to main?", "--id", "qst_push_deny"]);
  const item = await deviceItem((i) => i.kind === "question" && i.id === "qst_push_deny", "question");
  await pushShown(pushPayload(item), "qst_push_deny", (n) => n.length === 1 && n[0].actions.length === 2, "the question");
  assert.deepEqual(await clickNotification("qst_push_deny", "no"), { answered: "no", ok: true });
  assert.equal(await exitOf(child), 1, child.err);
  assert.match((await notifications("qst_push_deny"))[0].body, /^Denied — Force-push to main\?/);
  await question("qst_push_deny").locator(".q-status.denied", { hasText: "Denied" }).waitFor();
});

test("a question pushed to the worker that needs 2 approvals: Approve from the notification is recorded and waits for 1 more; Deny closes at once (`pacerelle ask` exits 1)", async () => {
  const tablet = await terminalDevice("tablet-push-approvals", "Bob’s tablet");
  const child = ask(["Roll out to every region?", "--approvals", "2", "--id", "qst_push_two"]);
  const item = await deviceItem((i) => i.kind === "question" && i.id === "qst_push_two", "question");
  const [shown] = await pushShown(pushPayload(item), "qst_push_two", (n) => n.length === 1, "the question's notification");
  assert.equal(shown.body, "Roll out to every region?\nNeeds 2 approvals — 0 of 2 so far");
  assert.deepEqual(shown.actions, [["yes", "Approve"], ["no", "Deny"]]);

  // Approve: recorded (not an error), the question stays open for the tablet.
  assert.deepEqual(await clickNotification("qst_push_two", "yes"), { answered: "yes", ok: true });
  const [after] = await notifications("qst_push_two");
  assert.equal(after.body, "You approved — waiting for 1 more — Roll out to every region?");
  assert.deepEqual(after.actions, []);
  assert.deepEqual((await questionSeenBy(tablet, "qst_push_two")).answers, [deviceId]);
  assert.ok(await stillRunningAfter(child, 1500), `ask ended after one approval: ${child.out}${child.err}`);
  // Pushed again as it stands now (this browser among its answers): no actions left, and what it waits for.
  const again = await deviceItem((i) => i.kind === "question" && i.id === "qst_push_two" && (i.question.answers || []).length === 1, "question approved once");
  const [approved] = await pushShown(pushPayload(again), "qst_push_two", (n) => n.length === 1 && n[0].data.kind === "question", "the question approved here");
  assert.equal(approved.body, "Roll out to every region?\nYou approved — waiting for 1 more");
  assert.deepEqual(approved.actions, []);
  // The app, reading the question again, says the same, without buttons.
  const card = question("qst_push_two");
  await card.locator(".q-status.waiting", { hasText: "You approved — waiting for 1 more" }).waitFor({ timeout: 15000 });
  assert.equal(await card.locator("button").count(), 0);
  assert.equal((await tablet.run(["answer", "qst_push_two", "yes"])).code, 0);
  assert.equal(await exitOf(child), 0, `${child.out}${child.err}`);
  await card.locator(".q-status.answered", { hasText: "Approved — by Bob’s tablet" }).waitFor({ timeout: 15000 });

  // Deny from the notification closes the question at once.
  const denied = ask(["Drop the old regions?", "--approvals", "2", "--id", "qst_push_two_no"]);
  const deniedItem = await deviceItem((i) => i.kind === "question" && i.id === "qst_push_two_no", "question");
  await pushShown(pushPayload(deniedItem), "qst_push_two_no", (n) => n.length === 1 && n[0].actions.length === 2, "the question");
  assert.deepEqual(await clickNotification("qst_push_two_no", "no"), { answered: "no", ok: true });
  assert.equal(await exitOf(denied, 15000), 1, `${denied.out}${denied.err}`);
  assert.match((await notifications("qst_push_two_no"))[0].body, /^Denied — Drop the old regions\?/);
  await question("qst_push_two_no").locator(".q-status.denied", { hasText: "Denied — by this device" }).waitFor();

  assert.equal((await tablet.run(["device", "leave"])).code, 0);
});

test("a push without the item (too big for a push) is read from the conversation; a choice question has no actions", async () => {
  const child = ask(["Which branch?", "--choice", "main", "--choice", "develop", "--id", "qst_push_fetch"]);
  const item = await deviceItem((i) => i.kind === "question" && i.id === "qst_push_fetch", "question");
  const { item: _omitted, ...idsOnly } = pushPayload(item);
  const [shown] = await pushShown(idsOnly, "qst_push_fetch", (n) => n.length === 1, "the question, fetched");
  assert.equal(shown.body, "Which branch?");
  assert.deepEqual(shown.actions, [], "options open the app");
  // A tap on the body opens the app on the question (here: the open app is told which one).
  const tapped = await clickNotification("qst_push_fetch", "");
  assert.deepEqual(tapped, { opened: "/?question=qst_push_fetch" });
  assert.deepEqual(await notifications("qst_push_fetch"), []);
  await question("qst_push_fetch").locator("button.option", { hasText: "develop" }).click();
  assert.equal(await exitOf(child), 0, child.err);
});

test("an answer the relay refuses from the notification opens the app on the question, which says why", async () => {
  // Long enough to be shown before it expires (the worker shows no question already past its expiry).
  const child = ask(["Rotate the API keys?", "--id", "qst_push_late", "--expires", "6s"]);
  const item = await deviceItem((i) => i.kind === "question" && i.id === "qst_push_late", "question");
  await pushShown(pushPayload(item), "qst_push_late", (n) => n.length === 1, "the question");
  assert.equal(await exitOf(child), 2, child.err);
  // Approve, too late: the relay refuses it; the notification goes and the app is told to show the question.
  const outcome = await clickNotification("qst_push_late", "yes");
  assert.deepEqual(outcome, { answered: "yes", ok: false, error: "question_expired" });
  assert.deepEqual(await notifications("qst_push_late"), []);
  // The answer was queued under its one id: the app sends it, learns why it was refused, and says so.
  await page.locator("#toast", { hasText: "Too late: the question expired. Your answer (Approved) was not recorded." }).waitFor();
  await question("qst_push_late").locator(".q-status.not-recorded").waitFor();
});

test("a question closed elsewhere: the update push removes its notification", async (t) => {
  if (!(await relayHasUpdates())) return t.skip(OLD_RELAY);
  const child = ask(["Publish the blog post?", "--id", "qst_push_closed"]);
  const item = await deviceItem((i) => i.kind === "question" && i.id === "qst_push_closed", "question");
  await pushShown(pushPayload(item), "qst_push_closed", (n) => n.length === 1, "the question");
  const cancelled = await cli(["cancel", "qst_push_closed"]);
  assert.equal(cancelled.code, 0, cancelled.err);
  assert.equal(await exitOf(child), 2, child.err);
  const update = await deviceItem(
    (i) => i.kind === "update" && i.subjectId === "qst_push_closed" && i.state === "cancelled", "update item");
  // Replaced at once by a short notice with the same tag (a push must show something), which then closes itself.
  const [notice] = await pushShown(pushPayload(update), "qst_push_closed", (n) => n.length === 1 && n[0].actions.length === 0, "the notice");
  assert.equal(notice.body, "Cancelled by the agent");
  await waitForNotification("qst_push_closed", (n) => n.length === 0, "the notification is removed");
});

test("a question answered at the computer: the update push replaces its notification with “Answered at the computer: yes”", async (t) => {
  if (!(await relayHasUpdates())) return t.skip(OLD_RELAY);
  const child = askHere(["Renew the certificate?", "--id", "qst_push_here"]);
  const item = await deviceItem((i) => i.kind === "question" && i.id === "qst_push_here", "question");
  await pushShown(pushPayload(item), "qst_push_here", (n) => n.length === 1 && n[0].actions.length === 2, "the question");
  child.stdin.write("yes\n");
  assert.equal(await exitOf(child), 0, child.err);
  const update = await deviceItem(
    (i) => i.kind === "update" && i.subjectId === "qst_push_here" && i.state === "answered", "update item");
  assert.equal(update.question.channel, "host");
  assert.equal(update.question.answeredBy ?? null, null);
  const [notice] = await pushShown(pushPayload(update), "qst_push_here", (n) => n.length === 1 && n[0].actions.length === 0, "the notice");
  assert.equal(notice.body, "Answered at the computer: yes");
  await waitForNotification("qst_push_here", (n) => n.length === 0, "the notification is removed");
});

test("a real push: the relay encrypts the question to the subscription, the worker shows it, Approve answers", async (t) => {
  if ((await fetch(`${relayUrl}/v1/push/key`)).status !== 200) return t.skip("this relay does not push (no GET /v1/push/key)");
  const service = await startPushService();
  const keys = createECDH("prime256v1");
  keys.generateKeys();
  const auth = randomBytes(16);
  const endpoint = `${service.url}/push/${randomBytes(8).toString("hex")}`;
  await standInSubscription(endpoint, keys.getPublicKey().toString("base64url"), auth.toString("base64url"));
  await page.locator("#open-settings").click();
  const registered = page.waitForResponse((r) => r.url().endsWith("/v1/device/push") && r.request().method() === "POST");
  await page.locator("#push-switch").click();
  assert.equal((await registered).status(), 201);
  await page.locator('.switch-row[data-state="on"]').waitFor();
  await page.locator("#settings-back").click();

  const text = `Drop the staging database ${randomBytes(4).toString("hex")}?`;
  typed.push(text);
  const child = ask([text, "--id", "qst_push_real"]);
  const posted = await service.next((r) => openPush(r.body, keys, auth).id === "qst_push_real", "the question");
  assert.equal(posted.headers["content-encoding"], "aes128gcm");
  assert.equal(posted.headers.urgency, "high");
  assert.match(posted.headers.authorization, /^vapid t=[\w-]+\.[\w-]+\.[\w-]+, k=[\w-]+$/);
  assert.equal(posted.body.includes(Buffer.from(text.split(" ").pop())), false, "the push service sees ciphertext");
  const payload = openPush(posted.body, keys, auth);
  assert.equal(payload.kind, "question");
  assert.equal(payload.deviceId, deviceId);
  assert.equal(JSON.stringify(payload).includes(text), false, "the payload holds the envelope, not the text");
  // What the browser would hand to the worker once decrypted:
  const [shown] = await pushShown(payload, "qst_push_real", (n) => n.length === 1, "the pushed question");
  assert.equal(shown.body, text);
  assert.deepEqual(shown.actions, [["yes", "Approve"], ["no", "Deny"]]);
  assert.deepEqual(await clickNotification("qst_push_real", "yes"), { answered: "yes", ok: true });
  assert.equal(await exitOf(child), 0, child.err);

  // The relay then pushes the question's closing update.
  const closing = await service.next((r) => {
    const p = openPush(r.body, keys, auth);
    return p.kind === "update" && p.item && p.item.subjectId === "qst_push_real";
  }, "the closing update");
  assert.equal(closing.headers.topic, posted.headers.topic, "the update replaces the question's push");
  assert.equal(openPush(closing.body, keys, auth).item.state, "answered");

  await page.locator("#open-settings").click();
  const removed = page.waitForResponse((r) => r.url().endsWith("/v1/device/push") && r.request().method() === "DELETE");
  await page.locator("#push-switch").click();
  assert.equal((await removed).status(), 204);
  await page.locator('.switch-row[data-state="off"]').waitFor();
  await page.locator("#settings-back").click();
  await service.close();
});

test("a push not for this pairing shows a plain notice (a push must show something)", async () => {
  const [shown] = await pushShown({ v: 1, relay: relayUrl, agentId, deviceId: "dv_someone_else", kind: "question", id: "qst_x", cursor: "c1.AAAAAAAAAAE" }, "pacerelle", (n) => n.length === 1, "the plain notice");
  assert.equal(shown.body, "Open the app to see what is new.");
  assert.deepEqual(await clickNotification("pacerelle", ""), { opened: "/" });
  assert.deepEqual(await notifications("pacerelle"), []);
});

test("the app shows a task processed and a question answered elsewhere as they happen, without re-reading", async (t) => {
  if (!(await relayHasUpdates())) return t.skip(OLD_RELAY);
  // Any read of the question list, or of the conversation without waiting, would be a re-read on a timer. (The list
  // of pending questions, read when a question arrives or closes, is the count of what waits, not a state re-read.)
  const rereads = [];
  const watched = (url) =>
    (url.pathname === "/v1/device/questions" && url.searchParams.get("state") !== "pending") ||
    (url.pathname === "/v1/device/conversation" && url.searchParams.get("wait") === "0");
  await page.route(watched, (route) => {
    rereads.push(route.request().url());
    return route.continue();
  });
  const text = unique("Count the open issues");
  await page.locator("#task-text").fill(text);
  await page.locator("#send").click();
  await page.locator('li.task[data-state="processed"]', { hasText: text }).waitFor({ timeout: 20000 });

  const tabletHome = path.join(work, "tablet2");
  mkdirSync(tabletHome, { recursive: true });
  const asTablet = async (args) => {
    const c = start(PACERELLE, args, { PACERELLE_HOME: tabletHome, PACERELLE_RELAY_URL: relayUrl });
    const { code } = await c.done;
    return { code, out: c.out, err: c.err };
  };
  const pairing = await cliJson(["pair", "--name", "tablet"]);
  assert.equal((await asTablet(["device", "join", pairing.link, "--name", "Bob’s tablet"])).code, 0);
  const child = ask(["Tag the release?", "--id", "qst_e2e_elsewhere"]);
  const card = question("qst_e2e_elsewhere");
  await card.locator("button.approve").waitFor();
  const yes = await asTablet(["answer", "qst_e2e_elsewhere", "yes"]);
  assert.equal(yes.code, 0, yes.err);
  assert.equal(await exitOf(child), 0, child.err);
  await card.locator(".q-status", { hasText: "Approved — by Bob’s tablet" }).waitFor({ timeout: 10000 });
  await page.unroute(watched);
  assert.deepEqual(rereads, [], "states came as update items, not from re-reading");
  assert.equal((await asTablet(["device", "leave"])).code, 0);
});

test("a screenshot of the conversation is saved", async () => {
  // The picture: a task answered, and a question waiting for the thumb.
  const text = "Run the tests, then deploy v2.3 if they pass";
  typed.push(text);
  await page.locator("#task-text").fill(text);
  await page.locator("#send").click();
  await page.locator("li.task", { hasText: text }).locator(".reply").waitFor();
  const child = ask(["Deploy v2.3 to production?", "--id", "qst_e2e_screenshot", "--details", "Tests pass ✓ — 3 migrations"]);
  const card = question("qst_e2e_screenshot");
  await card.locator("button.approve").waitFor();
  await page.locator('#banner[data-presence="listening"]').waitFor({ timeout: 20000 });
  await page.locator('li.task[data-state="processed"]', { hasText: text }).waitFor({ timeout: 20000 });
  await page.evaluate(() => window.scrollTo(0, document.documentElement.scrollHeight));
  // No message left over from an earlier case in the picture.
  await page.locator("#toast").waitFor({ state: "hidden", timeout: 10000 });
  mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
  await page.screenshot({ path: SCREENSHOT });
  assert.ok(statSync(SCREENSHOT).size > 10000);
  if (process.env.UPDATE_SCREENSHOT === "1") {
    mkdirSync(path.dirname(README_SCREENSHOT), { recursive: true });
    copyFileSync(SCREENSHOT, README_SCREENSHOT);
  }
  await card.locator("button.approve").click();
  assert.equal(await exitOf(child), 0, child.err);
});

test("a browser without Ed25519 pairs without a key and says it cannot sign; its yes is refused while the agent requires signed answers and approved unsigned once it accepts them; once it has Ed25519, it registers a key once and signs", async (t) => {
  // Another origin of the same relay (localhost): a browser profile of its own, as far as the app's storage goes.
  const origin = relayUrl.replace("127.0.0.1", "localhost");
  const pairing = await cliJson(["pair", "--name", "old browser"]);
  const older = await context.newPage();
  await withoutEd25519(older);
  const claims = [];
  older.on("request", (r) => r.url().endsWith("/claim") && claims.push(JSON.parse(r.postData())));
  await older.goto(pairing.link.replace(relayUrl, origin));
  await older.locator("#pair-name").fill("Old browser");
  await older.locator("#pair-submit").click();
  await older.locator("#screen-conversation").waitFor();
  assert.deepEqual(claims.map((c) => Object.keys(c).sort()), [["claimSecret", "name"]], "a claim without a key");
  assert.equal(await storedSigning(older), null);
  await older.locator("#open-settings").click();
  await older.locator('#s-signing[data-state="unsigned"]').waitFor();
  assert.equal(await older.locator("#s-signing code").count(), 0);
  assert.match(
    await older.locator("#s-signing-help").textContent(),
    /no Ed25519 in WebCrypto, so it cannot sign.*requires signed answers.*refuses them/,
  );
  assert.match(await older.locator("#s-signing .tag").textContent(), /cannot sign/);
  await shot("settings-unsigned", older);
  await older.locator("#settings-back").click();

  // A new agent requires signed answers: the unsigned yes is rejected (exit 3), naming the device and why.
  const refusedAsk = ask(["Rotate the API keys now?", "--id", "qst_e2e_refused_unsigned"]);
  await older.locator('li.question[data-id="qst_e2e_refused_unsigned"] button.approve').click();
  assert.equal(await exitOf(refusedAsk), 3, refusedAsk.err);
  assert.match(refusedAsk.err, /requires signed answers/);
  assert.ok(refusedAsk.err.includes(pairing.deviceId), refusedAsk.err);

  // An agent that accepts unsigned answers (its explicit choice) approves an unsigned yes from a device that never
  // had a key; then it requires them again.
  assert.equal((await cli(["agent", "require-signed", "off"])).code, 0);
  const unsignedAsk = ask(["Rotate the API keys?", "--id", "qst_e2e_unsigned"]);
  await older.locator('li.question[data-id="qst_e2e_unsigned"] button.approve').click();
  assert.equal(await exitOf(unsignedAsk), 0, unsignedAsk.err);
  assert.equal((await cli(["agent", "require-signed", "on"])).code, 0);
  const unsigned = await sealedAnswer("qst_e2e_unsigned", older);
  assert.deepEqual([unsigned.answer, "signature" in unsigned], [{ type: "yes" }, false]);
  await older.close();

  // The same browser with Ed25519 (after an update): at its start the app draws a key and registers it, once.
  const updated = await context.newPage();
  const registrations = [];
  updated.on("response", (r) => {
    if (r.url().endsWith("/v1/device/signing-key")) registrations.push([r.request().method(), r.status()]);
  });
  await updated.goto(`${origin}/`);
  await updated.locator("#screen-conversation").waitFor();
  const signing = await registeredSigning(updated);
  assert.equal(signing.extractable, false);
  assert.deepEqual(registrations, [["PUT", 200]]);
  const listed = (await cliJson(["agent", "devices"])).devices.find((d) => d.deviceId === pairing.deviceId);
  if ("signingKey" in listed) assert.equal(listed.signingKey, signing.signingKey);
  await updated.reload();
  await updated.locator("#screen-conversation").waitFor();
  await updated.locator("#open-settings").click();
  await updated.locator('#s-signing[data-state="signed"]').waitFor();
  assert.equal(await updated.locator("#s-signing code.fingerprint").textContent(), fingerprintOf(signing.signingKey));
  assert.deepEqual(registrations, [["PUT", 200]], "registered once");
  await updated.locator("#settings-back").click();

  // From now on its answers are signed, and the agent (which pinned the key) approves them.
  const signedAsk = ask(["Rotate the database password?", "--id", "qst_e2e_now_signed"]);
  await updated.locator('li.question[data-id="qst_e2e_now_signed"] button.approve').click();
  assert.equal(await exitOf(signedAsk), 0, signedAsk.err);
  const payload = await sealedAnswer("qst_e2e_now_signed", updated);
  assert.ok(signedBy(signing.signingKey, agentId, pairing.deviceId, payload), "signed with the registered key");

  // The agent's export: the new answer with the key the agent pinned. (The export judges every answer again with
  // today's roster, where this device has a key: the unsigned answer given before it is not listed as accepted.)
  const exported = path.join(work, "answers-registered.json");
  const made = await cli(["audit", "export", "--format", "signed", "--output", exported]);
  assert.equal(made.code, 0, made.err);
  const log = JSON.parse(readFileSync(exported, "utf8"));
  const record = (id) => log.records.find((r) => r.questionId === id);
  t.diagnostic(`the unsigned answer given before the key: ${JSON.stringify(record("qst_e2e_unsigned") || "not in the signed export")}`);
  assert.ok(record("qst_e2e_now_signed"), "the signed answer is in the export");
  assert.equal(record("qst_e2e_now_signed").signature, payload.signature);
  assert.equal(record("qst_e2e_now_signed").signingKey, signing.signingKey);
  assert.equal(log.devices.find((d) => d.deviceId === pairing.deviceId).fingerprint, fingerprintOf(signing.signingKey));

  await updated.close();
  const revoked = await cli(["agent", "revoke", pairing.deviceId]);
  assert.equal(revoked.code, 0, revoked.err);
});

test("over HTTPS (`pacerelle serve --tls-cert --tls-key`), the app runs in a secure context", async () => {
  const tlsUrl = await startRelay(["--data", path.join(work, "relay-tls"), "--tls-cert", TLS_CERT, "--tls-key", TLS_KEY]);
  assert.match(tlsUrl, /^https:\/\/localhost:\d+$/);
  const other = await context.newPage();
  const response = await other.goto(`${tlsUrl}/`);
  assert.equal(response.status(), 200);
  assert.equal((await response.securityDetails()).protocol, "TLS 1.3");
  await other.locator("#screen-unpaired").waitFor();
  assert.deepEqual(await other.evaluate(() => [window.isSecureContext, typeof crypto.subtle.encrypt]), [true, "function"]);
  await other.close();
});

test("one browser paired with two agents: a switcher, the questions of both answered in one view, an overview; unpairing one leaves the other answering", async () => {
  // A second agent, in a home of its own (another computer, say: a server).
  const serverHome = path.join(work, "home-server");
  mkdirSync(serverHome, { recursive: true });
  const onServer = (args) => start(PACERELLE, args, { PACERELLE_HOME: serverHome, PACERELLE_RELAY_URL: relayUrl });
  const serverJson = async (args) => {
    const child = onServer(["--json", ...args]);
    assert.equal(await exitOf(child), 0, `pacerelle ${args.join(" ")} failed: ${child.err}`);
    return JSON.parse(child.out);
  };
  const laptopName = "Ana’s laptop — Claude Code";
  const serverName = "Ana’s server";
  const server = await serverJson(["agent", "create", "--name", serverName]);
  const link = await serverJson(["pair", "--name", "phone"]);

  // Pairing with the second agent adds it: the first stays paired, and the confirmation says so.
  await page.goto(link.link);
  await page.locator("#pair-form").waitFor();
  assert.equal(await page.locator("#pair-agent").textContent(), serverName);
  assert.match(await page.locator("#pair-replace").textContent(), new RegExp(`also paired with “${laptopName}”.*added beside it`));
  await page.locator("#pair-name").fill("Ana’s phone");
  await page.locator("#pair-submit").click();
  await page.locator("#screen-conversation").waitFor();
  assert.equal(await page.locator("#agent-name").textContent(), serverName);

  // The switcher lists both agents, each with its presence dot.
  const tabs = page.locator("#agents .agent-tab");
  await page.locator("#agents").waitFor();
  // The words both names start with ("Ana’s") are left out of the tabs; the whole names are their accessible names.
  assert.deepEqual(await tabs.locator(".agent-tab-name").allTextContents(), ["laptop — Claude Code", "server"]);
  assert.deepEqual(await tabs.evaluateAll((ts) => ts.map((t) => t.getAttribute("aria-label"))), [laptopName, serverName]);
  assert.equal(await tabs.locator(".dot").count(), 2);
  assert.equal(await page.locator(`#agents .agent-tab[data-agent-id="${server.agentId}"]`).getAttribute("aria-current"), "page");
  const stored = await page.evaluate(async () => (await (await import("/app/store.js")).listDevices()).map((d) => d.agentId));
  assert.deepEqual(stored.sort(), [agentId, server.agentId].sort());

  // A question from each agent: opening the app shows them first, together, each labelled with its agent.
  const fromLaptop = ask(["Ship the laptop build?", "--id", "qst_multi_laptop"]);
  const fromServer = onServer(["ask", "Restart the server's database?", "--id", "qst_multi_server"]);
  const pending = (id) => page.locator(`#screen-pending li.pending-question[data-id="${id}"]`);
  for (let i = 0; ; i++) {
    await page.goto(`${relayUrl}/`);
    await page.waitForFunction(() => ["conversation", "pending"].includes(document.body.dataset.screen));
    await page.waitForTimeout(300);
    if ((await pending("qst_multi_laptop").count()) === 1 && (await pending("qst_multi_server").count()) === 1) break;
    assert.ok(i < 40, "the two questions never appeared in the pending view");
    await page.waitForTimeout(500);
  }
  assert.equal(await page.locator("#screen-pending").isVisible(), true);
  assert.equal(await pending("qst_multi_laptop").locator(".pending-agent").textContent(), laptopName);
  assert.equal(await pending("qst_multi_server").locator(".pending-agent").textContent(), serverName);
  assert.equal(await pending("qst_multi_server").locator(".q-text").textContent(), "Restart the server's database?");
  await shot("pending-several-agents");

  // A push names its agent and device: the worker finds that pairing among those kept here, and the notification
  // names that agent; a tap opens that agent's conversation on the question.
  for (const [agent, device, name, id] of [
    [agentId, deviceId, laptopName, "qst_multi_laptop"],
    [server.agentId, link.deviceId, serverName, "qst_multi_server"],
  ]) {
    const item = await deviceItem((i) => i.kind === "question" && i.id === id, "question", agent);
    const [shown] = await pushShown(pushPayload(item, { agentId: agent, deviceId: device }), id, (n) => n.length === 1, `${name}'s question`);
    assert.equal(shown.title, name);
    assert.equal(shown.data.url, `/?agent=${agent}&question=${id}`);
    assert.deepEqual(shown.actions, [["yes", "Approve"], ["no", "Deny"]]);
  }
  await page.locator(`#agents .agent-tab[data-agent-id="${server.agentId}"]`).click();
  await page.locator("#agent-name", { hasText: serverName }).waitFor();
  assert.deepEqual(await clickNotification("qst_multi_laptop", ""), { opened: `/?agent=${agentId}&question=qst_multi_laptop` });
  await page.locator("#agent-name", { hasText: laptopName }).waitFor();
  await question("qst_multi_laptop").locator("button.approve").waitFor();
  await page.evaluate(async () => {
    for (const n of await (await navigator.serviceWorker.getRegistration("/")).getNotifications()) n.close();
  });
  await page.locator("#open-pending").click();
  await pending("qst_multi_server").locator("button.approve").waitFor();

  // Answered in place, each through its own agent's device.
  await pending("qst_multi_laptop").locator("button.approve").click();
  await pending("qst_multi_server").locator("button.approve").click();
  assert.equal(await exitOf(fromLaptop), 0, fromLaptop.err);
  assert.equal(await exitOf(fromServer), 0, fromServer.err);
  for (const id of ["qst_multi_laptop", "qst_multi_server"]) {
    await pending(id).locator(".q-status", { hasText: "Approved — by this device" }).waitFor();
  }
  // A question asked while the view is open is added to it (read again with the agents' presence).
  const later = onServer(["ask", "Rotate the server's logs?", "--id", "qst_multi_later"]);
  await pending("qst_multi_later").locator("button.approve").waitFor({ timeout: 45000 });
  assert.equal(await pending("qst_multi_later").locator(".pending-agent").textContent(), serverName);
  await pending("qst_multi_later").locator("button.approve").click();
  assert.equal(await exitOf(later), 0, later.err);

  // A question that needs two approvals, in the pending view: its count for everyone asked. Approved here, it waits
  // for the other device without buttons (and no longer counts as waiting for this browser); once the tablet
  // approved, the view, reading it again, says so.
  const tablet = await terminalDevice("tablet-pending", "Bob’s tablet");
  const count = page.locator("#pending-count");
  const countNow = async () => ((await count.isHidden()) ? 0 : Number(await count.textContent()));
  const two = ask(["Migrate the laptop's database?", "--approvals", "2", "--id", "qst_multi_two"]);
  await deviceItem((i) => i.kind === "question" && i.id === "qst_multi_two", "question", agentId);
  await page.locator("#open-pending").click();
  const twoCard = pending("qst_multi_two");
  await twoCard.locator("button.approve").waitFor();
  assert.equal(await twoCard.locator(".q-approvals").textContent(), "Needs 2 approvals — 0 of 2 so far");
  const waitingBefore = await countNow();
  await twoCard.locator("button.approve").click();
  await twoCard.locator(".q-status.waiting", { hasText: "You approved — waiting for 1 more" }).waitFor();
  assert.equal(await twoCard.locator(".q-approvals").textContent(), "Needs 2 approvals — 1 of 2 so far");
  assert.equal(await twoCard.locator("button.approve, button.deny").count(), 0);
  assert.equal(await countNow(), waitingBefore - 1, "a question approved here no longer waits for this browser");
  await assertFitsWidth("a pending card waiting for approvals", twoCard, twoCard.locator(".q-approvals"), twoCard.locator(".q-status"));
  await shot("pending-approvals-waiting");
  assert.ok(await stillRunningAfter(two, 1000), `ask ended after one approval: ${two.out}${two.err}`);
  // Read again (the view opened anew): the same.
  await page.locator("#open-pending").click();
  await twoCard.locator(".q-status.waiting", { hasText: "You approved — waiting for 1 more" }).waitFor();
  assert.equal(await countNow(), waitingBefore - 1);
  assert.equal((await tablet.run(["answer", "qst_multi_two", "yes"])).code, 0);
  assert.equal(await exitOf(two), 0, `${two.out}${two.err}`);
  await twoCard.locator(".q-status.answered", { hasText: "Approved — by Bob’s tablet" }).waitFor({ timeout: 45000 });
  assert.equal(await twoCard.locator(".q-approvals").count(), 0);

  // The tablet approves first: the view, read again, counts its yes and keeps this browser's buttons.
  const first = ask(["Rebuild the laptop's search index?", "--approvals", "2", "--id", "qst_multi_two_first"]);
  await deviceItem((i) => i.kind === "question" && i.id === "qst_multi_two_first", "question", agentId);
  assert.equal((await tablet.run(["answer", "qst_multi_two_first", "yes"])).code, 0);
  await page.locator("#open-pending").click();
  const firstCard = pending("qst_multi_two_first");
  await firstCard.locator(".q-approvals", { hasText: "Needs 2 approvals — 1 of 2 so far" }).waitFor();
  await firstCard.locator("button.approve").click();
  assert.equal(await exitOf(first), 0, `${first.out}${first.err}`);
  await firstCard.locator(".q-status.answered", { hasText: "Approved — by this device" }).waitFor();
  assert.equal((await tablet.run(["device", "leave"])).code, 0);

  // The overview: each agent with its presence, read from its device's status.
  // The laptop's agent with two more sessions, one per project folder: the overview lists each.
  const sessions = [await mcpSession("api", "billing-api"), await mcpSession("web", "storefront")];
  for (const session of sessions) await session.call("list_sessions");
  await page.locator("#open-overview").click();
  const row = (id) => page.locator(`#overview-list li.overview-agent[data-agent-id="${id}"]`);
  for (const [name, folder] of [["api", "billing-api"], ["web", "storefront"]]) {
    await row(agentId).locator(`.overview-session[data-session="${name}"]`, { hasText: `in ${folder}` }).waitFor();
  }
  await shot("overview-sessions");
  for (const session of sessions) await session.stop();
  await row(agentId).locator(".overview-presence", { hasText: /Listening|Busy|Connected|Offline/ }).waitFor();
  await row(server.agentId).locator(".overview-presence", { hasText: /Listening|Busy|Connected|Offline/ }).waitFor();
  assert.match(await row(agentId).getAttribute("data-presence"), /^(listening|busy|waiting_confirmation|connected)$/, "the echo agent runs");
  assert.equal(await row(server.agentId).getAttribute("data-presence"), "offline", "nothing runs for the server's agent");
  assert.equal(await row(agentId).locator(".overview-name").textContent(), laptopName);
  assert.match(await row(agentId).locator(".facts").textContent(), /Last activity/);
  await shot("overview-several-agents");

  // Unpairing the server's agent (its own settings) revokes that device only.
  await page.locator(`#agents .agent-tab[data-agent-id="${server.agentId}"]`).click();
  await page.locator("#agent-name", { hasText: serverName }).waitFor();
  await page.locator("#screen-conversation").waitFor();
  await page.locator("#open-settings").click();
  await page.locator("#s-device-id", { hasText: link.deviceId }).waitFor();
  assert.equal(await page.locator("#unpair").textContent(), `Unpair from “${serverName}”`);
  const left = page.waitForResponse((r) => r.url().endsWith("/v1/device") && r.request().method() === "DELETE");
  await page.locator("#unpair").click();
  await page.locator("#unpair-yes").click();
  assert.equal((await left).status(), 200);
  await page.locator("#agent-name", { hasText: laptopName }).waitFor();
  await page.locator("#screen-conversation").waitFor();
  assert.equal(await page.locator("#agents").isHidden(), true, "one agent left: no switcher");
  const serverDevices = (await serverJson(["agent", "devices"])).devices;
  assert.ok(serverDevices.find((d) => d.deviceId === link.deviceId).revokedAt, "revoked at the relay");
  const laptopDevices = (await cliJson(["agent", "devices"])).devices;
  assert.ok(!laptopDevices.find((d) => d.deviceId === deviceId).revokedAt, "the laptop's device stays paired");
  const kept = await page.evaluate(async () => (await (await import("/app/store.js")).listDevices()).map((d) => d.agentId));
  assert.deepEqual(kept, [agentId]);

  // The laptop's agent still gets its answers here.
  const again = ask(["Tag the release?", "--id", "qst_multi_after"]);
  await question("qst_multi_after").locator("button.approve").click();
  assert.equal(await exitOf(again), 0, again.err);
  await question("qst_multi_after").locator(".q-status", { hasText: "Approved — by this device" }).waitFor();
});

/** Where the two-agent pictures go: under target/web-tests/, and docs/images/ with UPDATE_SCREENSHOT=1. */
async function agentsShot(name) {
  mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
  const file = path.join(path.dirname(SCREENSHOT), `${name}.png`);
  await page.screenshot({ path: file });
  assert.ok(statSync(file).size > 5000);
  if (process.env.UPDATE_SCREENSHOT === "1") copyFileSync(file, path.join(path.dirname(README_SCREENSHOT), `${name}.png`));
}

test("two agents live at 390×844: another agent's question shows within a second (badge, banner, title) at the end of a long conversation and is answered from the banner; switching keeps drafts without a reload; Enter sends; the banner says “asking”; a used link lands in the app", async (t) => {
  const buildHome = path.join(work, "home-build");
  mkdirSync(buildHome, { recursive: true });
  const onBuild = (args) => start(PACERELLE, args, { PACERELLE_HOME: buildHome, PACERELLE_RELAY_URL: relayUrl });
  const buildJson = async (args) => {
    const child = onBuild(["--json", ...args]);
    assert.equal(await exitOf(child), 0, `pacerelle ${args.join(" ")} failed: ${child.err}`);
    return JSON.parse(child.out);
  };
  const laptopName = "Ana’s laptop — Claude Code";
  const buildName = "Ana’s build server";
  const build = await buildJson(["agent", "create", "--name", buildName]);
  const link = await buildJson(["pair", "--name", "phone"]);

  // The device name is asked once per browser: the one given before is offered again.
  await page.goto(link.link);
  await page.locator("#pair-form").waitFor();
  assert.equal(await page.locator("#pair-name").inputValue(), "Ana’s phone");
  await page.locator("#pair-submit").click();
  await page.locator("#agent-name", { hasText: buildName }).waitFor();
  const tab = (id) => page.locator(`#agents .agent-tab[data-agent-id="${id}"]`);
  // An agent's conversation shown (switched to in place): its tab is the current one.
  const showing = async (id, name) => {
    await page.locator(`#agents .agent-tab[data-agent-id="${id}"][aria-current="page"]`).waitFor();
    await page.locator("#screen-conversation").waitFor();
    await page.locator("#agent-name", { hasText: name }).waitFor();
  };

  // Switching agents does not reload the page.
  await page.evaluate(() => (window.notReloaded = true));
  await tab(agentId).click();
  await showing(agentId, laptopName);
  assert.equal(await page.evaluate(() => window.notReloaded), true, "switching agents reloaded the page");

  // A long conversation: 50 more messages in the laptop's thread.
  for (let i = 1; i <= 50; i++) await cliJson(["notify", `Step ${i} of 50 done`]);
  await page.locator("li.notification", { hasText: "Step 50 of 50 done" }).waitFor();
  await page.evaluate(() => window.scrollTo(0, document.documentElement.scrollHeight));
  await page.waitForTimeout(300);
  assert.ok(await page.evaluate(() => document.documentElement.scrollHeight > 3 * innerHeight), "a long conversation");

  // A draft left in the laptop's composer.
  const draft = "Draft for the laptop: tidy the release notes";
  await page.locator("#task-text").fill(draft);

  // The build server asks: within a second its tab has a badge, the banner names it, the title counts it, and the
  // strip is in view at the bottom of the long conversation.
  const waitingCount = async () => ((await page.locator("#pending-count").isHidden()) ? 0 : Number(await page.locator("#pending-count").textContent()));
  const before = await waitingCount();
  const asked = Date.now();
  const fromBuild = onBuild(["ask", "Deploy the build server's release?", "--id", "qst_live_build"]);
  await tab(build.agentId).locator(".agent-count", { hasText: "1" }).waitFor({ timeout: 10000 });
  await page.locator("#ask-banner", { hasText: "Deploy the build server's release?" }).waitFor({ timeout: 10000 });
  const latency = Date.now() - asked;
  t.diagnostic(`badge and banner ${latency} ms after \`pacerelle ask\` started`);
  console.log(`# badge latency: ${latency} ms`);
  assert.ok(latency < 3000, `the badge took ${latency} ms`);
  assert.ok((await page.title()).startsWith(`(${before + 1}) `), await page.title());
  assert.equal(await waitingCount(), before + 1);
  assert.match(await page.locator("#ask-text").textContent(), new RegExp(buildName));
  for (const pinned of ["#agents", "#ask-banner"]) {
    const box = await page.locator(pinned).boundingBox();
    assert.ok(box && box.y >= 0 && box.y + box.height <= 844, `${pinned} is off-screen: ${JSON.stringify(box)}`);
  }
  // One row at 390 px: the strip is no taller than a tab and its padding, and every tab's count is wholly inside
  // its tab and on screen (a long name gives way first).
  const strip = await page.evaluate(() => {
    const agents = document.getElementById("agents").getBoundingClientRect();
    const tab = document.querySelector("#agents .agent-tab").getBoundingClientRect();
    const counts = [...document.querySelectorAll("#agents .agent-count")].map((c) => {
      const r = c.getBoundingClientRect();
      const t = c.closest(".agent-tab").getBoundingClientRect();
      return { inside: r.left >= t.left - 0.5 && r.right <= t.right + 0.5, onScreen: r.left >= 0 && r.right <= innerWidth };
    });
    return { height: agents.height, tab: tab.height, counts };
  });
  assert.ok(strip.height < strip.tab * 1.6, `the strip takes more than one row: ${JSON.stringify(strip)}`);
  assert.ok(strip.counts.length > 0 && strip.counts.every((c) => c.inside && c.onScreen), JSON.stringify(strip));
  assert.ok(await page.evaluate(() => document.documentElement.scrollTop > 1000), "still at the end of the conversation");

  // The pictures: the two-agent view at 390×844 (light and dark) and 1280×800.
  await page.locator("#toast").waitFor({ state: "hidden", timeout: 10000 });
  await agentsShot("agents-390");
  await page.emulateMedia({ colorScheme: "dark" });
  await agentsShot("agents-390-dark");
  await page.emulateMedia({ colorScheme: "light" });
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.waitForTimeout(200);
  const wide = await page.evaluate(() => {
    const top = document.querySelector(".top").getBoundingClientRect();
    const agents = document.getElementById("agents").getBoundingClientRect();
    return { top: top.top, agents: agents.top, agentsHeight: agents.height };
  });
  assert.ok(Math.abs(wide.top - wide.agents) < wide.agentsHeight, `one row on a wide screen: ${JSON.stringify(wide)}`);
  await agentsShot("agents-1280");
  await page.setViewportSize({ width: 390, height: 844 });

  // Answered from the banner: `pacerelle ask` exits 0, the card leaves “Waiting for you”, its countdown stops.
  await page.locator("#ask-open").click();
  const card = page.locator(`#screen-pending li.pending-question[data-id="qst_live_build"]`);
  await card.locator("button.approve").click();
  assert.equal(await exitOf(fromBuild), 0, fromBuild.err);
  await page.locator(`#pending-answered li[data-id="qst_live_build"] .q-status`, { hasText: "Approved — by this device" }).waitFor();
  assert.equal(await page.locator(`#pending-list li[data-id="qst_live_build"]`).count(), 0);
  assert.equal(await card.locator(".time-left").textContent(), "");
  await tab(build.agentId).locator(".agent-count").waitFor({ state: "detached" });
  await page.waitForFunction((n) => !document.title.startsWith(`(${n + 1}) `), before);

  // Switching to the build server and back keeps the laptop's draft; a draft of its own is kept for it too, across
  // a reload.
  await tab(build.agentId).click();
  await showing(build.agentId, buildName);
  assert.equal(await page.locator("#task-text").inputValue(), "");
  await page.locator("#task-text").fill("Draft for the build server");
  await tab(agentId).click();
  await showing(agentId, laptopName);
  assert.equal(await page.locator("#task-text").inputValue(), draft);
  assert.equal(await page.evaluate(() => window.notReloaded), true);
  await page.reload();
  await page.locator("#agent-name", { hasText: laptopName }).waitFor();
  // (Questions still waiting from earlier cases open the pending view first: the laptop's tab shows its conversation.)
  await tab(agentId).click();
  await page.locator("#screen-conversation").waitFor();
  assert.equal(await page.locator("#task-text").inputValue(), draft);
  await tab(build.agentId).click();
  await showing(build.agentId, buildName);
  assert.equal(await page.locator("#task-text").inputValue(), "Draft for the build server");
  await page.locator("#task-text").fill("");
  await tab(agentId).click();
  await showing(agentId, laptopName);

  // Enter sends (Shift+Enter is a new line); the composer says so.
  assert.match(await page.locator("#task-text").getAttribute("placeholder"), /Enter sends/);
  const text = unique("Sent with Enter");
  await page.locator("#task-text").fill(text);
  await page.locator("#task-text").press("Shift+Enter");
  assert.equal(await page.locator("#task-text").inputValue(), `${text}\n`);
  await page.locator("#task-text").press("Backspace");
  await page.locator("#task-text").press("Enter");
  await page.locator("li.task", { hasText: text }).locator(".reply", { hasText: `echo: ${text}` }).waitFor();
  assert.equal(await page.locator("#task-text").inputValue(), "");

  // While a question of the laptop's agent waits, the banner says “asking”, never “ready for a task”.
  const fromLaptop = ask(["Publish the release notes?", "--id", "qst_live_asking"]);
  await question("qst_live_asking").locator("button.approve").waitFor();
  await page.locator('#banner[data-activity="asking"]').waitFor({ timeout: 10000 });
  assert.match(await page.locator("#banner-text").textContent(), /^Asking/);
  assert.equal(await tab(agentId).locator(".dot").getAttribute("data-activity"), "asking");
  await question("qst_live_asking").locator("button.approve").click();
  assert.equal(await exitOf(fromLaptop), 0, fromLaptop.err);
  if ((await tab(agentId).locator(".agent-count").count()) === 0) {
    await page.locator('#banner[data-activity="listening"], #banner[data-activity="working"]').waitFor({ timeout: 20000 });
  }

  // The build server's link again: used, and no dead end — the app opens, saying so, with both agents.
  const again = await context.newPage();
  await again.goto(link.link);
  await again.locator("#notice", { hasText: "This link was already used" }).waitFor();
  const said = await again.locator("#notice-text").textContent();
  assert.ok(said.includes(laptopName) && said.includes(buildName), said);
  await again.locator("#screen-conversation").waitFor();
  assert.equal(await again.locator("#agents .agent-tab").count(), 2);
  await again.close();

  // The build server unpaired again (its own settings): the other tests find the one agent they expect.
  await tab(build.agentId).click();
  await showing(build.agentId, buildName);
  await page.locator("#open-settings").click();
  await page.locator("#s-device-id", { hasText: link.deviceId }).waitFor();
  await page.locator("#unpair").click();
  await page.locator("#unpair-yes").click();
  await page.locator("#agent-name", { hasText: laptopName }).waitFor();
  await page.locator("#screen-conversation").waitFor();
  assert.equal(await page.locator("#agents").isHidden(), true);
});

test("a browser paired before several pairings keeps its pairing: the one stored pairing becomes the list's", async () => {
  const pairing = await cliJson(["pair", "--name", "older phone"]);
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
  try {
    const older = await (await browser.newContext({ locale: "en-GB" })).newPage();
    older.setDefaultTimeout(20000);
    const errors = [];
    older.on("pageerror", (e) => errors.push(`page error: ${e.message}`));
    await older.goto(pairing.link);
    await older.locator("#pair-name").fill("Older phone");
    await older.locator("#pair-submit").click();
    await older.locator("#screen-conversation").waitFor();
    // Stored as the app did before (database version 1): the pairing at "device", an outbox entry naming no agent.
    // The page is loaded without the app's script meanwhile, so that only the store reads the database.
    const noApp = (route) => route.fulfill({ status: 200, contentType: "text/javascript", body: "" });
    await older.route("**/app/app.js", noApp);
    await older.goto(`${relayUrl}/`);
    await older.evaluate(async (agentId) => {
      const open = (version, upgrade) =>
        new Promise((resolve, reject) => {
          const req = version ? indexedDB.open("pacerelle", version) : indexedDB.open("pacerelle");
          if (upgrade) req.onupgradeneeded = () => upgrade(req.result);
          req.onsuccess = () => resolve(req.result);
          req.onerror = () => reject(req.error);
        });
      const done = (req) => new Promise((resolve, reject) => ((req.onsuccess = () => resolve(req.result)), (req.onerror = () => reject(req.error))));
      let db = await open();
      const device = await done(db.transaction("kv").objectStore("kv").get(`pairing:${agentId}`));
      db.close();
      await done(indexedDB.deleteDatabase("pacerelle"));
      db = await open(1, (d) => {
        d.createObjectStore("kv");
        d.createObjectStore("outbox", { keyPath: "id" });
      });
      const t = db.transaction(["kv", "outbox"], "readwrite");
      t.objectStore("kv").put(device, "device");
      t.objectStore("outbox").put({ id: "ignored_legacy", type: "legacy", queuedAt: 1 });
      await new Promise((resolve) => (t.oncomplete = resolve));
      db.close();
    }, agentId);
    // The new app moves it into the list, with its outbox entry named after its agent, and works on.
    const migrated = await older.evaluate(async () => {
      const store = await import("/app/store.js");
      const devices = await store.listDevices();
      const outbox = await store.listOutbox();
      const selected = await store.loadDevice();
      return { agents: devices.map((d) => d.agentId), outbox: outbox.map((e) => [e.id, e.agentId]), selected: selected.deviceId, key: selected.key instanceof CryptoKey };
    });
    assert.deepEqual(migrated, { agents: [agentId], outbox: [["ignored_legacy", agentId]], selected: pairing.deviceId, key: true });
    await older.unroute("**/app/app.js", noApp);
    await older.goto(`${relayUrl}/?reload`);
    await older.locator("#screen-conversation").waitFor();
    assert.equal(await older.locator("#agent-name").textContent(), "Ana’s laptop — Claude Code");
    await older.locator("#open-settings").click();
    await older.locator("#s-device-id", { hasText: pairing.deviceId }).waitFor();
    assert.deepEqual(errors, []);
    // It leaves, so that the other tests find the one phone they expect.
    const left = older.waitForResponse((r) => r.url().endsWith("/v1/device") && r.request().method() === "DELETE");
    await older.locator("#unpair").click();
    await older.locator("#unpair-yes").click();
    assert.equal((await left).status(), 200);
    await older.locator("#screen-unpaired").waitFor();
  } finally {
    await browser.close();
  }
});

test("a revoked device is told, and can no longer read or send", async () => {
  const [device] = (await cliJson(["agent", "devices"])).devices;
  const revoked = await cli(["agent", "revoke", device.deviceId]);
  assert.equal(revoked.code, 0, revoked.err);
  await page.locator("#screen-revoked").waitFor({ timeout: 20000 });
  await shot("revoked");
  assert.ok(await page.locator("#composer").isHidden());
});

test("unpairing from the settings revokes the device at the relay and forgets everything here", async () => {
  const pairing = await cliJson(["pair", "--name", "phone again"]);
  await page.goto(pairing.link);
  await page.locator("#pair-name").fill("Ana’s second phone");
  await page.locator("#pair-submit").click();
  await page.locator("#screen-conversation").waitFor();
  await page.locator("#open-settings").click();
  await page.locator("#s-device-id", { hasText: pairing.deviceId }).waitFor();
  // A first tap asks; Cancel keeps everything.
  await page.locator("#unpair").click();
  await page.locator("#unpair-confirm").waitFor();
  await shot("settings-unpair");
  await page.locator("#unpair-cancel").click();
  assert.equal(await page.locator("#unpair-confirm").isHidden(), true);
  const left = page.waitForResponse((r) => r.url().endsWith("/v1/device") && r.request().method() === "DELETE");
  await page.locator("#unpair").click();
  await page.locator("#unpair-yes").click();
  assert.equal((await left).status(), 200);
  await page.locator("#screen-unpaired").waitFor();
  const { devices } = await cliJson(["agent", "devices"]);
  assert.ok(devices.find((d) => d.deviceId === pairing.deviceId).revokedAt, "revoked at the relay");
  const kept = await page.evaluate(async () => {
    const db = await new Promise((resolve, reject) => {
      const req = indexedDB.open("pacerelle");
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
    const count = (store) =>
      new Promise((resolve) => {
        const req = db.transaction(store).objectStore(store).count();
        req.onsuccess = () => resolve(req.result);
      });
    return [await count("kv"), await count("outbox")];
  });
  assert.deepEqual(kept, [0, 0], "nothing of the pairing is left in the browser");
});

test("the relay's files never contain the texts typed in the browser", async () => {
  assert.ok(typed.length >= 4);
  const files = readdirSync(dataDir).map((f) => path.join(dataDir, f));
  if (postgresFolder) {
    // The database is PostgreSQL's files: its tables, and the write-ahead log every change goes through first.
    const database = filesBelow(postgresFolder);
    assert.ok(database.some((f) => f.includes(`${path.sep}pg_wal${path.sep}`)), `no write-ahead log in ${postgresFolder}`);
    files.push(...database);
  } else {
    assert.ok(files.some((f) => f.endsWith("pacerelle.db")), `no database in ${files}`);
  }
  let bytes = 0;
  for (const file of files) {
    let content;
    try {
      content = readFileSync(file);
    } catch (e) {
      // PostgreSQL removes its temporary files as it goes; a file gone since the listing held nothing more.
      if (postgresFolder && e.code === "ENOENT") continue;
      throw e;
    }
    bytes += content.length;
    for (const text of typed) {
      // The whole text, and its last word when that is long enough not to occur by chance in base64 ciphertext (a
      // four-letter word such as "pass" does, once in about 17 million positions).
      const last = text.split(" ").pop();
      for (const needle of last.length >= 8 ? [text, last] : [text]) {
        assert.equal(content.indexOf(Buffer.from(needle, "utf8")), -1, `${path.basename(file)} contains “${needle}”`);
      }
    }
  }
  assert.ok(bytes > 0);
});

test("the app made requests to the relay only, without errors", () => {
  const origins = [new URL(relayUrl).origin, new URL(relayUrl.replace("127.0.0.1", "localhost")).origin, "https://localhost:"];
  const elsewhere = requests.filter((u) => !origins.some((o) => u.startsWith(o)) && !u.startsWith("data:"));
  assert.deepEqual(elsewhere, []);
  assert.deepEqual(problems, []);
});
