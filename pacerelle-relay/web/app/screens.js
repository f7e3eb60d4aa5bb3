// Which screen the page shows, and what is around it: the banner over the conversation (the agent's presence,
// or the relay not reached), the strip of agents at the top when several are paired here, and the revoked screen.
// Every screen is a `screen-<name>` section of index.html; one is shown at a time.

import { app } from "./state.js";
import { $, el } from "./dom.js";
import { activityOf } from "./activity.js";
import { tabLabels } from "./names.js";

/** The screens, each a `screen-<name>` section of index.html. */
const SCREENS = ["loading", "insecure", "unpaired", "revoked", "pair", "conversation", "settings", "grants", "pending", "overview"];

/** Shows one screen (and the composer, the banner and the switcher as it has them). */
export function showScreen(name) {
  for (const s of SCREENS) $(`screen-${s}`).hidden = s !== name;
  document.body.dataset.screen = name;
  // The pending view names the agent of the card in view (agents.js); the other screens, the agent shown.
  if (name !== "pending" && app.device) $("agent-name").textContent = app.device.agentName;
  const chat = name === "conversation";
  $("composer").hidden = !(chat && app.device && app.device.role === "owner");
  $("open-settings").hidden = !chat;
  if (chat) setBanner();
  else $("banner").hidden = true;
  renderSwitcher();
}

/** The banner over the conversation: the agent's presence, or the relay not reached. */
export function setBanner() {
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
  } else if (!app.presence) {
    banner.hidden = true;
    return;
  } else {
    // The word (activity.js) from the agent's status and the questions waiting here: never "ready for a task"
    // while a question of this agent waits.
    switch (currentActivity()) {
      case "asking":
        kind = "ask";
        text = "Asking — a question waits for your answer";
        break;
      case "working":
        kind = app.presence === "waiting_confirmation" ? "warn" : "busy";
        text =
          app.presence === "waiting_confirmation"
            ? "Working — probably waiting for a confirmation on the computer"
            : "Working on a task";
        break;
      case "listening":
        kind = "ok";
        text = app.presence === "connected" ? "Listening — tasks are read when its session waits" : "Listening — ready for a task";
        break;
      default:
        kind = "idle";
        text = "Agent offline — tasks wait on the relay until it comes back";
    }
  }
  banner.className = `banner ${kind}`;
  banner.dataset.presence = app.connected === false ? "disconnected" : app.presence;
  banner.dataset.activity = app.connected === false ? "" : currentActivity();
  $("banner-text").textContent = text;
  banner.hidden = false;
}

/** The questions of the shown agent waiting for this device, as the page shows them. */
export function waitingHere() {
  let n = 0;
  for (const q of app.questions.values()) {
    if (q.meta.state !== "pending" || q.sending || q.answer) continue;
    if (Date.now() >= Date.parse(q.payload.expiresAt)) continue;
    n++;
  }
  return n;
}

/** How many of `agentId`'s questions wait for this browser, if the app has read them (else undefined). */
export const knownWaiting = (agentId) => app.waitingBy.get(agentId);

/**
 * The shown agent's activity word (activity.js), with the app's own count of its questions waiting: the questions
 * read across agents and those the conversation shows open, whichever is more (the conversation sees a question
 * the moment it arrives).
 */
export function currentActivity() {
  const agentId = app.device ? app.device.agentId : null;
  const read = agentId ? knownWaiting(agentId) : undefined;
  const here = waitingHere();
  const waiting = read === undefined ? (here > 0 ? here : undefined) : Math.max(read, here);
  return activityOf(app.status || { presence: app.presence }, waiting);
}

/** An agent's activity word: the shown one's as above, another's from its last status and its questions waiting. */
export function activityOfAgent(agentId) {
  if (app.device && agentId === app.device.agentId) return currentActivity();
  const st = app.statuses.get(agentId);
  const waiting = knownWaiting(agentId);
  return st || waiting ? activityOf(st || {}, waiting) : null;
}

/** This device was revoked (or unpaired elsewhere): everything stops, and the revoked screen says so. */
export function revoked() {
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

// ── the strip of agents, when several are paired here ───────────────────────────────────────────────

/** An agent's presence in words, for the switcher and the overview. */
export const PRESENCE_WORDS = {
  listening: "Listening",
  busy: "Busy",
  waiting_confirmation: "Busy — probably waiting for a confirmation",
  connected: "Connected, not listening",
  offline: "Offline",
};

/** The dot's colour class, from the activity word: asking, working, listening or offline (and unknown until read). */
export const presenceDot = (activity) =>
  activity === "asking" ? "ask" : activity === "listening" ? "ok" : activity === "working" ? "busy" : activity ? "idle" : "unknown";

/** What a tab's title says of its agent's activity. */
const ACTIVITY_TITLES = {
  asking: "asking you a question",
  working: "working",
  listening: "listening",
  offline: "offline",
};

/** The strip of agents (their activity, their questions waiting) and the two views across them: several paired here. */
export function renderSwitcher() {
  const nav = $("agents");
  const screen = document.body.dataset.screen;
  const show = app.pairings.length > 1 && !["loading", "insecure", "unpaired", "pair"].includes(screen);
  nav.hidden = !show;
  document.body.classList.toggle("multi", show);
  if (!show) return;
  const current = app.device ? app.device.agentId : app.revokedAgentId;
  const tabs = $("agent-tabs");
  tabs.replaceChildren();
  const labels = tabLabels(app.pairings.map((d) => d.agentName));
  for (const [i, d] of app.pairings.entries()) {
    const b = el("button", "agent-tab");
    b.type = "button";
    b.dataset.agentId = d.agentId;
    const presence = d.agentId === current && app.device ? app.presence : app.presences.get(d.agentId);
    const activity = activityOfAgent(d.agentId);
    const dot = el("span", `dot ${presenceDot(activity)}`);
    dot.dataset.presence = presence || "";
    dot.dataset.activity = activity || "";
    dot.setAttribute("aria-hidden", "true");
    b.append(dot, el("span", "agent-tab-name", labels[i]));
    const waiting = app.waitingBy.get(d.agentId) || 0;
    if (waiting > 0) {
      const badge = el("span", "count agent-count", String(waiting));
      badge.setAttribute("aria-label", `${waiting} waiting`);
      b.append(badge);
    }
    b.title = `${d.agentName}: ${ACTIVITY_TITLES[activity] || "activity unknown"}${waiting ? `, ${waiting} waiting for you` : ""}`;
    // The tab may show only the words that tell the agents apart: its name for screen readers is the whole one.
    b.setAttribute("aria-label", `${d.agentName}${waiting ? `, ${waiting} waiting` : ""}`);
    if (d.agentId === current && screen !== "pending" && screen !== "overview") b.setAttribute("aria-current", "page");
    b.addEventListener("click", () => openAgent(d.agentId));
    tabs.append(b);
  }
  $("open-pending").toggleAttribute("aria-current", screen === "pending");
  $("open-overview").toggleAttribute("aria-current", screen === "overview");
}

/** Shows another agent's conversation in place (conversation.js's `switchTo`, passed in at start), or null to reload. */
let switcher = null;

/** Sets what shows another agent's conversation without a reload. */
export function onSwitchAgent(fn) {
  switcher = fn;
}

/** Shows `agentId`'s conversation: the current one at once, another in place (its draft kept, the page not reloaded). */
export function openAgent(agentId) {
  if (app.device && agentId === app.device.agentId && !app.stopped) {
    if (onSettings()) history.replaceState(null, "", "/");
    showScreen("conversation");
    return;
  }
  if (switcher && !app.stopped) {
    switcher(agentId);
    return;
  }
  location.assign(`/?agent=${encodeURIComponent(agentId)}`);
}

/** Whether the address names the settings or the grants screen under them. */
export const onSettings = () => location.hash === "#settings" || location.hash === "#grants";
