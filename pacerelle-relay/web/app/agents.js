// Several agents paired in this browser: the presence of each (for the switcher, screens.js), the questions waiting
// across all of them, answerable in place with each one's own device, and the overview of every agent.

import * as store from "./store.js";
import * as answers from "./answer.js";
import * as grantUi from "./grant-ui.js";
import * as approvals from "./approvals.js";
import { closedOutcome, tallyLine, waitingStatus } from "./approvals-ui.js";
import { ApiError, deviceApi, isRevocation } from "./api.js";
import { sleep } from "./backoff.js";
import { detailsNodes } from "./details.js";
import { GrantError } from "./grant.js";
import { app, STATUS_EVERY_MS } from "./state.js";
import { $, el } from "./dom.js";
import { clock, dateTime, timeLeft } from "./format.js";
import { onSettings, openAgent, PRESENCE_WORDS, presenceDot, renderSwitcher, showScreen } from "./screens.js";
import { describeSending, questionControls, questionMeta } from "./questions-ui.js";
import { flushOutbox } from "./sending.js";

/** Wires the switcher's two views across the agents: the questions waiting, and the overview. */
export function wireAgents() {
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
export async function presenceLoop() {
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
  for (const p of added) showPendingQuestion(list, p);
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
export async function loadPending() {
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
export function showPending(waiting) {
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
  for (const p of waiting) showPendingQuestion(list, p);
}

/** Adds a waiting question's card to the pending list and remembers it as shown. */
function showPendingQuestion(list, p) {
  p.node = el("li", "entry question pending-question");
  p.node.dataset.id = p.id;
  p.node.dataset.agentId = p.agent.agentId;
  renderPendingQuestion(p);
  list.append(p.node);
  app.pendingShown.set(p.id, p);
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
    status.textContent = `${answers.describeAnswer(p.done, payload)} — by this device`;
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
