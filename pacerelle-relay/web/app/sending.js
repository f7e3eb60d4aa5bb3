// Sending, with retries that are safe: the outbox (store.js) holds every task and answer sealed under the id chosen
// when it was queued, so a retry is stored once by the relay. Also whether the relay is reached, which the banner
// shows: when it comes back, the outbox is sent at once.

import * as c from "./crypto.js";
import * as store from "./store.js";
import * as answers from "./answer.js";
import { ApiError, isRevocation } from "./api.js";
import { app } from "./state.js";
import { $, toast } from "./dom.js";
import { revoked, setBanner } from "./screens.js";
import { addTask, setTaskState, STATE_RANK } from "./thread.js";
import { closedMessage, renderQuestion, rereadQuestion, updateQuestionMeta } from "./questions-ui.js";

/** Whether the relay answers: shown by the banner; when it answers again, the outbox is sent at once. */
export function setConnected(connected) {
  if (app.connected === connected) return;
  const wasDown = app.connected === false;
  app.connected = connected;
  setBanner();
  if (connected && wasDown) flushOutbox();
}

/** The network is back, or the page is shown again: reconnect now rather than at the end of the backoff. */
export function reconnectNow() {
  app.reconnect.wake();
  app.retry.reset();
  flushOutbox();
}

let flushing = false;
let flushAgain = false;

/** Sends what the outbox holds, oldest first. Ids were chosen when queued: a retry is stored once. */
export async function flushOutbox() {
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
    // Another agent shown meanwhile (no reload): its own flush sends its entries; these wait for theirs.
    const gen = app.generation;
    for (const entry of await store.listOutbox(app.device.agentId)) {
      if (gen !== app.generation) return;
      try {
        await sendEntry(entry);
        app.retry.reset();
      } catch (e) {
        if (gen !== app.generation) return;
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
    await app.api.send(entry.id, entry.envelope, entry.session);
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

const sameAnswer = (a, b) => JSON.stringify(a) === JSON.stringify(b);

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

/** The name a session goes by when it gave none: every session of an agent older than named sessions. */
const DEFAULT_SESSION = "default";

/**
 * Whether an agent's sessions are worth showing one by one (the "To" choice, the overview): it has several, or one
 * with a name. A lone session that gave none shows as "the session", as before (the core's `Status::lists_sessions`).
 */
export function listsSessions(status) {
  const sessions = (status && status.sessions) || [];
  return sessions.length > 1 || (sessions.length === 1 && sessions[0].name !== DEFAULT_SESSION);
}

/**
 * The composer's "To" choice: shown when the agent has a named session or several sessions (docs/mcp.md, "Several
 * sessions of one agent"), with "Any session" first — a task for any session goes to whichever is handed it first.
 * The choice made is kept while that session is open.
 */
export function renderSessionChoice(status) {
  const sessions = (status && status.sessions) || [];
  const row = $("task-session-row");
  const select = $("task-session");
  const shown = listsSessions(status);
  row.hidden = !shown;
  const chosen = select.value;
  const options = [["", "Any session"]].concat(
    sessions.map((s) => [s.name, s.folder && s.folder !== s.name ? `${s.name} (${s.folder})` : s.name]),
  );
  const same =
    select.options.length === options.length && options.every(([v, t], i) => select.options[i].value === v && select.options[i].text === t);
  if (!same) {
    select.replaceChildren(...options.map(([value, text]) => Object.assign(document.createElement("option"), { value, text })));
    select.value = options.some(([v]) => v === chosen) ? chosen : "";
  }
  if (!shown) select.value = "";
}

export async function sendTask(text) {
  const d = app.device;
  const id = c.generateId("msg");
  const session = $("task-session").value || null;
  // The session is sealed with the text too: the agent's session rejects a task the relay hands to another one.
  const payload = session ? { text, session } : { text };
  const envelope = await c.sealJson(d.key, c.context.task(d.agentId, d.deviceId, id), payload);
  const entry = { id, type: "message", agentId: d.agentId, envelope, queuedAt: Date.now() };
  if (session) entry.session = session;
  await store.putOutbox(entry);
  addTask(id, text, "pending", new Date(entry.queuedAt).toISOString(), null, session);
  $("thread").lastElementChild.scrollIntoView({ block: "end" });
  flushOutbox();
}
