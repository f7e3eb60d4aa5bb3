// The conversation with the agent: started for a pairing, then read from the relay by a long-poll (new items, and
// `update` items that move states on) and a status loop (the agent's presence). Each item is opened here with the
// device key and shown in the thread (thread.js) or as a question (questions-ui.js).

import * as c from "./crypto.js";
import * as store from "./store.js";
import * as answers from "./answer.js";
import * as push from "./push.js";
import { ApiError, deviceApi, isRevocation, relayApi } from "./api.js";
import { sleep } from "./backoff.js";
import { app, LONG_POLL_WAIT, PAGE, STATUS_EVERY_MS } from "./state.js";
import { $, el } from "./dom.js";
import { renderSwitcher, revoked, setBanner, showScreen } from "./screens.js";
import { applyLook } from "./partner.js";
import { addNotification, addReply, addTask, append, setTaskState, showPendingTask, updateEmpty } from "./thread.js";
import { addQuestion, awaitsApprovals, tick, updateQuestionMeta } from "./questions-ui.js";
import { flushOutbox, renderSessionChoice, setConnected } from "./sending.js";
import { renderSettings, showGrantsScreen } from "./settings.js";
import { hideAsk, questionsArrived, showWaitingCount } from "./agents.js";
import { handOver, watchAgents } from "./watch.js";
import { Backoff } from "./backoff.js";
import { loadDraft } from "./drafts.js";
import { onSettings } from "./screens.js";

/** The empty thread's words for an owner (a Partner-mode user's are set per pairing). */
const EMPTY_TEXT = document.getElementById("empty").textContent;

let ticking = null;

/** Shows `device`'s conversation and starts reading it: the outbox, the long-poll, the status loop, the push refresh. */
export async function startConversation(device) {
  const key = device.key || (device.keyBytes ? await c.importKey(device.keyBytes) : null);
  if (!key) {
    showScreen("revoked");
    return;
  }
  // A new generation: the loops of the conversation shown before (another agent's) end, their long-poll at once.
  const gen = ++app.generation;
  if (app.abort) app.abort.abort();
  app.abort = new AbortController();
  app.device = { ...device, key };
  app.api = deviceApi(device.deviceToken);
  applyLook(device);
  $("agent-name").textContent = device.agentName;
  $("device-name").textContent = device.user
    ? `You answer as ${device.user.name} · end to end encrypted`
    : `${device.deviceName} · end to end encrypted`;
  $("empty").textContent = device.user ? `No question yet. What ${device.agentName} asks you will appear here.` : EMPTY_TEXT;
  document.title = `${device.agentName} — Pacerelle`;
  showWaitingCount();
  renderSessionChoice(app.statuses.get(device.agentId));
  // The task not sent yet to this agent, as it was left (a switch, a reload).
  const input = $("task-text");
  input.value = loadDraft(device.agentId);
  input.dispatchEvent(new Event("input"));
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
  if (gen !== app.generation) return;
  statusLoop(gen);
  conversationLoop(gen);
  if (!ticking) ticking = setInterval(tick, 1000);
  // The other agents paired here, live in the background (watch.js).
  watchAgents();
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

/**
 * Shows another agent's conversation in place, without a reload: the shown one's loops end, its thread is emptied,
 * its draft stays kept (drafts.js), and `agentId`'s conversation starts as at boot.
 */
export async function switchTo(agentId) {
  const device = await store.loadDevice(agentId);
  if (!device) {
    location.assign(`/?agent=${encodeURIComponent(agentId)}`);
    return;
  }
  app.generation++;
  if (app.abort) app.abort.abort();
  clearTimeout(app.retryTimer);
  // Its watcher (watch.js) goes on from where this conversation was read.
  if (app.device) handOver(app.device.agentId, app.cursor);
  Object.assign(app, {
    cursor: null,
    entries: new Map(),
    order: [],
    questions: new Map(),
    pendingAnswers: new Map(),
    connected: null,
    presence: null,
    status: null,
    updates: null,
    focus: null,
    retry: new Backoff(),
    reconnect: new Backoff(),
  });
  $("thread").replaceChildren();
  if ($("ask-banner").dataset.agentId === agentId) hideAsk();
  await store.selectDevice(agentId);
  if (onSettings()) history.replaceState(null, "", "/");
  await startConversation(device);
  window.scrollTo(0, document.documentElement.scrollHeight);
}

async function conversationLoop(gen) {
  let wait = 0; // catch up at once, then park
  const live = () => !app.stopped && app.generation === gen;
  while (live()) {
    try {
      const page = await app.api.conversation(app.cursor, wait, app.abort.signal);
      if (!live()) return;
      setConnected(true);
      app.reconnect.reset();
      let before = app.cursor;
      for (const item of page.items) {
        if (!live()) return;
        await ingest(item, before);
        before = item.cursor;
      }
      if (!live()) return;
      app.cursor = page.cursor;
      // Once caught up, a question (or a question's new state) changes the counts of what waits.
      const asked = page.items.filter((i) => i.kind === "question" || (i.kind === "update" && i.subjectKind === "question"));
      if (wait > 0 && asked.length > 0) questionsArrived(app.device, asked);
      wait = page.items.length >= PAGE ? 0 : LONG_POLL_WAIT;
      updateEmpty();
    } catch (e) {
      if (!live()) return;
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

async function statusLoop(gen) {
  const live = () => !app.stopped && app.generation === gen;
  while (live()) {
    try {
      const api = app.api;
      const status = await api.status();
      if (!live()) return;
      const changed = app.presence !== status.presence;
      app.presence = status.presence;
      app.status = status;
      app.statuses.set(app.device.agentId, status);
      renderSessionChoice(status);
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
      if (!live()) return;
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
  const gen = app.generation;
  try {
    switch (item.kind) {
      case "message": {
        const task = await c.openJson(d.key, c.context.task(d.agentId, d.deviceId, item.id), item.envelope);
        if (typeof task.text !== "string") throw new c.CryptoError("malformed");
        if (gen !== app.generation) return;
        if (app.entries.has(item.id)) return ingest(item, before);
        addTask(item.id, task.text, item.state, item.createdAt, before, task.session || null);
        break;
      }
      case "reply": {
        const reply = await c.openJson(d.key, c.context.reply(d.agentId, d.deviceId, item.id), item.envelope);
        // The relay states the source in clear; the sealed payload must agree.
        if (typeof reply.text !== "string" || reply.sourceMessageId !== item.sourceMessageId) {
          throw new c.CryptoError("open");
        }
        if (gen !== app.generation || app.entries.has(item.id)) return;
        addReply(item.id, reply, item.createdAt);
        break;
      }
      case "question": {
        // The kind is in clear at the relay; the sealed one must agree, and this device must be a recipient.
        const { payload, digest } = await answers.openQuestion(d, item);
        if (gen !== app.generation || app.entries.has(item.id)) return;
        addQuestion(item.id, payload, digest, item.question, item.createdAt);
        break;
      }
      case "notification": {
        const n = await c.openJson(d.key, c.context.notification(d.agentId, d.deviceId, item.id), item.envelope);
        if (typeof n.text !== "string") throw new c.CryptoError("malformed");
        if (gen !== app.generation || app.entries.has(item.id)) return;
        addNotification(item.id, n, item.createdAt);
        break;
      }
      default:
        // A kind this version does not know (a newer relay): skipped, as the wire contract says.
        return;
    }
  } catch (e) {
    if (!(e instanceof c.CryptoError)) throw e;
    if (gen !== app.generation || app.entries.has(item.id)) return;
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
