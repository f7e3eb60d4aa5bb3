// Every paired agent live, not only the one shown: the relay wakes a device's conversation long-poll as soon as
// something arrives for it (a question, an update), so one long-poll is kept parked per other agent paired here,
// each with its own cursor, in the background. A question from any agent is then seen within a second, wherever
// the person is in the app (the shown agent's own conversation long-poll is conversation.js's).
//
// Connections: a browser opens at most 6 HTTP/1.1 connections to one origin, and each parked long-poll holds one
// for up to 55 s. The shown conversation parks one; LIVE_AGENTS counts it, so at most LIVE_AGENTS - 1 are parked
// here and at least 2 connections stay free for everything else (sending, answering, status). Agents beyond the
// first LIVE_AGENTS (5 and more paired in one browser) are not watched live: they fall back to the slower reading
// of agents.js's presence loop (every 15 s). Over HTTP/2 there is no such limit, but the page cannot tell.

import { deviceApi, isRevocation } from "./api.js";
import { Backoff } from "./backoff.js";
import { app, LONG_POLL_WAIT, PAGE } from "./state.js";

/** How many agents are live at once, the shown one included (see above). */
export const LIVE_AGENTS = 4;

/** agentId → {stopped, abort}: the background long-polls running. */
const watchers = new Map();

/** agentId → where its conversation was read up to when it was last shown or watched (no reading it all again). */
const cursors = new Map();

/** The shown conversation of `agentId` ends at `cursor` (a switch): its watcher goes on from there. */
export function handOver(agentId, cursor) {
  if (agentId && cursor) cursors.set(agentId, cursor);
}

/** What is called when something about questions arrives for an agent watched: `(pairing, items)`. */
let onQuestions = () => {};

/** Sets what is told when questions (new ones, or states moved on) arrive for an agent watched. */
export function onAgentQuestions(handler) {
  onQuestions = handler;
}

/**
 * Watches every paired agent but the shown one (up to LIVE_AGENTS in all, oldest pairings first); the ones already
 * watched go on with their cursor, the shown one and those no longer paired stop. Call again when the shown agent
 * or the pairings change.
 */
export function watchAgents() {
  const shown = app.device ? app.device.agentId : null;
  const wanted = app.pairings.filter((d) => d.agentId !== shown).slice(0, LIVE_AGENTS - 1);
  const ids = new Set(wanted.map((d) => d.agentId));
  for (const [agentId, w] of watchers) {
    if (ids.has(agentId)) continue;
    w.stopped = true;
    w.abort.abort();
    watchers.delete(agentId);
  }
  for (const d of wanted) {
    if (watchers.has(d.agentId)) continue;
    const w = { stopped: false, abort: new AbortController() };
    watchers.set(d.agentId, w);
    watch(d, w);
  }
}

/** Whether `agentId` is watched live here (else read by the presence loop's slower rounds). */
export const watched = (agentId) => watchers.has(agentId);

/** One agent's conversation read in the background: caught up first (no alert for what was there), then parked. */
async function watch(d, w) {
  const api = deviceApi(d.deviceToken);
  const backoff = new Backoff();
  let cursor = cursors.get(d.agentId) || null;
  let caughtUp = false;
  let wait = 0;
  while (!w.stopped) {
    try {
      const page = await api.conversation(cursor, wait, w.abort.signal);
      if (w.stopped) return;
      backoff.reset();
      cursor = page.cursor;
      cursors.set(d.agentId, cursor);
      const items = page.items.filter((i) => i.kind === "question" || (i.kind === "update" && i.subjectKind === "question"));
      if (caughtUp && items.length > 0) onQuestions(d, items);
      if (page.items.length >= PAGE) {
        wait = 0;
        continue;
      }
      caughtUp = true;
      wait = LONG_POLL_WAIT;
    } catch (e) {
      if (w.stopped) return;
      // A revoked device: its agent's conversation says so when opened; nothing more to watch here.
      if (isRevocation(e)) {
        w.stopped = true;
        watchers.delete(d.agentId);
        return;
      }
      if (e && e.kind === "bad_cursor") {
        cursor = null;
        cursors.delete(d.agentId);
        caughtUp = false;
      }
      wait = 0;
      await backoff.wait();
    }
  }
}
