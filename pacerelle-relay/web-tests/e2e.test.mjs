// End-to-end tests of the web app in Debian's Chromium (driven by playwright-core, no downloaded browser),
// against a real relay (`pacerelle serve`, its own SQLite file in a temporary folder), the real echo agent,
// and the real CLI for the agent side (`agent create`, `pair`, `ask`, `notify`, `cancel`).
//
// Run from this folder after `cargo build -p pacerelle-cli -p echo-agent`:  node --test e2e.test.mjs
// Environment: PACERELLE_BIN, ECHO_AGENT_BIN (default: target/debug/…), CHROMIUM (default /usr/bin/chromium),
// UPDATE_SCREENSHOT=1 to also write docs/images/conversation.png.

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { X509Certificate, createHash, randomBytes } from "node:crypto";

import { chromium } from "playwright-core";

const ROOT = path.resolve(fileURLToPath(new URL("../..", import.meta.url)));
const PACERELLE = process.env.PACERELLE_BIN || path.join(ROOT, "target/debug/pacerelle");
const ECHO_AGENT = process.env.ECHO_AGENT_BIN || path.join(ROOT, "target/debug/echo-agent");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
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
let context;
let page;
const requests = [];
const problems = [];

/** Starts a process; its output is kept for failure messages. */
function start(program, args, env = {}) {
  const child = spawn(program, args, {
    env: { ...process.env, PACERELLE_HOME: home, PACERELLE_LOG: "warn", ...env },
    stdio: ["ignore", "pipe", "pipe"],
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

const question = (id) => page.locator(`li.question[data-id="${id}"]`);

before(async () => {
  for (const file of [PACERELLE, ECHO_AGENT, CHROMIUM]) {
    assert.ok(existsSync(file), `${file} is missing (cargo build -p pacerelle-cli -p echo-agent; apt-get install chromium)`);
  }
  mkdirSync(dataDir, { recursive: true });
  mkdirSync(home, { recursive: true });

  relayUrl = await startRelay(["--data", dataDir]);

  const agent = await cliJson(["agent", "create", "--name", "Ana’s laptop — Claude Code"]);
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
  await page.goto(pairing.link);
  // The secret leaves the address bar at once.
  await page.locator("#pair-form").waitFor();
  assert.equal(new URL(page.url()).hash, "");
  assert.equal(await page.locator("#pair-agent").textContent(), "Ana’s laptop — Claude Code");
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
    const device = await new Promise((resolve) => {
      const req = db.transaction("kv").objectStore("kv").get("device");
      req.onsuccess = () => resolve(req.result);
    });
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

  // The same link again: single use, refused, and the pairing here is kept.
  const again = await context.newPage();
  await again.goto(pairing.link);
  await again.locator("#pair-error").waitFor();
  assert.match(await again.locator("#pair-error").textContent(), /already used/);
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
  await card.locator("button.approve").click();
  assert.equal(await exitOf(child), 0, child.err);
  await card.locator(".q-status", { hasText: "Approved — by this device" }).waitFor();
  assert.equal(await card.locator("button").count(), 0);
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

  // The browser does not learn of the tablet's answer before its own is sent.
  let hold = true;
  const listing = (url) => url.pathname === "/v1/device/questions";
  await page.route(listing, (route) => (hold ? route.abort("connectionreset") : route.continue()));
  const child = ask(["Ship the release notes?", "--id", "qst_e2e_closed", "--json"]);
  const card = question("qst_e2e_closed");
  await card.locator("button.deny").waitFor();
  const yes = await asTablet(["--json", "answer", "qst_e2e_closed", "yes"]);
  assert.equal(yes.code, 0, yes.err);
  assert.equal(await exitOf(child), 0, child.err);
  assert.equal(JSON.parse(child.out).answeredByName, "Bob’s tablet");

  const answered = page.waitForResponse((r) => r.url().includes("/v1/device/questions/qst_e2e_closed/answer"));
  await card.locator("button.deny").click();
  assert.equal((await answered).status(), 409);
  hold = false;
  await card.locator(".q-status", { hasText: "Approved — by Bob’s tablet" }).waitFor();
  assert.equal(await card.getAttribute("data-state"), "answered");
  assert.equal(await card.locator("button").count(), 0);
  assert.match(await card.textContent(), /Your answer \(Denied\) was not recorded/);
  assert.equal(await card.locator(".q-status.denied").count(), 0, "the refused no is never shown as the answer");
  await page.locator("#toast", { hasText: "Already answered by Bob’s tablet: Approved" }).waitFor();
  await shot("answered-elsewhere");
  await page.unroute(listing);

  // After a reload, the same: the answer that counts, read from its copy.
  await page.reload();
  await question("qst_e2e_closed").locator(".q-status", { hasText: "Approved — by Bob’s tablet" }).waitFor();

  const left = await asTablet(["device", "leave"]);
  assert.equal(left.code, 0, left.err);
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

test("a revoked device is told, and can no longer read or send", async () => {
  const [device] = (await cliJson(["agent", "devices"])).devices;
  const revoked = await cli(["agent", "revoke", device.deviceId]);
  assert.equal(revoked.code, 0, revoked.err);
  await page.locator("#screen-revoked").waitFor({ timeout: 20000 });
  await shot("revoked");
  assert.ok(await page.locator("#composer").isHidden());
});

test("the relay's files never contain the texts typed in the browser", async () => {
  assert.ok(typed.length >= 4);
  const files = readdirSync(dataDir).map((f) => path.join(dataDir, f));
  assert.ok(files.some((f) => f.endsWith("pacerelle.db")), `no database in ${files}`);
  let bytes = 0;
  for (const file of files) {
    const content = readFileSync(file);
    bytes += content.length;
    for (const text of typed) {
      for (const needle of [text, text.split(" ").pop()]) {
        assert.equal(content.indexOf(Buffer.from(needle, "utf8")), -1, `${path.basename(file)} contains “${needle}”`);
      }
    }
  }
  assert.ok(bytes > 0);
});

test("the app made requests to the relay only, without errors", () => {
  const origins = [new URL(relayUrl).origin, "https://localhost:"];
  const elsewhere = requests.filter((u) => !origins.some((o) => u.startsWith(o)) && !u.startsWith("data:"));
  assert.deepEqual(elsewhere, []);
  assert.deepEqual(problems, []);
});
