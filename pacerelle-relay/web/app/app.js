// The Pacerelle web app: pairing at /pair, then the conversation with the agent at /.
//
// Everything sent is sealed here and everything received is opened here (crypto.js, WebCrypto); the relay
// only stores and forwards envelopes. The pairing secret is read from the link's fragment, which browsers
// never send, and is removed from the address bar at once; it is never sent anywhere.

import * as c from "./crypto.js";
import * as store from "./store.js";
import * as answers from "./answer.js";
import * as push from "./push.js";
import * as grantUi from "./grant-ui.js";
import * as approvals from "./approvals.js";
import { closedOutcome, tallyLine, waitingStatus } from "./approvals-ui.js";
import { ApiError, deviceApi, isRevocation, pairingApi, relayApi } from "./api.js";
import { Backoff } from "./backoff.js";
import { detailsNodes, foldable } from "./details.js";
import { GrantError, durationLabel } from "./grant.js";

/** Longest long-poll (the relay caps at 55 s, below the usual 60 s of proxies). */
const LONG_POLL_WAIT = 55;
/** How often presence is read (states arrive as `update` items; an older relay's are read again at this pace). */
const STATUS_EVERY_MS = 5000;
/** Most conversation items in one answer of the relay. */
const PAGE = 200;
/** Largest task or text answer, in UTF-8 bytes. */
const MAX_TEXT_BYTES = 64 * 1024;

const $ = (id) => document.getElementById(id);

/** An element with a class and text (never HTML: texts from the agent are shown as text). */
function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function clock(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  const sameDay = d.toDateString() === new Date().toDateString();
  const time = d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  return sameDay ? time : `${d.toLocaleDateString([], { day: "numeric", month: "short" })} ${time}`;
}

function timeLeft(ms) {
  const s = Math.max(0, Math.ceil(ms / 1000));
  if (s < 60) return `${s} s left`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${String(s % 60).padStart(2, "0")} s left`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ${String(m % 60).padStart(2, "0")} min left`;
  return `${Math.floor(h / 24)} days left`;
}

/** A size in bytes, in KiB as people read it: "64 KiB", "195.3 KiB". */
function kib(bytes) {
  const k = bytes / 1024;
  return `${Number.isInteger(k) ? k : k.toFixed(1)} KiB`;
}

let toastTimer = null;
function toast(text) {
  const t = $("toast");
  t.textContent = text;
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => (t.hidden = true), 6000);
}

const SCREENS = ["loading", "insecure", "unpaired", "revoked", "pair", "conversation", "settings", "grants", "pending", "overview"];
function showScreen(name) {
  for (const s of SCREENS) $(`screen-${s}`).hidden = s !== name;
  document.body.dataset.screen = name;
  const chat = name === "conversation";
  $("composer").hidden = !(chat && app.device && app.device.role === "owner");
  $("open-settings").hidden = !chat;
  if (chat) setBanner();
  else $("banner").hidden = true;
  renderSwitcher();
}

// ── state ─────────────────────────────────────────────────────────────────────────────────────────

const app = {
  device: null, // {agentId, agentName, deviceId, deviceName, role, deviceToken, key, user?, branding?}
  api: null,
  cursor: null, // where the long-poll continues (opaque, issued by the relay)
  entries: new Map(), // item id → {kind, node, …}
  order: [], // task ids in thread order, with the cursor before each (to re-read states)
  questions: new Map(), // question id → {id, payload, digest, meta, node, sending, answer, counted, …}
  pendingAnswers: new Map(), // question id → sealed answer still in the outbox (after a reload)
  connected: null,
  presence: null,
  stopped: false,
  retry: new Backoff(), // the outbox's retries
  reconnect: new Backoff(), // the conversation long-poll's reconnections
  retryTimer: null,
  updates: null, // true when the relay sends `update` items (then states are never read again on a timer)
  focus: null, // the question to show once it is in the thread (a tap on its notification)
  signingReady: Promise.resolve(), // settles once the relay is known to hold this device's signing key, or cannot
  pairings: [], // every pairing this browser holds (the conversation shown is app.device's)
  presences: new Map(), // agentId → presence, for the switcher's dots
  revokedAgentId: null, // the agent whose device was revoked, shown on the revoked screen
  pendingShown: new Map(), // question id → what the pending view shows of it ({agent, id, payload, meta, node, …})
};

function setBanner() {
  const banner = $("banner");
  if (document.body.dataset.screen !== "conversation") {
    banner.hidden = true;
    return;
  }
  let kind;
  let text;
  // A Partner-mode user's device answers questions here (the composer is the owner's): whether the agent listens
  // for tasks says nothing to them.
  if (app.device && app.device.user && app.connected !== false) {
    banner.hidden = true;
    return;
  }
  if (app.connected === false) {
    kind = "down";
    text = "Server disconnected — retrying…";
  } else {
    switch (app.presence) {
      case "listening":
        kind = "ok";
        text = "Listening — ready for a task";
        break;
      case "busy":
        kind = "busy";
        text = "Busy — working on a task";
        break;
      case "waiting_confirmation":
        kind = "warn";
        text = "Probably waiting for a confirmation on the computer";
        break;
      case "connected":
        kind = "idle";
        text = "Connected, not listening right now — tasks will wait";
        break;
      case "offline":
        kind = "idle";
        text = "Agent offline — tasks wait on the relay until it comes back";
        break;
      default:
        banner.hidden = true;
        return;
    }
  }
  banner.className = `banner ${kind}`;
  banner.dataset.presence = app.connected === false ? "disconnected" : app.presence;
  $("banner-text").textContent = text;
  banner.hidden = false;
}

function setConnected(connected) {
  if (app.connected === connected) return;
  const wasDown = app.connected === false;
  app.connected = connected;
  setBanner();
  if (connected && wasDown) flushOutbox();
}

/** The network is back, or the page is shown again: reconnect now rather than at the end of the backoff. */
function reconnectNow() {
  app.reconnect.wake();
  app.retry.reset();
  flushOutbox();
}

// ── Partner mode: the agent as its product shows it to a user ─────────────────────────────────────

/** The WCAG relative luminance of `#rrggbb`. */
function luminance(hex) {
  const [r, g, b] = [1, 3, 5].map((i) => {
    const v = parseInt(hex.slice(i, i + 2), 16) / 255;
    return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

/** White or black, whichever contrasts more with `hex`: never below 4.58:1, whatever the colour. */
function inkOn(hex) {
  const l = luminance(hex);
  return 1.05 / (l + 0.05) >= (l + 0.05) / 0.05 ? "#ffffff" : "#000000";
}

const DEFAULT_ICON = "/app/icon.svg";
const DEFAULT_THEME = document.querySelector('meta[name="theme-color"]').content;

/**
 * Shows the agent as a Partner-mode pairing (or offer) describes it, `{branding?}`: its accent colour becomes the
 * app's brand colour (buttons, the question's frame, a line under the header), with white or black text on it,
 * whichever reads better; its icon, an inline data URL (nothing is fetched), replaces Pacerelle's in the header.
 * Without a branding — an owner's pairing — the app keeps its own look.
 */
function applyLook(who) {
  const branding = who && who.branding && c.brandingProblem(who.branding) === null ? who.branding : null;
  const accent = branding && branding.accentColor;
  const root = document.documentElement.style;
  if (accent) {
    root.setProperty("--accent", accent);
    root.setProperty("--brand", accent);
    root.setProperty("--brand-fg", inkOn(accent));
  } else {
    for (const name of ["--accent", "--brand", "--brand-fg"]) root.removeProperty(name);
  }
  document.body.classList.toggle("branded", Boolean(accent));
  document.querySelector('meta[name="theme-color"]').content = accent || DEFAULT_THEME;
  const icon = (branding && branding.icon) || DEFAULT_ICON;
  if ($("brand-icon").getAttribute("src") !== icon) $("brand-icon").src = icon;
}

// ── boot ──────────────────────────────────────────────────────────────────────────────────────────

async function boot() {
  if (!window.isSecureContext || !globalThis.crypto || !globalThis.crypto.subtle) {
    showScreen("insecure");
    return;
  }
  if (location.pathname === "/pair") {
    await startPairing();
    return;
  }
  // `?agent=` (the switcher, a notification): that agent's conversation is the one shown from now on.
  const params = new URLSearchParams(location.search);
  const chosen = params.get("agent");
  if (chosen) {
    if (await store.loadDevice(chosen)) await store.selectDevice(chosen);
    params.delete("agent");
    const query = params.toString();
    history.replaceState(null, "", "/" + (query ? `?${query}` : "") + location.hash);
  }
  app.pairings = await store.listDevices();
  const device = await store.loadDevice();
  if (!device) {
    showScreen("unpaired");
    return;
  }
  await startConversation(device);
  if (app.pairings.length > 1) {
    presenceLoop();
    // On open, the questions waiting across all agents come first (not when a notification or the switcher chose).
    const opening = !chosen && !params.get("question") && !onSettings();
    const waiting = await loadPending();
    if (opening && waiting.length > 0 && document.body.dataset.screen === "conversation") showPending(waiting);
  }
}

function guessDeviceName() {
  const ua = navigator.userAgent;
  if (/iPhone/.test(ua)) return "iPhone";
  if (/iPad/.test(ua)) return "iPad";
  if (/Android/.test(ua)) return /Mobile/.test(ua) ? "Android phone" : "Android tablet";
  return "Web browser";
}

// ── pairing ───────────────────────────────────────────────────────────────────────────────────────

/** What a refused pairing says, by the error's kind. */
const PAIRING_ERRORS = {
  not_found: "This pairing link is unknown to the relay. Ask for a new one: pacerelle pair.",
  pairing_claimed:
    "This pairing link was already used. Ask for a new one (pacerelle pair). If you did not use it, revoke the unknown device: pacerelle agent devices, then pacerelle agent revoke.",
  pairing_expired: "This pairing link has expired. Ask for a new one: pacerelle pair.",
  pairing_proof: "The relay refused this link's proof. Ask for a new link.",
  rate_limited: "Too many pairing attempts from this network. Wait a minute and open the link again.",
  network: "The relay cannot be reached. Check the connection and open the link again.",
};

function pairError(text) {
  $("pair-status").hidden = true;
  $("pair-form").hidden = true;
  const err = $("pair-error");
  err.textContent = text;
  err.hidden = false;
}

async function startPairing() {
  const fragment = location.hash;
  // The secret leaves the address bar (and the history entry) at once; it stays in this function only.
  history.replaceState(null, "", "/pair");
  showScreen("pair");
  let secret;
  try {
    secret = c.parseFragment(fragment);
  } catch {
    const existing = await store.loadDevice();
    if (existing) {
      location.replace("/");
      return;
    }
    pairError("This pairing link is incomplete. Open the whole link, or scan the QR code again.");
    return;
  }
  const p = await c.pairingValues(secret);
  secret.fill(0);
  let offer;
  try {
    offer = await pairingApi.offer(p.pairingId);
  } catch (e) {
    pairError(PAIRING_ERRORS[e.kind] || `The relay refused the link (${e.message}).`);
    return;
  }
  let payload;
  try {
    payload = await c.openOffer(p.pairingKey, p.pairingId, offer.agentId, offer.deviceId, offer.offer);
  } catch {
    pairError("The offer does not open with this link: the link is damaged, or the relay served another offer. Nothing was paired.");
    return;
  }
  const key = await c.importKey(payload.deviceKeyBytes);
  // One pairing per agent: the same agent's is replaced, another agent's are kept beside it.
  const existing = await store.loadDevice(payload.agentId);
  const others = (await store.listDevices()).filter((d) => d.agentId !== payload.agentId);

  $("pair-status").hidden = true;
  $("pair-agent").textContent = payload.agentName;
  $("pair-role").textContent = payload.role === "owner" ? "owner" : "answers questions";
  // Partner mode: the product's name, icon and colour, and who this device will answer as, before accepting.
  if (payload.user || payload.branding) {
    applyLook(payload);
    $("agent-name").textContent = payload.agentName;
    const icon = payload.branding && payload.branding.icon;
    $("pair-icon").hidden = !icon;
    if (icon) $("pair-icon").src = icon;
  }
  if (payload.user) {
    $("pair-user-name").textContent = payload.user.name;
    $("pair-user").hidden = false;
  }
  if (existing) {
    const replace = $("pair-replace");
    replace.textContent = `This browser is paired with “${existing.agentName}” already. Pairing again replaces that pairing here; the other agents paired here stay as they are.`;
    replace.hidden = false;
  } else if (others.length > 0) {
    const add = $("pair-replace");
    const names = others.map((d) => `“${d.agentName}”`).join(", ");
    add.textContent = `This browser is also paired with ${names}. This agent is added beside ${others.length > 1 ? "them" : "it"}: switch between them at the top.`;
    add.hidden = false;
  }
  const name = $("pair-name");
  name.value = guessDeviceName();
  $("pair-form").hidden = false;

  $("pair-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const deviceName = name.value.trim();
    if (!deviceName || [...deviceName].length > 100) {
      toast("A device name has 1 to 100 characters.");
      return;
    }
    $("pair-submit").disabled = true;
    $("pair-status").textContent = "Pairing…";
    $("pair-status").hidden = false;
    // This device's signing key (docs/crypto.md §4.8): the agent gets it sealed with the device key, so the relay
    // cannot substitute it. None where WebCrypto has no Ed25519: the pairing goes on, and answers go unsigned.
    const signing = await answers.newSigningKey();
    const sealedKey = signing
      ? await c.sealSigningKey(key, payload.agentId, payload.deviceId, c.b64decode(signing.signingKey))
      : null;
    let claimed;
    try {
      // Never retried: a claim is single use, and an answer lost in transit cannot claim twice.
      claimed = await pairingApi.claim(p.pairingId, c.b64encode(p.claimSecret), deviceName, sealedKey);
    } catch (e) {
      if (e.kind === "network") {
        pairError("The relay's answer was lost: the link may have been used. Open the app; if it is not paired, ask for a new link.");
      } else {
        pairError(PAIRING_ERRORS[e.kind] || `The relay refused the pairing (${e.message}).`);
      }
      return;
    }
    if (claimed.agentId !== payload.agentId || claimed.deviceId !== payload.deviceId) {
      pairError("The relay's answer does not match the offer. Nothing was stored; revoke the new device on the computer.");
      return;
    }
    try {
      c.splitBearer(claimed.deviceToken);
    } catch {
      pairError("The relay returned a malformed credential.");
      return;
    }
    const device = {
      v: 1,
      agentId: payload.agentId,
      agentName: payload.agentName,
      deviceId: payload.deviceId,
      deviceName,
      role: payload.role,
      deviceToken: claimed.deviceToken,
      key,
      pairedAt: new Date().toISOString(),
    };
    // Partner mode: the user this device answers for, and the product's look, kept with the pairing.
    if (payload.user) device.user = payload.user;
    if (payload.branding) device.branding = payload.branding;
    // Registered once the relay lists it (checked at the start of the conversation: an older relay ignores it).
    if (signing) device.signing = signing;
    if (existing) await store.forgetDevice(payload.agentId);
    await store.saveDevice(device, payload.deviceKeyBytes);
    await store.selectDevice(payload.agentId);
    payload.deviceKeyBytes.fill(0);
    if (navigator.storage && navigator.storage.persist) navigator.storage.persist().catch(() => {});
    history.replaceState(null, "", "/");
    app.pairings = await store.listDevices();
    await startConversation(await store.loadDevice(payload.agentId));
    if (app.pairings.length > 1) presenceLoop();
  });
  name.focus();
}

// ── conversation ──────────────────────────────────────────────────────────────────────────────────

async function startConversation(device) {
  const key = device.key || (device.keyBytes ? await c.importKey(device.keyBytes) : null);
  if (!key) {
    showScreen("revoked");
    return;
  }
  app.device = { ...device, key };
  app.api = deviceApi(device.deviceToken);
  applyLook(device);
  $("agent-name").textContent = device.agentName;
  $("device-name").textContent = device.user
    ? `You answer as ${device.user.name} · end to end encrypted`
    : `${device.deviceName} · end to end encrypted`;
  if (device.user) $("empty").textContent = `No question yet. What ${device.agentName} asks you will appear here.`;
  document.title = `${device.agentName} — Pacerelle`;
  app.focus = new URLSearchParams(location.search).get("question");
  if (app.focus) history.replaceState(null, "", "/" + location.hash);
  if (location.hash === "#grants") showGrantsScreen();
  else showScreen(location.hash === "#settings" ? "settings" : "conversation");
  if (location.hash === "#settings") renderSettings();
  for (const entry of await store.listOutbox(device.agentId)) {
    if (entry.type === "message") await showPendingTask(entry);
    if (entry.type === "answer") app.pendingAnswers.set(entry.questionId, entry.envelope);
  }
  // The relay holds this device's signing key before any answer is sealed or leaves (a key drawn now is registered
  // now): the outbox and the answer buttons wait for this, the conversation does not.
  app.signingReady = answers
    .ensureSigningKey(app.api, device.agentId)
    .then((stored) => {
      if (stored && app.device && stored.deviceId === app.device.deviceId) app.device = { ...stored, key };
    })
    .catch(() => {});
  flushOutbox();
  app.updates = await relaySendsUpdates();
  statusLoop();
  conversationLoop();
  setInterval(tick, 1000);
  // Notifications on: the relay learns the subscription again (it may have lost it, or its key changed).
  push.refresh(app.api).then((e) => {
    if (e && isRevocation(e)) revoked();
  });
  for (const other of app.pairings) {
    if (other.agentId !== device.agentId) push.refresh(deviceApi(other.deviceToken));
  }
}

/**
 * Whether the relay writes `update` items (task processed, question closed). They came with push, so a relay
 * that serves its push key (or says push is off) has them; one answering `no_route` is older, and states are
 * read again every few seconds instead.
 */
async function relaySendsUpdates() {
  try {
    await relayApi.pushKey();
    return true;
  } catch (e) {
    return !(e instanceof ApiError && (e.kind === "no_route" || e.kind === "network"));
  }
}

function revoked() {
  if (app.stopped) return;
  app.stopped = true;
  // A Partner-mode user knows the product, not the computer behind it.
  if (app.device && app.device.user) {
    const product = app.device.agentName;
    $("revoked-text").textContent =
      `${product} disconnected this device. To answer here again, ask ${product} for a new link and open it here.`;
  }
  // Several agents paired here: this one only; the others are at the top.
  if (app.device && app.pairings.length > 1) {
    document.querySelector("#screen-revoked h1").textContent = `This browser is no longer paired with “${app.device.agentName}”`;
    $("forget-revoked").textContent = `Forget “${app.device.agentName}” here`;
  }
  app.revokedAgentId = app.device ? app.device.agentId : null;
  app.device = null;
  showScreen("revoked");
}

async function conversationLoop() {
  let wait = 0; // catch up at once, then park
  while (!app.stopped) {
    try {
      const page = await app.api.conversation(app.cursor, wait);
      setConnected(true);
      app.reconnect.reset();
      let before = app.cursor;
      for (const item of page.items) {
        await ingest(item, before);
        before = item.cursor;
      }
      app.cursor = page.cursor;
      wait = page.items.length >= PAGE ? 0 : LONG_POLL_WAIT;
      updateEmpty();
    } catch (e) {
      if (isRevocation(e)) return revoked();
      if (e instanceof ApiError && e.kind === "bad_cursor") {
        app.cursor = null;
        continue;
      }
      if (!(e instanceof ApiError) || e.transient) setConnected(false);
      wait = 0;
      await app.reconnect.wait();
    }
  }
}

async function statusLoop() {
  while (!app.stopped) {
    try {
      const status = await app.api.status();
      const changed = app.presence !== status.presence;
      app.presence = status.presence;
      setConnected(true);
      setBanner();
      if (changed && app.pairings.length > 1) renderSwitcher();
      if (!app.updates) {
        // An older relay: no `update` items, so the states of open tasks and questions are read again.
        await refreshTaskStates();
        await refreshQuestions();
      } else if ([...app.questions.values()].some((q) => q.stale || awaitsApprovals(q))) {
        // A refusal whose reading again failed: the answer that counts is read here, not left unknown. And a
        // question that needs several approvals: the relay writes no update when another device approves (it
        // stays open), so its count is read again while it is open.
        await refreshQuestions();
      }
    } catch (e) {
      if (isRevocation(e)) return revoked();
      if (!(e instanceof ApiError) || e.transient) setConnected(false);
    }
    await sleep(STATUS_EVERY_MS);
  }
}

/** Reads the conversation again from just before the oldest task not yet processed, to update states. */
async function refreshTaskStates() {
  const open = app.order.find((t) => {
    const entry = app.entries.get(t.id);
    return entry && (entry.state === "sent" || entry.state === "delivered");
  });
  if (!open) return;
  let cursor = open.before;
  for (let pages = 0; pages < 5; pages++) {
    const page = await app.api.conversation(cursor, 0);
    for (const item of page.items) await ingest(item, null);
    if (page.items.length < PAGE) break;
    cursor = page.cursor;
  }
}

/**
 * Reads the current state of the questions still open here (answered elsewhere, cancelled, expired), and of
 * those closed by a refusal whose answer that counts is not known yet.
 */
async function refreshQuestions() {
  const open = [...app.questions.values()].some((q) => q.meta.state === "pending" || q.stale);
  if (!open) return;
  const list = await app.api.questions("all");
  for (const dq of list.questions || []) {
    const q = app.questions.get(dq.questionId);
    if (q) await updateQuestionMeta(q, dq);
  }
}

function updateEmpty() {
  $("empty").hidden = $("thread").children.length > 0;
}

function nearBottom() {
  const doc = document.scrollingElement || document.documentElement;
  return doc.scrollHeight - doc.scrollTop - doc.clientHeight < 160;
}

function append(node, container = $("thread")) {
  const stick = nearBottom();
  container.append(node);
  updateEmpty();
  if (stick) node.scrollIntoView({ block: "end" });
}

/** Opens one conversation item and shows it, or updates the one already shown. */
async function ingest(item, before) {
  const known = app.entries.get(item.id);
  if (known) {
    if (item.kind === "message") {
      if (before !== null && !known.positioned) {
        const slot = app.order.find((t) => t.id === item.id);
        if (slot) slot.before = before;
        known.positioned = true;
      }
      setTaskState(known, item.state);
    } else if (item.kind === "question" && item.question) {
      await updateQuestionMeta(app.questions.get(item.id), item.question);
    }
    return;
  }
  if (item.kind === "update") {
    applyUpdate(item);
    return;
  }
  const d = app.device;
  try {
    switch (item.kind) {
      case "message": {
        const task = await c.openJson(d.key, c.context.task(d.agentId, d.deviceId, item.id), item.envelope);
        if (typeof task.text !== "string") throw new c.CryptoError("malformed");
        if (app.entries.has(item.id)) return ingest(item, before);
        addTask(item.id, task.text, item.state, item.createdAt, before);
        break;
      }
      case "reply": {
        const reply = await c.openJson(d.key, c.context.reply(d.agentId, d.deviceId, item.id), item.envelope);
        // The relay states the source in clear; the sealed payload must agree.
        if (typeof reply.text !== "string" || reply.sourceMessageId !== item.sourceMessageId) {
          throw new c.CryptoError("open");
        }
        if (app.entries.has(item.id)) return;
        addReply(item.id, reply, item.createdAt);
        break;
      }
      case "question": {
        // The kind is in clear at the relay; the sealed one must agree, and this device must be a recipient.
        const { payload, digest } = await answers.openQuestion(d, item);
        if (app.entries.has(item.id)) return;
        addQuestion(item.id, payload, digest, item.question, item.createdAt);
        break;
      }
      case "notification": {
        const n = await c.openJson(d.key, c.context.notification(d.agentId, d.deviceId, item.id), item.envelope);
        if (typeof n.text !== "string") throw new c.CryptoError("malformed");
        if (app.entries.has(item.id)) return;
        addNotification(item.id, n, item.createdAt);
        break;
      }
      default:
        // A kind this version does not know (a newer relay): skipped, as the wire contract says.
        return;
    }
  } catch (e) {
    if (!(e instanceof c.CryptoError)) throw e;
    if (app.entries.has(item.id)) return;
    const node = el("li", "entry rejected", "An item could not be authenticated and is not shown.");
    node.dataset.id = item.id;
    app.entries.set(item.id, { kind: "rejected", node });
    append(node);
  }
}

/**
 * A state change (an `update` item): a task of this device processed, a question answered elsewhere, expired or
 * cancelled. Unknown subjects (older than what this page read) are skipped; states only move forward.
 */
async function applyUpdate(item) {
  app.updates = true;
  if (item.subjectKind === "message") {
    const task = app.entries.get(item.subjectId);
    if (task && task.kind === "message") setTaskState(task, item.state);
  } else if (item.subjectKind === "question" && item.question) {
    const q = app.questions.get(item.subjectId);
    if (q) await updateQuestionMeta(q, { ...item.question, state: item.question.state || item.state });
  }
}

const TASK_STATES = {
  pending: "Sending…",
  retrying: "Not sent yet — will retry",
  failed: "Not sent",
  sent: "Sent",
  delivered: "Delivered — your agent has it",
  processed: "Done",
};
const STATE_RANK = { pending: 0, retrying: 0, failed: 0, sent: 1, delivered: 2, processed: 3 };

function setTaskState(entry, state) {
  if (!state || !(state in TASK_STATES)) return;
  // States only move forward (a re-read may be older than a newer answer).
  if (entry.state && STATE_RANK[state] < STATE_RANK[entry.state] && STATE_RANK[entry.state] > 0) return;
  entry.state = state;
  entry.node.dataset.state = state;
  entry.stateNode.textContent = TASK_STATES[state];
}

function addTask(id, text, state, createdAt, before) {
  const node = el("li", "entry task");
  node.dataset.id = id;
  const bubble = el("div", "bubble me", text);
  const meta = el("div", "meta");
  const time = el("span", "time", clock(createdAt));
  const stateNode = el("span", "state");
  meta.append(time, stateNode);
  const replies = el("ol", "replies");
  node.append(...foldable(bubble, text), meta, replies);
  const entry = { kind: "message", node, stateNode, replies, state: null, positioned: before !== null };
  app.entries.set(id, entry);
  app.order.push({ id, before });
  setTaskState(entry, state);
  append(node);
  return entry;
}

async function showPendingTask(outboxEntry) {
  const d = app.device;
  if (app.entries.has(outboxEntry.id)) return;
  try {
    const task = await c.openJson(d.key, c.context.task(d.agentId, d.deviceId, outboxEntry.id), outboxEntry.envelope);
    addTask(outboxEntry.id, task.text, "pending", new Date(outboxEntry.queuedAt).toISOString(), null);
  } catch {
    await store.deleteOutbox(outboxEntry.id);
  }
}

function addReply(id, reply, createdAt) {
  const node = el("li", "reply");
  node.dataset.id = id;
  node.append(...foldable(el("div", "bubble agent", reply.text), reply.text), el("div", "meta", clock(createdAt)));
  const task = app.entries.get(reply.sourceMessageId);
  app.entries.set(id, { kind: "reply", node });
  if (task && task.kind === "message") {
    append(node, task.replies);
    // A reply means the agent has the task, at least.
    if (STATE_RANK[task.state] < STATE_RANK.delivered) setTaskState(task, "delivered");
  } else {
    const wrapper = el("li", "entry orphan");
    wrapper.append(el("div", "meta", "Reply to a task sent from another device"));
    const list = el("ol", "replies");
    list.append(node);
    wrapper.append(list);
    append(wrapper);
  }
}

const LEVELS = { info: "Info", warning: "Warning", error: "Error", success: "Done" };

function addNotification(id, n, createdAt) {
  const level = LEVELS[n.level] ? n.level : "info";
  const node = el("li", `entry notification level-${level}`);
  node.dataset.id = id;
  const head = el("div", "note-head");
  head.append(el("span", "tag", LEVELS[level]));
  if (n.title) head.append(el("strong", "note-title", n.title));
  node.append(head, ...foldable(el("p", "note-text", n.text), n.text), el("div", "meta", clock(createdAt)));
  app.entries.set(id, { kind: "notification", node });
  append(node);
}

// ── questions ─────────────────────────────────────────────────────────────────────────────────────

/** Whether a question is open and needs several approvals: its count is read again until it closes. */
const awaitsApprovals = (q) => questionState(q) === "pending" && approvals.approvalsOf(q.payload) > 1;

/** Where a question stands here: a pending question past the expiry the agent sealed is expired. */
function questionState(q) {
  if (q.meta.state === "pending" && Date.now() >= Date.parse(q.payload.expiresAt)) return "expired";
  return q.meta.state;
}

function addQuestion(id, payload, digest, meta, createdAt) {
  const node = el("li", "entry question");
  node.dataset.id = id;
  const q = {
    id,
    payload,
    digest,
    meta: questionMeta(meta),
    node,
    createdAt,
    sending: null, // the answer being sent from here
    answer: null, // the answer given from here
    counted: null, // the answer that counts, read from its copy
    notRecorded: null, // an answer from here that the relay refused: the question was already closed
    stale: false, // closed by a refusal: read again for the answer that counts
    error: null,
  };
  app.questions.set(id, q);
  app.entries.set(id, { kind: "question", node });
  renderQuestion(q);
  append(node);
  if (q.meta.answerCopy) {
    openAnswerCopy(q).then((counted) => {
      q.counted = counted;
      renderQuestion(q);
    });
  }
  // An answer given here before a reload: still being sent, or acknowledged (shown as given).
  const queued = app.pendingAnswers.get(id);
  const given = queued ? Promise.resolve(queued) : store.loadAnswer(id);
  given.then(async (sealed) => {
    if (!sealed || q.answer) return;
    const opened = await answers.openAnswerPayload(app.device, id, sealed);
    const mine = opened && opened.answer;
    if (!mine) return;
    if (queued && q.meta.state === "pending") q.sending = mine;
    else q.answer = mine;
    q.myGrant = opened.grant || null;
    renderQuestion(q);
  });
  if (app.focus === id) focusQuestion(id);
}

/** The metadata the relay states in clear about a question. */
function questionMeta(meta) {
  return {
    kind: meta.kind,
    state: meta.state,
    expiresAt: meta.expiresAt,
    answeredBy: meta.answeredBy,
    answeredAt: meta.answeredAt,
    answeredByName: meta.answeredByName,
    answerCopy: meta.answerCopy,
    channel: meta.channel,
    // Several approvals: how many the relay keeps the question open for, and the devices that answered so far.
    approvals: meta.approvals,
    answers: approvals.answersOf(meta),
  };
}

async function updateQuestionMeta(q, meta) {
  if (!q) return;
  const next = questionMeta(meta);
  // Terminal states are final.
  if (q.meta.state !== "pending" && next.state === "pending") return;
  q.stale = false;
  const changed =
    next.state !== q.meta.state ||
    next.answeredBy !== q.meta.answeredBy ||
    next.answeredByName !== q.meta.answeredByName ||
    next.answerCopy !== q.meta.answerCopy ||
    next.channel !== q.meta.channel ||
    next.answers.join(",") !== q.meta.answers.join(",");
  q.meta = next;
  if (!changed) return;
  q.counted = await openAnswerCopy(q);
  renderQuestion(q);
  if (q.toldWithoutCounted && q.counted) {
    // The refusal was told before the answer that counts could be read: tell it again, with that answer.
    q.toldWithoutCounted = false;
    toast(closedMessage(q, q.notRecorded));
  }
}

/** The question's answer key (a CryptoKey), or null when it carries none. */
async function answerKeyOf(q) {
  if (q.answerKey === undefined) q.answerKey = await answers.answerKey(q.payload);
  return q.answerKey;
}

const sameAnswer = (a, b) => JSON.stringify(a) === JSON.stringify(b);

/** The answer that counts, from its copy (answer.js), or null; the grant given with it is kept as `q.countedGrant`. */
async function openAnswerCopy(q) {
  await answerKeyOf(q);
  const copy = await answers.openCopy(app.device, q, q.meta);
  q.countedGrant = copy ? copy.grant : null;
  return copy ? copy.answer : null;
}

/** Reads one question again from the relay (its state, who answered, the copy of the answer that counts). */
async function rereadQuestion(q) {
  try {
    const list = await app.api.questions("all");
    const dq = (list.questions || []).find((x) => x.questionId === q.id);
    if (dq) await updateQuestionMeta(q, dq);
  } catch (e) {
    if (isRevocation(e)) revoked();
    // Read again by the status loop.
  }
}

const describeAnswer = answers.describeAnswer;

function renderQuestion(q) {
  const { node, payload } = q;
  const state = questionState(q);
  node.dataset.state = state;
  node.dataset.kind = payload.kind;
  node.replaceChildren();
  const head = el("div", "q-head");
  head.append(el("span", "tag", payload.kind === "yes_no" ? "Approval" : "Question"));
  const left = el("span", "time-left");
  head.append(left);
  node.append(head, el("p", "q-text", payload.question));
  if (typeof payload.details === "string" && payload.details) node.append(...detailsNodes(payload.details));
  q.leftNode = left;

  // Several approvals: how many so far, for everyone asked; a device that approved has nothing left to answer.
  const tally = state === "pending" ? approvals.tally(payload, q.meta, app.device.deviceId) : null;
  if (tally) node.append(tallyLine(tally));
  const waiting = Boolean(tally && tally.mine && !q.sending);
  const answerable = state === "pending" && !q.sending && !waiting;
  const status = el("p", "q-status");
  let grantedNode = null; // what a yes granted, under its status
  if (state === "answered") {
    // At the computer: the person answered through the agent, never on this device.
    const host = answers.answeredAtComputer(q.meta);
    const mine = !host && q.meta.answeredBy === app.device.deviceId;
    // The answer that counts: from its copy; else, when this device gave it, as kept here.
    const shown = q.counted || (mine ? q.answer : null);
    const granted = q.counted ? q.countedGrant : mine ? q.myGrant : null;
    const who = mine ? "this device" : q.meta.answeredByName || "another device";
    const at = q.meta.answeredAt ? ` at ${clock(q.meta.answeredAt)}` : "";
    if (host) {
      status.textContent = shown
        ? `Answered at the computer: ${answers.answerText(shown)}${q.meta.answeredAt ? ` (${clock(q.meta.answeredAt)})` : ""}`
        : `Answered at the computer${at}`;
    } else {
      status.textContent = shown
        ? `${describeAnswer(shown, payload)} — by ${who}${at}`
        : mine
          ? `Answered — by this device${at}`
          : `Answered on ${who}${at}`;
    }
    status.className = shown && shown.type === "no" ? "q-status denied" : "q-status answered";
    status.dataset.answer = shown ? shown.type : "";
    status.dataset.channel = host ? "host" : "phone";
    grantedNode = shown && shown.type === "yes" && granted ? grantUi.grantedLine(granted) : null;
  } else if (state === "expired") {
    status.textContent = "Expired — no answer was given in time";
    status.className = "q-status expired";
  } else if (state === "cancelled") {
    status.textContent = "Cancelled by the agent";
    status.className = "q-status cancelled";
  } else if (q.sending) {
    status.textContent = `${describeSending(q.sending, q.sendingChoice, payload)} — sending…`;
  } else if (q.error) {
    status.textContent = q.error;
    status.className = "q-status error";
  }

  if (answerable) {
    node.append(questionControls(q));
  }
  if (waiting) node.append(waitingStatus(tally));
  else if (status.textContent) node.append(status);
  if (grantedNode) node.append(grantedNode);
  if (q.notRecorded && state !== "pending") {
    node.append(el("p", "q-status not-recorded", `Your answer (${describeAnswer(q.notRecorded, payload)}) was not recorded.`));
  }
  node.append(el("div", "meta", `Asked ${clock(q.createdAt)}`));
  updateLeft(q);
}

function updateLeft(q) {
  const state = questionState(q);
  if (!q.leftNode) return;
  if (state === "pending") {
    const ms = Date.parse(q.payload.expiresAt) - Date.now();
    q.leftNode.textContent = timeLeft(ms);
    q.leftNode.classList.toggle("soon", ms < 60000);
  } else {
    q.leftNode.textContent = "";
  }
}

/** What is being sent: "Approved", or for a yes that grants, "Allowed for 15 min". */
function describeSending(answer, choice, payload) {
  return choice ? `Allowed for ${durationLabel(choice.seconds)}` : describeAnswer(answer, payload);
}

/**
 * A question's controls; `onAnswer(q, answer, choice?)` answers it, for the pairing `device` (whether it can grant).
 * A yes/no question that offers grants gets Allow / Deny / Allow for … (grant-ui.js).
 */
function questionControls(q, onAnswer = answerQuestion, device = app.device) {
  const answerQuestion = onAnswer;
  const { payload } = q;
  const box = el("div", "q-controls");
  const { offer, problem } = payload.kind === "yes_no" ? grantUi.offerOf(q) : { offer: null };
  if (offer) {
    // A key kept here that the relay lists (or will list at the next start): a grant can be signed.
    const canGrant = Boolean(device && device.signing && !device.signing.conflict);
    return grantUi.grantControls(q, offer, { onAnswer, canGrant });
  }
  if (problem) box.append(el("p", "grant-note", problem));
  if (payload.kind === "yes_no") {
    const approve = el("button", "big approve", "Approve");
    const deny = el("button", "big deny", "Deny");
    approve.type = deny.type = "button";
    approve.addEventListener("click", () => answerQuestion(q, { type: "yes" }));
    deny.addEventListener("click", () => answerQuestion(q, { type: "no" }));
    box.classList.add("two");
    box.append(approve, deny);
  } else if (payload.kind === "choice") {
    const options = Array.isArray(payload.options) ? payload.options.filter((o) => typeof o === "string") : [];
    if (payload.multiple) {
      const form = el("form", "choices");
      for (const option of options) {
        const label = el("label", "choice");
        const box2 = el("input");
        box2.type = "checkbox";
        box2.value = option;
        label.append(box2, el("span", null, option));
        form.append(label);
      }
      const submit = el("button", "big primary", "Send choice");
      submit.type = "submit";
      form.append(submit);
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        const chosen = [...form.querySelectorAll("input:checked")].map((i) => i.value);
        if (chosen.length === 0) return toast("Choose at least one option.");
        answerQuestion(q, { type: "options", value: chosen });
      });
      box.append(form);
    } else {
      box.classList.add("options");
      for (const option of options) {
        const b = el("button", "big option", option);
        b.type = "button";
        b.addEventListener("click", () => answerQuestion(q, { type: "options", value: [option] }));
        box.append(b);
      }
    }
  } else {
    const form = el("form", "text-answer");
    const input = el("textarea");
    input.rows = 2;
    input.placeholder = "Your answer…";
    input.setAttribute("aria-label", "Your answer");
    const submit = el("button", "big primary", "Send answer");
    submit.type = "submit";
    form.append(input, submit);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const text = input.value;
      if (!text.trim()) return toast("Write an answer first.");
      if (c.encodeUtf8(text).length > MAX_TEXT_BYTES) return toast("The answer is too long (64 KiB at most).");
      answerQuestion(q, { type: "text", value: text });
    });
    box.append(form);
  }
  return box;
}

async function answerQuestion(q, answer, choice = null) {
  if (questionState(q) !== "pending" || q.sending) {
    renderQuestion(q);
    return;
  }
  q.sending = answer;
  q.sendingChoice = choice;
  q.error = null;
  renderQuestion(q);
  // Sealed, signed and queued as a notification's Approve / Deny does (answer.js), then sent by the outbox.
  await app.signingReady;
  await answerKeyOf(q);
  try {
    await answers.queueAnswer(app.device, q, answer, choice);
  } catch (e) {
    if (!(e instanceof GrantError)) throw e;
    // Nothing was queued: the question is still open, and says why.
    q.sending = null;
    q.sendingChoice = null;
    q.error = e.message;
    renderQuestion(q);
    return;
  }
  flushOutbox();
}

function tick() {
  for (const q of app.questions.values()) {
    if (q.meta.state !== "pending") continue;
    const wasRendered = q.node.dataset.state;
    if (questionState(q) !== wasRendered) renderQuestion(q);
    else updateLeft(q);
  }
}

// ── sending, with retries that are safe ───────────────────────────────────────────────────────────

let flushing = false;
let flushAgain = false;

/** Sends what the outbox holds, oldest first. Ids were chosen when queued: a retry is stored once. */
async function flushOutbox() {
  if (!app.api || app.stopped) return;
  if (flushing) {
    flushAgain = true;
    return;
  }
  flushing = true;
  clearTimeout(app.retryTimer);
  try {
    await app.signingReady;
    if (!app.device) return;
    for (const entry of await store.listOutbox(app.device.agentId)) {
      try {
        await sendEntry(entry);
        app.retry.reset();
      } catch (e) {
        if (isRevocation(e)) return revoked();
        if (!(e instanceof ApiError) || e.transient) {
          if (e instanceof ApiError && e.kind === "network") setConnected(false);
          markRetrying(entry);
          app.retryTimer = setTimeout(flushOutbox, app.retry.delay());
          return;
        }
        await refused(entry, e);
      }
    }
  } finally {
    flushing = false;
    if (flushAgain) {
      flushAgain = false;
      flushOutbox();
    }
  }
}

async function sendEntry(entry) {
  if (entry.type === "message") {
    await app.api.send(entry.id, entry.envelope);
    await store.deleteOutbox(entry.id);
    const task = app.entries.get(entry.id);
    if (task && STATE_RANK[task.state] < STATE_RANK.sent) setTaskState(task, "sent");
  } else if (entry.type === "answer") {
    const dq = await answers.sendAnswer(app.api, entry);
    app.pendingAnswers.delete(entry.questionId);
    const q = app.questions.get(entry.questionId);
    if (!q) {
      await store.saveAnswer(entry.questionId, entry.envelope);
      return;
    }
    const opened = await answers.openAnswerPayload(app.device, q.id, entry.envelope);
    const sent = (opened && opened.answer) || q.sending;
    if (opened && opened.grant) q.myGrant = opened.grant;
    q.sending = null;
    q.sendingChoice = null;
    await updateQuestionMeta(q, dq);
    // A retry from this device gets the answer stored first: when it is another one, this one did not count.
    if (q.counted && sent && !sameAnswer(q.counted, sent)) {
      q.notRecorded = sent;
      toast(closedMessage(q, sent));
    } else {
      q.answer = sent || q.answer;
      await store.saveAnswer(entry.questionId, entry.envelope);
    }
    renderQuestion(q);
  } else {
    await store.deleteOutbox(entry.id);
  }
}

function markRetrying(entry) {
  if (entry.type === "message") {
    const task = app.entries.get(entry.id);
    if (task && task.state === "pending") setTaskState(task, "retrying");
  }
}

/** What the person is told when an answer from here came too late: the state, and the answer that counts. */
function closedMessage(q, refused) {
  const yours = refused ? ` Your answer (${describeAnswer(refused, q.payload)}) was not recorded.` : "";
  switch (questionState(q)) {
    case "expired":
      return `Too late: the question expired.${yours}`;
    case "cancelled":
      return `The agent cancelled the question.${yours}`;
    default: {
      if (answers.answeredAtComputer(q.meta)) {
        const what = q.counted ? `: ${answers.answerText(q.counted)}` : "";
        return `Already answered at the computer${what}.${yours}`;
      }
      const mine = q.meta.answeredBy === app.device.deviceId;
      const who = mine ? "this device" : q.meta.answeredByName || "another device";
      const counted = q.counted || (mine ? q.answer : null);
      const what = counted ? `: ${describeAnswer(counted, q.payload)}` : "";
      return `Already answered by ${who}${what}.${yours}`;
    }
  }
}

/** The relay refused an entry for good: it leaves the outbox, and the person is told. */
async function refused(entry, e) {
  await store.deleteOutbox(entry.id);
  if (entry.type === "message") {
    const task = app.entries.get(entry.id);
    if (task) setTaskState(task, "failed");
    toast(`The task was not sent: ${e.message}`);
  } else if (entry.type === "answer") {
    const q = app.questions.get(entry.questionId);
    if (!q) return;
    const sent = (await answers.openAnswer(app.device, q.id, entry.envelope)) || q.sending;
    q.sending = null;
    q.sendingChoice = null;
    const state = e.closedState;
    if (state) {
      // Closed before this answer: say so, with the answer that counts (read again), never this one.
      q.notRecorded = sent;
      if (q.meta.state === "pending") {
        q.meta = { ...q.meta, state };
        q.stale = true;
      }
      renderQuestion(q);
      await rereadQuestion(q);
      toast(closedMessage(q, sent));
      q.toldWithoutCounted = state === "answered" && !q.counted;
    } else {
      q.error = `The answer was refused: ${e.message}`;
    }
    renderQuestion(q);
  }
}

async function sendTask(text) {
  const d = app.device;
  const id = c.generateId("msg");
  const envelope = await c.sealJson(d.key, c.context.task(d.agentId, d.deviceId, id), { text });
  const entry = { id, type: "message", agentId: d.agentId, envelope, queuedAt: Date.now() };
  await store.putOutbox(entry);
  addTask(id, text, "pending", new Date(entry.queuedAt).toISOString(), null);
  $("thread").lastElementChild.scrollIntoView({ block: "end" });
  flushOutbox();
}

// ── wiring ────────────────────────────────────────────────────────────────────────────────────────

/**
 * The composer is fixed over the bottom of the page and grows with its text: the page keeps room for it
 * (--composer-h: the conversation's bottom padding, and the scroll padding that `scrollIntoView` keeps
 * clear), so no card ever ends under it.
 */
function keepRoomForComposer() {
  const composer = $("composer");
  let height = -1;
  const update = () => {
    const h = composer.hidden ? 0 : composer.offsetHeight;
    if (h === height) return;
    const stick = nearBottom();
    height = h;
    document.documentElement.style.setProperty("--composer-h", `${h}px`);
    if (stick) window.scrollTo(0, document.documentElement.scrollHeight);
  };
  new ResizeObserver(update).observe(composer);
  update();
}

function wire() {
  keepRoomForComposer();
  const input = $("task-text");
  const grow = () => {
    input.style.height = "auto";
    input.style.height = `${Math.min(input.scrollHeight, 160)}px`;
  };
  // Never cut: a text over the limit stays whole in the box, is refused with the limit shown, and nothing is sent.
  const tooLong = () => {
    const bytes = c.encodeUtf8(input.value).length;
    const note = $("too-long");
    const over = bytes > MAX_TEXT_BYTES;
    note.hidden = !over;
    $("composer").classList.toggle("over", over);
    if (over) {
      note.textContent = `Too long to send: ${kib(bytes)} of UTF-8, the limit is ${kib(MAX_TEXT_BYTES)} (${MAX_TEXT_BYTES.toLocaleString("en")} bytes). Shorten it: nothing was sent.`;
    }
    return over;
  };
  input.addEventListener("input", () => {
    grow();
    tooLong();
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("composer").addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = input.value;
    if (!text.trim() || !app.device) return;
    if (tooLong()) {
      toast(`This task is too long: ${kib(MAX_TEXT_BYTES)} of UTF-8 at most. Nothing was sent.`);
      return;
    }
    input.value = "";
    grow();
    tooLong();
    try {
      await sendTask(text);
    } catch (e) {
      input.value = text;
      toast(`Could not send: ${e.message}`);
    }
    input.focus();
  });
  wireSettings();
  $("forget-revoked").addEventListener("click", async () => {
    // The relay already dropped a revoked device's subscriptions; the browser keeps its own for the other agents.
    const others = app.pairings.filter((d) => d.agentId !== app.revokedAgentId);
    if (others.length === 0) await push.disable(null).catch(() => {});
    await store.forgetDevice(app.revokedAgentId || undefined);
    location.replace("/");
  });
  wireAgents();
  window.addEventListener("online", reconnectNow);
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible" && app.connected === false) reconnectNow();
  });
  // A tap on a notification while the app is open: the worker names the question to show.
  if ("serviceWorker" in navigator) {
    navigator.serviceWorker.addEventListener("message", (event) => {
      const data = event.data || {};
      if (data.type !== "open") return;
      if (data.agentId && (!app.device || data.agentId !== app.device.agentId) && app.pairings.some((d) => d.agentId === data.agentId)) {
        // Another agent's question: its conversation opens on it.
        const q = new URLSearchParams({ agent: data.agentId });
        if (data.questionId) q.set("question", data.questionId);
        location.assign(`/?${q}`);
        return;
      }
      if (!app.device) return;
      // An answer the worker could not send is in the outbox: sent (or its refusal explained) from here.
      flushOutbox();
      if (document.body.dataset.screen === "settings") $("settings-back").click();
      else if (document.body.dataset.screen !== "conversation") {
        if (onSettings()) history.replaceState(null, "", "/");
        showScreen("conversation");
      }
      if (data.questionId) {
        app.focus = data.questionId;
        focusQuestion(data.questionId);
      }
    });
  }
}

/** Scrolls to a question (opened from its notification) and marks it for a moment. */
function focusQuestion(id) {
  const q = app.questions.get(id);
  if (!q) return; // shown once the conversation brings it (addQuestion)
  app.focus = null;
  q.node.scrollIntoView({ block: "center" });
  q.node.classList.add("focused");
  setTimeout(() => q.node.classList.remove("focused"), 2500);
}

// ── several agents: the switcher, the questions waiting across all of them, the overview ──────────────

const PRESENCE_WORDS = {
  listening: "Listening",
  busy: "Busy",
  waiting_confirmation: "Busy — probably waiting for a confirmation",
  connected: "Connected, not listening",
  offline: "Offline",
};
/** The dot's colour class: listening, busy or offline (and unknown until read). */
const presenceDot = (presence) =>
  presence === "listening" ? "ok" : presence === "busy" || presence === "waiting_confirmation" ? "busy" : presence ? "idle" : "unknown";

/** The strip of agents (with their presence) and the two views across them: shown when several are paired here. */
function renderSwitcher() {
  const nav = $("agents");
  const screen = document.body.dataset.screen;
  const show = app.pairings.length > 1 && !["loading", "insecure", "unpaired", "pair"].includes(screen);
  nav.hidden = !show;
  document.body.classList.toggle("multi", show);
  if (!show) return;
  const current = app.device ? app.device.agentId : app.revokedAgentId;
  const tabs = $("agent-tabs");
  tabs.replaceChildren();
  for (const d of app.pairings) {
    const b = el("button", "agent-tab");
    b.type = "button";
    b.dataset.agentId = d.agentId;
    const presence = d.agentId === current && app.device ? app.presence : app.presences.get(d.agentId);
    const dot = el("span", `dot ${presenceDot(presence)}`);
    dot.dataset.presence = presence || "";
    dot.setAttribute("aria-hidden", "true");
    b.append(dot, el("span", "agent-tab-name", d.agentName));
    b.title = `${d.agentName}: ${PRESENCE_WORDS[presence] || "presence unknown"}`;
    if (d.agentId === current && screen !== "pending" && screen !== "overview") b.setAttribute("aria-current", "page");
    b.addEventListener("click", () => openAgent(d.agentId));
    tabs.append(b);
  }
  $("open-pending").toggleAttribute("aria-current", screen === "pending");
  $("open-overview").toggleAttribute("aria-current", screen === "overview");
}

/** Shows `agentId`'s conversation: the current one at once, another after a fresh start on it. */
function openAgent(agentId) {
  if (app.device && agentId === app.device.agentId && !app.stopped) {
    if (onSettings()) history.replaceState(null, "", "/");
    showScreen("conversation");
    return;
  }
  location.assign(`/?agent=${encodeURIComponent(agentId)}`);
}

function wireAgents() {
  $("open-pending").addEventListener("click", async () => {
    showPending(null);
    showPending(await loadPending());
  });
  $("open-overview").addEventListener("click", showOverview);
}

/**
 * The presence of every other agent, for the switcher's dots (the current one's comes from its status loop), and
 * the questions waiting across all of them: the count, and the pending view when it is open (new ones are added).
 */
async function presenceLoop() {
  for (let round = 0; ; round++) {
    if (round > 0) await refreshPending();
    for (const d of app.pairings) {
      if (app.device && d.agentId === app.device.agentId) continue;
      try {
        app.presences.set(d.agentId, (await deviceApi(d.deviceToken).status()).presence);
      } catch {
        app.presences.set(d.agentId, null);
      }
    }
    renderSwitcher();
    await sleep(STATUS_EVERY_MS * 3);
  }
}

/** Reads the questions waiting again; the pending view, when shown, gets those it does not show yet. */
async function refreshPending() {
  const waiting = await loadPending().catch(() => null);
  if (!waiting || document.body.dataset.screen !== "pending") return;
  const list = $("pending-list");
  const shown = new Set([...list.children].map((n) => n.dataset.id));
  await rereadShownPending(waiting);
  const added = waiting.filter((p) => !shown.has(p.id));
  for (const p of added) {
    p.node = el("li", "entry question pending-question");
    p.node.dataset.id = p.id;
    p.node.dataset.agentId = p.agent.agentId;
    renderPendingQuestion(p);
    list.append(p.node);
    app.pendingShown.set(p.id, p);
  }
  if (added.length > 0) $("pending-status").textContent = "";
}

/**
 * The questions the pending view shows, read again: a question that needs several approvals gets its count as it
 * stands, and once it is no longer pending (enough devices approved, one denied, it expired) it reads as closed, with
 * the usual words, from the question as its agent's device reads it now.
 */
async function rereadShownPending(waiting) {
  const now = new Map(waiting.map((p) => [p.id, p]));
  for (const p of app.pendingShown.values()) {
    if (p.sending || p.done || p.closed || approvals.approvalsOf(p.payload) < 2) continue;
    const fresh = now.get(p.id);
    if (fresh && fresh.agent.agentId === p.agent.agentId) {
      if (fresh.meta.answers.join(",") === p.meta.answers.join(",")) continue;
      p.meta = fresh.meta;
    } else {
      const dq = await readQuestion(p).catch(() => null);
      if (!dq || dq.state === "pending") continue;
      await settlePending(p, dq);
    }
    renderPendingQuestion(p);
  }
}

/** A question of the pending view as its agent's device reads it now (`DeviceQuestion`), or null. */
async function readQuestion(p) {
  const list = await deviceApi(p.agent.deviceToken).questions("all");
  return (list.questions || []).find((dq) => dq.questionId === p.id) || null;
}

/** A question of the pending view closed: the answer that counts and who gave it, or how it ended (approvals-ui.js). */
async function settlePending(p, dq) {
  p.meta = questionMeta(dq);
  Object.assign(p, await closedOutcome(p.agent, p, dq));
}

/** A pairing with its device key, or null when it has none. */
async function withKey(d) {
  const key = await answers.deviceKey(d);
  return key ? { ...d, key } : null;
}

/**
 * The questions waiting across all agents paired here, each opened with its agent's device key: `[{agent, id,
 * payload, digest, meta, createdAt}]`, oldest first. An agent that cannot be read is listed in `app.pendingErrors`.
 */
async function loadPending() {
  const all = [];
  app.pendingErrors = [];
  for (const stored of app.pairings) {
    const d = await withKey(stored);
    if (!d) continue;
    let list;
    try {
      list = (await deviceApi(d.deviceToken).questions("pending")).questions || [];
    } catch (e) {
      app.pendingErrors.push(`${d.agentName}: ${isRevocation(e) ? "this device is no longer paired" : "cannot be reached"}`);
      continue;
    }
    for (const dq of list) {
      const item = { id: dq.questionId, envelope: dq.envelope, question: dq };
      try {
        const { payload, digest } = await answers.openQuestion(d, item);
        if (Date.parse(payload.expiresAt) <= Date.now()) continue;
        all.push({ agent: d, id: dq.questionId, payload, digest, meta: questionMeta(dq), createdAt: dq.createdAt });
      } catch {
        /* not authenticated: shown (as rejected) in its agent's conversation only */
      }
    }
  }
  all.sort((a, b) => String(a.createdAt).localeCompare(String(b.createdAt)));
  // The count is of the questions waiting for this browser: not those it approved, which wait for other devices.
  const forMe = all.filter((p) => !waitsForOthers(p)).length;
  const count = $("pending-count");
  count.textContent = String(forMe);
  count.hidden = forMe === 0;
  return all;
}

/** Where the approvals of a question of the pending view stand for its agent's device (approvals.js), or null. */
const pendingTally = (p) => approvals.tally(p.payload, p.meta, p.agent.deviceId);

/** Whether this browser approved a question of the pending view that waits for other devices' approvals. */
function waitsForOthers(p) {
  const t = !p.done && !p.closed ? pendingTally(p) : null;
  return Boolean(t && t.mine);
}

/** The view of the questions waiting across all agents, each labelled with its agent and answerable in place. */
function showPending(waiting) {
  if (onSettings()) history.replaceState(null, "", "/");
  showScreen("pending");
  const list = $("pending-list");
  const status = $("pending-status");
  if (waiting === null) {
    status.textContent = "Reading the questions of every agent…";
    return;
  }
  list.replaceChildren();
  app.pendingShown = new Map();
  const errors = app.pendingErrors || [];
  status.textContent =
    (waiting.length === 0 ? "No question is waiting, from any agent." : "") + (errors.length ? ` ${errors.join(". ")}.` : "");
  for (const p of waiting) {
    p.node = el("li", "entry question pending-question");
    p.node.dataset.id = p.id;
    p.node.dataset.agentId = p.agent.agentId;
    renderPendingQuestion(p);
    list.append(p.node);
    app.pendingShown.set(p.id, p);
  }
}

function renderPendingQuestion(p) {
  const { node, payload } = p;
  node.replaceChildren();
  node.dataset.state = p.done || p.closedAnswer ? "answered" : p.closed ? "closed" : "pending";
  const head = el("div", "q-head");
  head.append(el("span", "tag pending-agent", p.agent.agentName), el("span", "tag", payload.kind === "yes_no" ? "Approval" : "Question"));
  const left = el("span", "time-left", timeLeft(Date.parse(payload.expiresAt) - Date.now()));
  head.append(left);
  node.append(head, el("p", "q-text", payload.question));
  if (typeof payload.details === "string" && payload.details) node.append(...detailsNodes(payload.details));
  // Several approvals: the count so far; once this browser approved, no buttons, and what it waits for.
  const tally = !p.done && !p.closed ? pendingTally(p) : null;
  if (tally) node.append(tallyLine(tally));
  const waiting = Boolean(tally && tally.mine && !p.sending);
  if (!p.done && !p.closed && !p.sending && !waiting) node.append(questionControls(p, answerPending, p.agent));
  const status = el("p", "q-status");
  if (p.done) {
    status.textContent = `${describeAnswer(p.done, payload)} — by this device`;
    status.className = p.done.type === "no" ? "q-status denied" : "q-status answered";
    status.dataset.answer = p.done.type;
  } else if (p.closed) {
    status.textContent = p.closed;
    status.className = p.closedAnswer === "no" ? "q-status denied" : p.closedAnswer ? "q-status answered" : "q-status cancelled";
    if (p.closedAnswer) status.dataset.answer = p.closedAnswer;
  } else if (waiting) {
    node.append(waitingStatus(tally));
  } else if (p.sending) {
    status.textContent = `${describeSending(p.sending, p.sendingChoice, payload)} — sending…`;
  } else if (p.error) {
    status.textContent = p.error;
    status.className = "q-status error";
  }
  if (status.textContent) node.append(status);
  const granted = p.done && p.done.type === "yes" && p.doneGrant ? grantUi.grantedLine(p.doneGrant) : null;
  if (granted) node.append(granted);
  const open = el("button", "link open-agent", `Open ${p.agent.agentName}`);
  open.type = "button";
  open.addEventListener("click", () => openAgent(p.agent.agentId));
  node.append(el("div", "meta", `Asked ${clock(p.createdAt)}`), open);
}

/** Answers a question of the pending view through its own agent's device: sealed, signed, queued and sent. */
async function answerPending(p, answer, choice = null) {
  if (p.sending || p.done) return;
  p.sending = answer;
  p.sendingChoice = choice;
  p.error = null;
  renderPendingQuestion(p);
  // The pairing as stored now (its signing key may have been registered since the view was read).
  const device = (await withKey((await store.loadDevice(p.agent.agentId)) || p.agent)) || p.agent;
  const api = deviceApi(device.deviceToken);
  try {
    const entry = await answers.queueAnswer(device, p, answer, choice);
    const dq = await answers.sendAnswer(api, entry);
    await store.saveAnswer(p.id, entry.envelope);
    if (approvals.keptOpen(p.payload, dq, device.deviceId)) {
      // Recorded: the question stays open until enough other devices approve (its card says how many).
      p.meta = questionMeta(dq);
    } else {
      const copy = await answers.openCopy(device, p, dq);
      const mine = copy ? null : await answers.openAnswerPayload(device, p.id, entry.envelope);
      p.done = (copy && copy.answer) || answer;
      p.doneGrant = (copy || mine || {}).grant || null;
    }
    const count = $("pending-count");
    const left = Math.max(0, Number(count.textContent || 0) - 1);
    count.textContent = String(left);
    count.hidden = left === 0;
  } catch (e) {
    if (e instanceof GrantError) {
      // Nothing was queued: still open, and says why.
      p.error = e.message;
    } else if (e instanceof ApiError && e.closedState) {
      await store.deleteOutbox(answers.outboxId(p.id)).catch(() => {});
      p.closed = { expired: "Too late: the question expired", cancelled: "Cancelled by the agent", answered: "Already answered elsewhere" }[e.closedState];
    } else if (e instanceof ApiError && !e.transient) {
      await store.deleteOutbox(answers.outboxId(p.id)).catch(() => {});
      p.error = isRevocation(e) ? `${p.agent.agentName} no longer has this device: the answer was not sent.` : `The answer was refused: ${e.message}`;
    } else {
      // Kept in the outbox: sent when that agent's conversation is next open.
      p.error = `Not sent yet (${e.message}): it is sent when ${p.agent.agentName}'s conversation is open.`;
    }
  }
  p.sending = null;
  p.sendingChoice = null;
  renderPendingQuestion(p);
  if (app.device && p.agent.agentId === app.device.agentId) flushOutbox();
}

/** The overview: every agent paired here, with its presence, its session's host and since when, its last activity. */
async function showOverview() {
  if (onSettings()) history.replaceState(null, "", "/");
  showScreen("overview");
  const list = $("overview-list");
  list.replaceChildren();
  const rows = app.pairings.map((d) => {
    const row = el("li", "overview-agent");
    row.dataset.agentId = d.agentId;
    row.dataset.presence = "";
    const name = el("button", "overview-name", d.agentName);
    name.type = "button";
    name.addEventListener("click", () => openAgent(d.agentId));
    const presence = el("span", "overview-presence", "…");
    const dot = el("span", "dot unknown");
    dot.setAttribute("aria-hidden", "true");
    const head = el("div", "overview-head");
    head.append(dot, name, presence);
    const facts = el("dl", "facts small");
    row.append(head, facts);
    list.append(row);
    return { d, row, dot, presence, facts };
  });
  await Promise.all(
    rows.map(async ({ d, row, dot, presence, facts }) => {
      try {
        const st = await deviceApi(d.deviceToken).status();
        app.presences.set(d.agentId, st.presence);
        row.dataset.presence = st.presence;
        dot.className = `dot ${presenceDot(st.presence)}`;
        presence.textContent = PRESENCE_WORDS[st.presence] || st.presence;
        const add = (term, value) => {
          if (!value) return;
          facts.append(el("dt", null, term), el("dd", null, value));
        };
        add("Session", st.session ? `${st.session.host}, since ${dateTime(st.session.since)}` : "No session");
        const times = [st.lastWaitAt, st.lastCheckpointAt, st.session && st.session.lastHeartbeatAt]
          .filter(Boolean)
          .sort();
        add("Last activity", times.length ? dateTime(times[times.length - 1]) : "None yet");
        if (st.messages) add("Tasks", `${st.messages.waiting} waiting, ${st.messages.inProgress} in progress`);
      } catch (e) {
        row.dataset.presence = "unknown";
        presence.textContent = isRevocation(e) ? "This device is no longer paired" : "Cannot be reached";
      }
    }),
  );
  renderSwitcher();
}

// ── settings ──────────────────────────────────────────────────────────────────────────────────────

/** Whether the address names the settings or the grants screen under them. */
const onSettings = () => location.hash === "#settings" || location.hash === "#grants";

/** The grants screen (grant-ui.js): this agent's grants, with what each allows, its uses, and Revoke for an owner. */
function showGrantsScreen() {
  showScreen("grants");
  window.scrollTo(0, 0);
  if (!app.device) return;
  grantUi.showGrants({ list: $("grants-list"), status: $("grants-status") }, app.device, app.api, (e) => {
    if (!isRevocation(e)) return false;
    revoked();
    return true;
  });
}

const dateTime = (iso) => {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? "" : d.toLocaleString([], { dateStyle: "long", timeStyle: "short" });
};

/** Fills the settings screen: local facts at once, then what the relay says (device, version, push). */
async function renderSettings() {
  const d = app.device;
  if (!d) return;
  $("s-agent").textContent = d.agentName;
  $("s-user").textContent = d.user ? d.user.name : "";
  $("s-user").hidden = $("s-user-label").hidden = !d.user;
  $("s-relay").textContent = location.host;
  $("s-device").textContent = d.deviceName;
  $("s-device-id").textContent = d.deviceId;
  $("s-role").textContent = d.role === "owner" ? "Owner: sends tasks and answers questions" : "Answers questions";
  $("s-paired").textContent = d.pairedAt ? dateTime(d.pairedAt) : "";
  // Grants are listed and revoked by owner devices only.
  $("s-grants-panel").hidden = d.role !== "owner";
  renderSigning(d);
  $("unpair-confirm").hidden = true;
  $("unpair").hidden = false;
  // Several agents paired here: unpairing is this agent's only, the others keep working.
  const multi = app.pairings.length > 1;
  $("unpair").textContent = multi ? `Unpair from “${d.agentName}”` : "Unpair this browser";
  $("unpair-yes").textContent = multi ? `Unpair from “${d.agentName}”` : "Unpair";
  $("unpair-question").replaceChildren(
    el("strong", null, multi ? `Unpair from “${d.agentName}”?` : "Unpair this browser?"),
    multi
      ? ` The relay revokes this device for ${d.agentName}, and its key and conversation are deleted here. The other agents paired here are kept. To answer ${d.agentName} here again you will need a new pairing link.`
      : " The relay revokes this device, and its key and conversation are deleted here. To use Pacerelle here again you will need a new pairing link.",
  );
  renderPush();
  relayApi
    .health()
    .then((h) => ($("s-version").textContent = `Pacerelle ${h.version} (this relay and its web app)`))
    .catch(() => ($("s-version").textContent = "Unknown: the relay cannot be reached"));
  try {
    const me = await app.api.me();
    $("s-agent").textContent = me.agent.name;
    $("s-device").textContent = me.device.name;
    $("s-paired").textContent = dateTime(me.device.createdAt);
  } catch (e) {
    if (isRevocation(e)) revoked();
  }
}

const SIGNING_HELP = {
  signed:
    "Every answer from this browser is signed with a key made here, which never leaves it. The agent's answer log lists the same fingerprint: compare them to check that an approval came from this device.",
  pending:
    "This browser has its signing key, but the relay does not list it yet: answers are sealed end to end but unsigned until it does, and an agent that requires signed answers (every new agent does) refuses them. The key is sent again when the app next starts.",
  conflict:
    "The relay lists another signing key for this device: its answers will be refused. Unpair this browser and pair it again.",
  unsigned:
    "This browser has no Ed25519 in WebCrypto, so it cannot sign: answers are sealed end to end but not signed. An agent that requires signed answers (every new agent does) refuses them, and an answer log export cannot prove they came from this browser. After a browser update the app makes a key and registers it at its next start.",
};

/** The signing key's fingerprint and what it means (`answers.signingStatus`). */
async function renderSigning(d) {
  const { state, fingerprint } = await answers.signingStatus(d);
  const dd = $("s-signing");
  dd.dataset.state = state;
  dd.textContent = "";
  if (fingerprint) dd.append(el("code", "fingerprint", fingerprint));
  if (state !== "signed") dd.append(el("span", "tag", state === "unsigned" ? "none: cannot sign" : state));
  $("s-signing-help").textContent = SIGNING_HELP[state];
}

let pushBusy = false;

async function renderPush(error) {
  const sw = $("push-switch");
  const st = await push.status();
  sw.checked = st.state === "on";
  sw.disabled = pushBusy || st.state === "unsupported" || st.state === "denied";
  sw.closest(".switch-row").dataset.state = st.state;
  $("push-text").textContent = pushBusy ? (sw.checked ? "Turning off…" : "Turning on…") : st.text;
  const err = $("push-error");
  err.hidden = !error;
  err.textContent = error ? (error.message || String(error)) : "";
}

function wireSettings() {
  const open = () => {
    if (location.hash !== "#settings") history.pushState({ settings: true }, "", "#settings");
    showScreen("settings");
    renderSettings();
    window.scrollTo(0, 0);
  };
  $("open-settings").addEventListener("click", open);
  $("settings-back").addEventListener("click", () => {
    if (history.state && history.state.settings) {
      history.back();
    } else {
      // Opened at #settings (a reload): there is no conversation entry to go back to.
      history.replaceState(null, "", "/");
      showScreen("conversation");
    }
  });
  window.addEventListener("popstate", () => {
    if (!app.device || app.stopped) return;
    if (location.hash === "#settings") open();
    else if (location.hash === "#grants") showGrantsScreen();
    else showScreen("conversation");
  });
  $("open-grants").addEventListener("click", () => {
    if (location.hash !== "#grants") history.pushState({ grants: true }, "", "#grants");
    showGrantsScreen();
  });
  $("grants-back").addEventListener("click", () => {
    if (history.state && history.state.grants) {
      history.back();
    } else {
      // Opened at #grants (a reload): the settings are under it.
      history.replaceState(null, "", "#settings");
      open();
    }
  });
  // Turning notifications on asks for the permission: only from this tap, as browsers require.
  $("push-switch").addEventListener("change", async (event) => {
    const on = event.target.checked;
    pushBusy = true;
    await renderPush();
    $("push-switch").checked = on;
    let error = null;
    // One subscription for this browser, registered with every paired device (the current one first).
    const apis = [app.api, ...app.pairings.filter((d) => d.agentId !== app.device.agentId).map((d) => deviceApi(d.deviceToken))];
    try {
      if (on) await push.enable(apis);
      else await push.disable(apis.map((a, i) => (i === 0 ? a : { unregisterPush: (e) => a.unregisterPush(e).catch(() => {}) })));
    } catch (e) {
      if (isRevocation(e)) return revoked();
      error = e;
    }
    pushBusy = false;
    await renderPush(error);
  });
  $("unpair").addEventListener("click", () => {
    $("unpair").hidden = true;
    $("unpair-confirm").hidden = false;
    $("unpair-cancel").focus();
  });
  $("unpair-cancel").addEventListener("click", () => {
    $("unpair-confirm").hidden = true;
    $("unpair").hidden = false;
  });
  $("unpair-yes").addEventListener("click", unpair);
}

/** Unpairs: the relay forgets this browser's push subscription and revokes the device; then everything here goes. */
async function unpair() {
  $("unpair-yes").disabled = true;
  const api = app.api;
  const agentId = app.device ? app.device.agentId : undefined;
  const others = app.pairings.filter((d) => d.agentId !== agentId);
  if (api) {
    // The other agents keep the browser's subscription: only this device's registration goes.
    if (others.length > 0) await push.forget(api).catch(() => {});
    else await push.disable(api).catch(() => {});
    try {
      await api.leave();
    } catch (e) {
      if (!isRevocation(e)) {
        $("unpair-yes").disabled = false;
        toast(`The relay could not be reached (${e.message}). Nothing was deleted: try again.`);
        return;
      }
    }
  }
  app.stopped = true;
  await store.forgetDevice(agentId);
  location.replace("/");
}

wire();
boot().catch((e) => {
  showScreen("unpaired");
  toast(`Something went wrong: ${e && e.message ? e.message : e}`);
});
