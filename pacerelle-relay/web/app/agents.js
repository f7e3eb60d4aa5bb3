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
import { activityOfAgent, onSettings, openAgent, PRESENCE_WORDS, presenceDot, renderSwitcher, setBanner, showScreen } from "./screens.js";
import { describeSending, questionControls, questionMeta } from "./questions-ui.js";
import { flushOutbox, listsSessions } from "./sending.js";

/** Wires the switcher's two views across the agents: the questions waiting, and the overview. */
export function wireAgents() {
  $("open-pending").addEventListener("click", async () => {
    showPending(null);
    showPending(await loadPending());
  });
  $("open-overview").addEventListener("click", showOverview);
  $("ask-open").addEventListener("click", answerAnnounced);
  setInterval(tickPending, 1000);
  window.addEventListener("scroll", nameCardInView, { passive: true });
  $("ask-close").addEventListener("click", hideAsk);
}

/**
 * The presence of every other agent, for the switcher's dots (the current one's comes from its status loop), and
 * the questions waiting across all of them: the count, and the pending view when it is open (new ones are added).
 */
let presenceRunning = false;

export async function presenceLoop() {
  if (presenceRunning) return;
  presenceRunning = true;
  for (let round = 0; ; round++) {
    // The agents not watched live (watch.js: beyond the first few) get their questions read here, at this pace.
    if (round > 0) await refreshWaiting();
    for (const d of app.pairings) {
      if (app.device && d.agentId === app.device.agentId) continue;
      try {
        const st = await deviceApi(d.deviceToken).status();
        app.presences.set(d.agentId, st.presence);
        app.statuses.set(d.agentId, st);
      } catch {
        app.presences.set(d.agentId, null);
        app.statuses.delete(d.agentId);
      }
    }
    renderSwitcher();
    await sleep(STATUS_EVERY_MS * 3);
  }
}

/** Reads the questions waiting again; the pending view, when shown, gets those it does not show yet. */
async function refreshPending() {
  const waiting = await loadPending().catch(() => null);
  if (!waiting || document.body.dataset.screen !== "pending") return waiting;
  await rereadShownPending(waiting);
  if (document.body.dataset.screen !== "pending") return waiting;
  const list = $("pending-list");
  // Every card shown now, waiting or moved to "Answered": none is added twice (read after the awaits above, as the
  // view may have been drawn again meanwhile).
  const shown = new Set([...list.children, ...$("pending-answered").children].map((n) => n.dataset.id));
  const added = waiting.filter((p) => !shown.has(p.id));
  for (const p of added) showPendingQuestion(list, p);
  if (added.length > 0) $("pending-status").textContent = "";
  nameCardInView();
  return waiting;
}

/**
 * The questions the pending view shows, read again: a question that needs several approvals gets its count as it
 * stands, and once a question is no longer pending (enough devices approved, one denied, it expired) it reads as closed, with
 * the usual words, from the question as its agent's device reads it now.
 */
async function rereadShownPending(waiting) {
  const now = new Map(waiting.map((p) => [p.id, p]));
  for (const p of app.pendingShown.values()) {
    if (p.sending || p.done || p.closed) continue;
    const fresh = now.get(p.id);
    if (fresh && fresh.agent.agentId === p.agent.agentId) {
      if (approvals.approvalsOf(p.payload) < 2) continue;
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
  const read = new Set();
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
    read.add(d.agentId);
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
  const mine = all.filter((p) => !waitsForOthers(p));
  // Every agent read has a count, 0 included; one that could not be read has none (its count is not known).
  app.waitingBy = new Map([...read].map((agentId) => [agentId, 0]));
  for (const p of mine) app.waitingBy.set(p.agent.agentId, (app.waitingBy.get(p.agent.agentId) || 0) + 1);
  showWaitingCount();
  return all;
}

/**
 * The count of questions waiting for this browser, where it shows: Pending's badge (all agents), each agent's tab
 * (its own), and the page's title, "(2) Pacerelle".
 */
export function showWaitingCount() {
  const total = [...app.waitingBy.values()].reduce((a, b) => a + b, 0);
  const count = $("pending-count");
  count.textContent = String(total);
  count.hidden = total === 0;
  const base = app.device ? `${app.device.agentName} — Pacerelle` : "Pacerelle";
  document.title = total > 0 ? `(${total}) ${base}` : base;
  renderSwitcher();
  setBanner();
}

let refreshing = null;
let refreshAgain = false;

/**
 * Reads the questions waiting across all agents again (one reading at a time; one more if asked meanwhile): the
 * counts, and the pending view when it is shown. Returns the questions waiting.
 */
export async function refreshWaiting() {
  if (refreshing) {
    refreshAgain = true;
    return refreshing;
  }
  refreshing = (async () => {
    let waiting = null;
    do {
      refreshAgain = false;
      waiting = await refreshPending();
    } while (refreshAgain);
    return waiting;
  })();
  try {
    return await refreshing;
  } finally {
    refreshing = null;
  }
}

/**
 * Questions arrived for agent `d` (watch.js, or the shown conversation): the counts are read again, and a question
 * of another agent than the one shown is announced at the top, with a button that opens it to answer.
 */
export async function questionsArrived(d, items) {
  const waiting = (await refreshWaiting()) || [];
  const fresh = items.filter((i) => i.kind === "question").map((i) => i.id);
  if (fresh.length === 0) {
    // States moved on: an announced question no longer waiting leaves the top.
    const shownId = $("ask-banner").dataset.id;
    if (shownId && !waiting.some((p) => p.id === shownId && !p.done && !p.closed)) hideAsk();
    return;
  }
  if (app.device && d.agentId === app.device.agentId && document.body.dataset.screen === "conversation") return;
  const p = waiting.find((x) => fresh.includes(x.id) && x.agent.agentId === d.agentId);
  if (p) announce(p);
}

/** Another agent asks: the banner at the top says who and what, with a button to answer it. */
function announce(p) {
  const banner = $("ask-banner");
  banner.dataset.id = p.id;
  banner.dataset.agentId = p.agent.agentId;
  $("ask-text").textContent = `${p.agent.agentName} asks: ${p.payload.question}`;
  banner.hidden = false;
}

export function hideAsk() {
  const banner = $("ask-banner");
  banner.hidden = true;
  delete banner.dataset.id;
  delete banner.dataset.agentId;
}

/** The banner's button: the pending view, on the question announced. */
async function answerAnnounced() {
  const id = $("ask-banner").dataset.id;
  hideAsk();
  showPending(null);
  showPending(await loadPending());
  const card = id && app.pendingShown.get(id);
  if (card) card.node.scrollIntoView({ block: "center" });
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
  $("pending-answered").replaceChildren();
  $("pending-answered-title").hidden = true;
  app.pendingShown = new Map();
  const errors = app.pendingErrors || [];
  status.textContent =
    (waiting.length === 0 ? "No question is waiting, from any agent." : "") + (errors.length ? ` ${errors.join(". ")}.` : "");
  for (const p of waiting) showPendingQuestion(list, p);
  nameCardInView();
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
  // The countdown runs while the question waits (ticked by tickPending), and stops once it is answered or closed.
  const open = !p.done && !p.closed;
  const left = el("span", "time-left", open ? timeLeft(Date.parse(payload.expiresAt) - Date.now()) : "");
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
  const opener = el("button", "link open-agent", `Open ${p.agent.agentName}`);
  opener.type = "button";
  opener.addEventListener("click", () => openAgent(p.agent.agentId));
  node.append(el("div", "meta", `Asked ${clock(p.createdAt)}`), opener);
  // "Waiting for you" shows only what waits: an answered, expired or cancelled card moves to "Answered".
  if (!open && node.parentNode === $("pending-list")) {
    $("pending-answered").prepend(node);
    $("pending-answered-title").hidden = false;
    if ($("pending-list").children.length === 0) $("pending-status").textContent = "Nothing else is waiting, from any agent.";
  }
}

/**
 * In the pending view, the header names the agent of the card in view (the first card below the pinned top); the
 * shown agent's name comes back with its conversation (screens.js).
 */
export function nameCardInView() {
  if (document.body.dataset.screen !== "pending") return;
  const top = $("chrome").getBoundingClientRect().bottom;
  const cards = [...document.querySelectorAll("#screen-pending li.pending-question")];
  const card = cards.find((n) => n.getBoundingClientRect().bottom > top + 8);
  const name = card && card.querySelector(".pending-agent");
  $("agent-name").textContent = name ? name.textContent : app.device ? app.device.agentName : "Pacerelle";
}

/** The pending view's countdowns, once a second; a question past its expiry leaves "Waiting for you". */
function tickPending() {
  if (document.body.dataset.screen !== "pending") return;
  for (const p of app.pendingShown.values()) {
    if (p.done || p.closed || !p.node) continue;
    const ms = Date.parse(p.payload.expiresAt) - Date.now();
    if (ms <= 0 && !p.sending) {
      p.closed = "Expired — no answer was given in time";
      renderPendingQuestion(p);
      continue;
    }
    const left = p.node.querySelector(".time-left");
    if (left) left.textContent = timeLeft(ms);
  }
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
    const id = p.agent.agentId;
    app.waitingBy.set(id, Math.max(0, (app.waitingBy.get(id) || 0) - 1));
    showWaitingCount();
    if ($("ask-banner").dataset.id === p.id) hideAsk();
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
        app.statuses.set(d.agentId, st);
        row.dataset.presence = st.presence;
        const activity = activityOfAgent(d.agentId);
        row.dataset.activity = activity || "";
        dot.className = `dot ${presenceDot(activity)}`;
        presence.textContent = PRESENCE_WORDS[st.presence] || st.presence;
        const add = (term, value) => {
          if (!value) return;
          facts.append(el("dt", null, term), el("dd", null, value));
        };
        if (listsSessions(st)) {
          // Several sessions (one per project folder, say): each with where it runs and what it does.
          for (const s of st.sessions) {
            const where = s.folder ? `${s.host}, in ${s.folder}` : s.host;
            const row = el("dd", "overview-session", `${PRESENCE_WORDS[s.presence] || s.presence} · ${where}, since ${dateTime(s.since)}`);
            row.dataset.session = s.name;
            facts.append(el("dt", null, `Session ${s.name}`), row);
          }
        } else {
          add("Session", st.session ? `${st.session.host}, since ${dateTime(st.session.since)}` : "No session");
        }
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
