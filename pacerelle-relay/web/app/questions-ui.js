// The agent's questions in the conversation: each one's card (its text, details, time left, approvals so far), its
// controls (Approve / Deny, options, a text answer; grant-ui.js for a question that offers grants), its state as
// the relay states it, and the answer that counts. Opening, sealing and sending an answer is answer.js's; the
// outbox that sends it is sending.js's, which is told through `onAnswerQueued`.

import * as c from "./crypto.js";
import * as store from "./store.js";
import * as answers from "./answer.js";
import * as grantUi from "./grant-ui.js";
import * as approvals from "./approvals.js";
import { tallyLine, waitingStatus } from "./approvals-ui.js";
import { isRevocation } from "./api.js";
import { detailsNodes } from "./details.js";
import { durationLabel, GrantError } from "./grant.js";
import { app, MAX_TEXT_BYTES } from "./state.js";
import { el, toast } from "./dom.js";
import { clock, timeLeft } from "./format.js";
import { revoked } from "./screens.js";
import { append } from "./thread.js";

/** Sends the outbox once an answer is queued here: sending.js's `flushOutbox`, which app.js passes in at start. */
let sendQueued = () => {};

/** Sets what sends the outbox after an answer is queued (sending.js imports this module, so it is passed in). */
export function onAnswerQueued(send) {
  sendQueued = send;
}

/** Whether a question is open and needs several approvals: its count is read again until it closes. */
export const awaitsApprovals = (q) => questionState(q) === "pending" && approvals.approvalsOf(q.payload) > 1;

/** Where a question stands here: a pending question past the expiry the agent sealed is expired. */
function questionState(q) {
  if (q.meta.state === "pending" && Date.now() >= Date.parse(q.payload.expiresAt)) return "expired";
  return q.meta.state;
}

/** Shows a question in the thread, with the answer given here before a reload, and the answer that counts. */
export function addQuestion(id, payload, digest, meta, createdAt) {
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
export function questionMeta(meta) {
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

export async function updateQuestionMeta(q, meta) {
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

/** The answer that counts, from its copy (answer.js), or null; the grant given with it is kept as `q.countedGrant`. */
async function openAnswerCopy(q) {
  await answerKeyOf(q);
  const copy = await answers.openCopy(app.device, q, q.meta);
  q.countedGrant = copy ? copy.grant : null;
  return copy ? copy.answer : null;
}

/** Reads one question again from the relay (its state, who answered, the copy of the answer that counts). */
export async function rereadQuestion(q) {
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

export function renderQuestion(q) {
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
export function describeSending(answer, choice, payload) {
  return choice ? `Allowed for ${durationLabel(choice.seconds)}` : describeAnswer(answer, payload);
}

/**
 * A question's controls; `onAnswer(q, answer, choice?)` answers it, for the pairing `device` (whether it can grant).
 * A yes/no question that offers grants gets Allow / Deny / Allow for … (grant-ui.js).
 */
export function questionControls(q, onAnswer = answerQuestion, device = app.device) {
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
  sendQueued();
}

export function tick() {
  for (const q of app.questions.values()) {
    if (q.meta.state !== "pending") continue;
    const wasRendered = q.node.dataset.state;
    if (questionState(q) !== wasRendered) renderQuestion(q);
    else updateLeft(q);
  }
}

/** What the person is told when an answer from here came too late: the state, and the answer that counts. */
export function closedMessage(q, refused) {
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

/** Scrolls to a question (opened from its notification) and marks it for a moment. */
export function focusQuestion(id) {
  const q = app.questions.get(id);
  if (!q) return; // shown once the conversation brings it (addQuestion)
  app.focus = null;
  q.node.scrollIntoView({ block: "center" });
  q.node.classList.add("focused");
  setTimeout(() => q.node.classList.remove("focused"), 2500);
}
