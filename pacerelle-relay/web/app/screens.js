// Which screen the page shows, and what is around it: the banner over the conversation (the agent's presence,
// or the relay not reached), the strip of agents at the top when several are paired here, and the revoked screen.
// Every screen is a `screen-<name>` section of index.html; one is shown at a time.

import { app } from "./state.js";
import { $, el } from "./dom.js";

/** The screens, each a `screen-<name>` section of index.html. */
const SCREENS = ["loading", "insecure", "unpaired", "revoked", "pair", "conversation", "settings", "grants", "pending", "overview"];

/** Shows one screen (and the composer, the banner and the switcher as it has them). */
export function showScreen(name) {
  for (const s of SCREENS) $(`screen-${s}`).hidden = s !== name;
  document.body.dataset.screen = name;
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

/** The dot's colour class: listening, busy or offline (and unknown until read). */
export const presenceDot = (presence) =>
  presence === "listening" ? "ok" : presence === "busy" || presence === "waiting_confirmation" ? "busy" : presence ? "idle" : "unknown";

/** The strip of agents (with their presence) and the two views across them: shown when several are paired here. */
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
export function openAgent(agentId) {
  if (app.device && agentId === app.device.agentId && !app.stopped) {
    if (onSettings()) history.replaceState(null, "", "/");
    showScreen("conversation");
    return;
  }
  location.assign(`/?agent=${encodeURIComponent(agentId)}`);
}

/** Whether the address names the settings or the grants screen under them. */
export const onSettings = () => location.hash === "#settings" || location.hash === "#grants";
