// Questions and their answers, shared by the page (app.js) and the service worker (sw.js): opening a question
// envelope, sealing an answer, queueing it in the outbox and sending it. One code path, so an answer given from
// a notification is the same answer, under the same outbox id, as one given with the app's buttons.

import * as c from "./crypto.js";
import * as store from "./store.js";

/** The device key (a CryptoKey) of a stored pairing, or null when none can be had. */
export async function deviceKey(device) {
  if (!device) return null;
  if (device.key) return device.key;
  return device.keyBytes ? c.importKey(device.keyBytes) : null;
}

/**
 * Opens a question item of the conversation for `device` (`{agentId, deviceId, key}`): `{payload, digest}`.
 * The kind the relay states in clear must agree with the sealed one, and this device must be a recipient;
 * anything else throws a CryptoError.
 */
export async function openQuestion(device, item) {
  if (!item || !item.question) throw new c.CryptoError("malformed");
  const { agentId, deviceId, key } = device;
  const opened = await c.openJsonBytes(key, c.context.question(agentId, deviceId, item.id), item.envelope);
  const payload = opened.value;
  if (
    payload.kind !== item.question.kind ||
    typeof payload.question !== "string" ||
    !Array.isArray(payload.recipients) ||
    !payload.recipients.includes(deviceId)
  ) {
    throw new c.CryptoError("open");
  }
  // An answer names the exact question it answers: the digest of the bytes opened here.
  return { payload, digest: await c.questionDigest(opened.plaintext) };
}

/** The question's answer key (a CryptoKey), or null when it carries none or it is malformed. */
export async function answerKey(payload) {
  try {
    return typeof payload.answerKey === "string" ? await c.importKey(c.b64decode(payload.answerKey)) : null;
  } catch {
    return null;
  }
}

/** The outbox id of the answer to a question: one per question, so that every retry sends the same answer. */
export const outboxId = (questionId) => `answer:${questionId}`;

/**
 * Seals `answer` to question `q` (`{id, payload, digest}`) and queues it in the outbox, where it stays until the
 * relay acknowledges or refuses it for good. Returns the outbox entry. The relay stores one answer per question
 * and device: a retry, or the page and a notification answering at once, cannot record two.
 */
export async function queueAnswer(device, q, answer) {
  const { agentId, deviceId, key } = device;
  // The answer names the exact question it answers; the agent approves it only when the digests agree.
  const payload = { questionId: q.id, answer, answeredAt: new Date().toISOString(), questionDigest: q.digest };
  const envelope = await c.sealJson(key, c.context.answer(agentId, deviceId, q.id), payload);
  // The same answer sealed with the question's answer key, so that every recipient can show which one counts.
  const copyKey = q.answerKey !== undefined ? q.answerKey : await answerKey(q.payload);
  const copy = copyKey ? await c.sealJson(copyKey, c.context.answerCopy(agentId, deviceId, q.id), payload) : undefined;
  const entry = { id: outboxId(q.id), type: "answer", questionId: q.id, envelope, copy, queuedAt: Date.now() };
  await store.putOutbox(entry);
  return entry;
}

/**
 * Sends a queued answer; once the relay acknowledged it, it leaves the outbox. Returns the question as the relay
 * states it (`DeviceQuestion`). A failure throws the ApiError and leaves the entry queued: the caller decides
 * (the page retries or tells the person; the service worker leaves it to the page).
 */
export async function sendAnswer(api, entry) {
  const dq = await api.answer(entry.questionId, entry.envelope, entry.copy);
  await store.deleteOutbox(entry.id);
  return dq;
}

/** The answer sealed in an outbox entry or a stored envelope, or null when it does not open. */
export async function openAnswer(device, questionId, envelope) {
  try {
    const { agentId, deviceId, key } = device;
    return (await c.openJson(key, c.context.answer(agentId, deviceId, questionId), envelope)).answer || null;
  } catch {
    return null;
  }
}

const isAnswer = (a) =>
  a !== null &&
  typeof a === "object" &&
  (a.type === "yes" ||
    a.type === "no" ||
    (a.type === "options" && Array.isArray(a.value) && a.value.every((v) => typeof v === "string")) ||
    (a.type === "text" && typeof a.value === "string"));

/**
 * The answer that counts, from the copy the answering device sealed with the question's answer key (for display:
 * the agent decides from the answer sealed for it alone). `q` is `{id, payload, digest}`, `meta` the relay's
 * `answeredBy` and `answerCopy`. Null when there is none, when it does not open, or when it answers another
 * question than the one opened here.
 */
export async function openAnswerCopy(device, q, meta) {
  const { answeredBy, answerCopy } = meta || {};
  if (typeof answeredBy !== "string" || typeof answerCopy !== "string") return null;
  const key = q.answerKey !== undefined ? q.answerKey : await answerKey(q.payload);
  if (!key) return null;
  try {
    const copy = await c.openJson(key, c.context.answerCopy(device.agentId, answeredBy, q.id), answerCopy);
    if (copy.questionId !== q.id || !isAnswer(copy.answer)) return null;
    if (copy.questionDigest !== undefined && copy.questionDigest !== q.digest) return null;
    return copy.answer;
  } catch {
    return null;
  }
}

/** An answer in words: "Approved", "Denied", "Chosen: A, B", "Answered: …". */
export function describeAnswer(a, payload) {
  if (!a) return "";
  switch (a.type) {
    case "yes":
      return "Approved";
    case "no":
      return "Denied";
    case "options":
      return `Chosen: ${a.value.join(", ")}`;
    case "text":
      return `Answered: ${a.value}`;
    default:
      return payload ? payload.kind : "";
  }
}
