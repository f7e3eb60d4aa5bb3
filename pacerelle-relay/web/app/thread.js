// The conversation's thread: the tasks sent from here with their states, the agent's replies under them, and its
// notifications, each an item of the list #thread. Questions are in questions-ui.js; reading the conversation
// from the relay is in conversation.js.

import * as c from "./crypto.js";
import * as store from "./store.js";
import { foldable } from "./details.js";
import { app } from "./state.js";
import { $, el } from "./dom.js";
import { clock } from "./format.js";

/** The empty thread's line shows while the thread has no item. */
export function updateEmpty() {
  $("empty").hidden = $("thread").children.length > 0;
}

/** Whether the page is scrolled (nearly) to its end: new items keep it there. */
export function nearBottom() {
  const doc = document.scrollingElement || document.documentElement;
  return doc.scrollHeight - doc.scrollTop - doc.clientHeight < 160;
}

/** Adds an item to the thread (or to a task's replies), keeping the page at its end when it was there. */
export function append(node, container = $("thread")) {
  const stick = nearBottom();
  container.append(node);
  updateEmpty();
  if (stick) node.scrollIntoView({ block: "end" });
}

const TASK_STATES = {
  pending: "Sending…",
  retrying: "Not sent yet — will retry",
  failed: "Not sent",
  sent: "Sent",
  delivered: "Delivered — your agent has it",
  processed: "Done",
};

export const STATE_RANK = { pending: 0, retrying: 0, failed: 0, sent: 1, delivered: 2, processed: 3 };

/** A task's state, shown under it. */
export function setTaskState(entry, state) {
  if (!state || !(state in TASK_STATES)) return;
  // States only move forward (a re-read may be older than a newer answer).
  if (entry.state && STATE_RANK[state] < STATE_RANK[entry.state] && STATE_RANK[entry.state] > 0) return;
  entry.state = state;
  entry.node.dataset.state = state;
  entry.stateNode.textContent = TASK_STATES[state];
}

/** Shows a task sent from here. */
export function addTask(id, text, state, createdAt, before, session = null) {
  const node = el("li", "entry task");
  node.dataset.id = id;
  if (session) node.dataset.session = session;
  const bubble = el("div", "bubble me", text);
  const meta = el("div", "meta");
  const time = el("span", "time", clock(createdAt));
  const stateNode = el("span", "state");
  meta.append(time, stateNode);
  if (session) meta.append(el("span", "to", `to ${session}`));
  const replies = el("ol", "replies");
  node.append(...foldable(bubble, text), meta, replies);
  const entry = { kind: "message", node, stateNode, replies, state: null, positioned: before !== null };
  app.entries.set(id, entry);
  app.order.push({ id, before });
  setTaskState(entry, state);
  append(node);
  return entry;
}

/** Shows a task still in the outbox (after a reload), or drops it when it does not open. */
export async function showPendingTask(outboxEntry) {
  const d = app.device;
  if (app.entries.has(outboxEntry.id)) return;
  try {
    const task = await c.openJson(d.key, c.context.task(d.agentId, d.deviceId, outboxEntry.id), outboxEntry.envelope);
    addTask(outboxEntry.id, task.text, "pending", new Date(outboxEntry.queuedAt).toISOString(), null, task.session || null);
  } catch {
    await store.deleteOutbox(outboxEntry.id);
  }
}

/** Shows a reply of the agent under its task (or alone, for a task sent from another device). */
export function addReply(id, reply, createdAt) {
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

/** Shows a notification of the agent. */
export function addNotification(id, n, createdAt) {
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
