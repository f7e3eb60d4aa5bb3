// Questions and their answers, shared by the page (app.js) and the service worker (sw.js): opening a question
// envelope, signing and sealing an answer, queueing it in the outbox and sending it. One code path, so an answer
// given from a notification is the same answer, under the same outbox id, as one given with the app's buttons.
// Also the device's signing key (docs/crypto.md §4.8): drawn at pairing, or at a start for a browser paired before
// keys existed (registered once with the relay), kept in IndexedDB beside the pairing; and the grant a yes may carry
// (§4.8b), signed with that key.

import * as c from "./crypto.js";
import * as store from "./store.js";
import { GrantError, grantFor, readOffer } from "./grant.js";
import { closes } from "./approvals.js";

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
 * relay acknowledges or refuses it for good. Returns the outbox entry, with `closes` for a no to a question that
 * needs several approvals (it denies at once). The relay stores one answer per question and device: a retry, or the
 * page and a notification answering at once, cannot record two.
 *
 * `choice` (`{scope, seconds}`, with a yes to a question that offers grants): the yes also grants the same calls of
 * the offered scope at that position (0: the exact call) for that long, signed with this device's key as the Rust
 * device signs it (§4.8b). A choice outside the offer, or a device that cannot sign, throws a GrantError and
 * queues nothing.
 */
export async function queueAnswer(device, q, answer, choice = null) {
  const { agentId, deviceId, key } = device;
  // The answer names the exact question it answers; the agent approves it only when the digests agree.
  const payload = { questionId: q.id, answer, answeredAt: new Date().toISOString(), questionDigest: q.digest };
  const grant = choice ? await signedGrant(device, q, answer, choice, payload.answeredAt) : null;
  // Signed with this device's own key when the relay holds it (the agent then refuses an unsigned answer).
  const signature = await signatureOf(device, payload);
  if (signature) payload.signature = signature;
  if (grant) payload.grant = grant;
  const envelope = await c.sealJson(key, c.context.answer(agentId, deviceId, q.id), payload);
  // The same answer sealed with the question's answer key, so that every recipient can show which one counts.
  const copyKey = q.answerKey !== undefined ? q.answerKey : await answerKey(q.payload);
  const copy = copyKey ? await c.sealJson(copyKey, c.context.answerCopy(agentId, deviceId, q.id), payload) : undefined;
  const entry = { id: outboxId(q.id), type: "answer", agentId, questionId: q.id, envelope, copy, queuedAt: Date.now() };
  // A no to a question that needs several approvals denies at once: it closes the question (approvals.js).
  if (closes(q.payload, answer)) entry.closes = true;
  await store.putOutbox(entry);
  return entry;
}

/**
 * Sends a queued answer; once the relay acknowledged it, it leaves the outbox. Returns the question as the relay
 * states it (`DeviceQuestion`): still pending after a yes to a question that needs several approvals, with this
 * device among its `answers`. A failure throws the ApiError and leaves the entry queued: the caller decides
 * (the page retries or tells the person; the service worker leaves it to the page).
 */
export async function sendAnswer(api, entry) {
  const dq = await api.answer(entry.questionId, entry.envelope, entry.copy, entry.closes === true);
  await store.deleteOutbox(entry.id);
  return dq;
}

/** The answer sealed in an outbox entry or a stored envelope, or null when it does not open. */
export async function openAnswer(device, questionId, envelope) {
  const payload = await openAnswerPayload(device, questionId, envelope);
  return payload ? payload.answer || null : null;
}

/** The whole answer payload sealed in an outbox entry or a stored envelope (its grant too), or null. */
export async function openAnswerPayload(device, questionId, envelope) {
  try {
    const { agentId, deviceId, key } = device;
    return await c.openJson(key, c.context.answer(agentId, deviceId, questionId), envelope);
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
 * True when the relay says the person answered at the computer, through the agent (`channel` "host"), not on a
 * device: never "this device", whatever else the metadata says.
 */
export const answeredAtComputer = (meta) => !!meta && meta.channel === "host";

/**
 * The answer that counts, from the copy the answering device sealed with the question's answer key (for display:
 * the agent decides from the answer sealed for it alone). `q` is `{id, payload, digest}`, `meta` the relay's
 * `answeredBy`, `channel` and `answerCopy`. An answer given at the computer has no `answeredBy`: its copy is
 * sealed by the agent, under the context of device "". Null when there is none, when it does not open, or when it
 * answers another question than the one opened here.
 */
export async function openAnswerCopy(device, q, meta) {
  const copy = await openCopy(device, q, meta);
  return copy ? copy.answer : null;
}

/**
 * The whole answer payload of that copy (`{questionId, answer, answeredAt, …, grant?}`), checked as
 * `openAnswerCopy` checks it, or null: where the grant given with a yes is read for display.
 */
export async function openCopy(device, q, meta) {
  const { answeredBy, answerCopy } = meta || {};
  if (typeof answerCopy !== "string") return null;
  let sealedBy;
  if (answeredAtComputer(meta)) {
    // At the computer and by a device at once: the relay's metadata disagrees with itself.
    if (answeredBy !== undefined && answeredBy !== null) return null;
    sealedBy = "";
  } else if (typeof answeredBy === "string") {
    sealedBy = answeredBy;
  } else {
    return null;
  }
  const key = q.answerKey !== undefined ? q.answerKey : await answerKey(q.payload);
  if (!key) return null;
  try {
    const copy = await c.openJson(key, c.context.answerCopy(device.agentId, sealedBy, q.id), answerCopy);
    if (copy.questionId !== q.id || !isAnswer(copy.answer)) return null;
    // A copy names the exact question it answers (docs/crypto.md §4.5): one without the digest, or for
    // another question stored under this id, is not shown.
    if (typeof copy.questionDigest !== "string" || copy.questionDigest !== q.digest) return null;
    return copy;
  } catch {
    return null;
  }
}

/** An answer as typed: "yes", "no", the chosen options joined by ", ", or the text. */
export function answerText(a) {
  if (!a) return "";
  switch (a.type) {
    case "yes":
      return "yes";
    case "no":
      return "no";
    case "options":
      return a.value.join(", ");
    case "text":
      return a.value;
    default:
      return "";
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

// ── the device's signing key ──────────────────────────────────────────────────────────────────────

/**
 * A new Ed25519 key pair this browser can keep: `{privateKey, publicKey, signingKey, registered: false}` (CryptoKeys,
 * the private one non-extractable, and the public key in base64url). Null where WebCrypto has no Ed25519 or the
 * browser cannot store CryptoKeys: the app then pairs without a key, and its answers go unsigned.
 */
export async function newSigningKey() {
  const pair = await c.generateSigningKey();
  if (!pair) return null;
  const signing = {
    privateKey: pair.privateKey,
    publicKey: pair.publicKey,
    signingKey: c.b64encode(pair.publicRaw),
    registered: false,
  };
  return (await store.canKeep(signing)) ? signing : null;
}

/**
 * What the settings say of this device's signing key: `{state, fingerprint}`. `state` is "signed" (the relay holds
 * the key: every answer is signed), "pending" (kept here, not yet registered: answers unsigned until it is),
 * "conflict" (the relay lists another key for this device: its answers are refused, pair again) or "unsigned" (no
 * key: the browser has no Ed25519 in WebCrypto).
 */
export async function signingStatus(device) {
  const s = device && device.signing;
  if (!s) return { state: "unsigned", fingerprint: null };
  const fingerprint = await c.fingerprint(c.b64decode(s.signingKey));
  return { state: s.conflict ? "conflict" : s.registered ? "signed" : "pending", fingerprint };
}

/** Whether this device signs its answers now: it keeps a key the relay lists (and so the agent pins). */
export const canSign = (device) => {
  const s = device && device.signing;
  return Boolean(s && s.registered && !s.conflict && s.privateKey);
};

/** The signature of an answer payload by this device, or null when it does not sign (no key, not registered yet). */
async function signatureOf(device, payload) {
  if (!canSign(device)) return null;
  const s = device.signing;
  return c.signAnswer(s.privateKey, {
    agentId: device.agentId,
    deviceId: device.deviceId,
    questionId: payload.questionId,
    questionDigest: payload.questionDigest,
    answeredAt: payload.answeredAt,
    answer: payload.answer,
  });
}

/**
 * The grant of `choice` on question `q`, answered `yes` at `answeredAt`: `{scope, expiresAt, policy, signature}`,
 * the signature over the grant's bytes (`c.signedGrantBytes`: this agent and device, the question's id and digest
 * as opened here, the answer's time). Throws a GrantError when it cannot be made.
 */
async function signedGrant(device, q, answer, choice, answeredAt) {
  if (!answer || answer.type !== "yes") throw new GrantError("A grant goes with a yes.");
  const { offer, problem } = readOffer(q.payload);
  if (!offer) throw new GrantError(problem || "This question offers no grant: answer Allow or Deny.");
  // An unsigned grant never counts: the agent checks it with the key it pinned for this device.
  if (!canSign(device)) {
    throw new GrantError("This browser has no signing key the relay lists, so it cannot grant: answer Allow or Deny (the settings say why).");
  }
  const grant = grantFor(offer, choice, answeredAt);
  grant.signature = await c.signGrant(device.signing.privateKey, {
    agentId: device.agentId,
    deviceId: device.deviceId,
    questionId: q.id,
    questionDigest: q.digest,
    grantedAt: answeredAt,
    grant,
  });
  return grant;
}

/**
 * Makes sure the relay holds this device's signing key, for the page at each start: a browser paired before signing
 * keys (or whose claim reached a relay that ignored the key, or that has Ed25519 since an update) draws a key, keeps
 * it, then registers it once (`PUT /v1/device/signing-key`, sealed with the device key). A key the relay already
 * lists is checked against the one kept here. Returns the stored pairing, updated. The key is kept before the relay
 * hears of it, so the relay never holds a key this browser lost; what cannot be done now (the relay unreachable, an
 * older relay) is tried again at the next start, and answers stay unsigned meanwhile. `agentId` names the pairing.
 */
export async function ensureSigningKey(api, agentId) {
  let device = await store.loadDevice(agentId);
  if (!device || device.keyBytes) return device; // a browser that cannot keep CryptoKeys keeps no signing key
  if (device.signing && (device.signing.registered || device.signing.conflict)) return device;
  if (!device.signing) {
    const signing = await newSigningKey();
    if (!signing) return device;
    device = { ...device, signing };
    await store.saveDevice(device);
  }
  const s = device.signing;
  let listed;
  try {
    listed = (await api.me()).device.signingKey;
    if (!listed) {
      const sealed = await c.sealSigningKey(await deviceKey(device), device.agentId, device.deviceId, c.b64decode(s.signingKey));
      try {
        listed = (await api.registerSigningKey(sealed.signingKey, sealed.signingKeySeal)).signingKey;
      } catch (e) {
        // Registered by an earlier start whose answer was lost: the relay lists it.
        if (e.kind !== "signing_key_exists") throw e;
        listed = (await api.me()).device.signingKey;
      }
    }
  } catch {
    return device;
  }
  if (!listed) return device;
  device = { ...device, signing: listed === s.signingKey ? { ...s, registered: true } : { ...s, conflict: true } };
  await store.saveDevice(device);
  return device;
}
