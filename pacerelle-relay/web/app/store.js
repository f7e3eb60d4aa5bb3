// What the web app keeps in this browser, in IndexedDB:
// - "device": the pairing — ids, names, the device token, for a Partner-mode user's device the user it answers
//   for (`user`: {externalId, name}) and the product's look (`branding`: {accentColor?, icon?}), and the device key
//   as a non-extractable CryptoKey (page scripts can use it; nothing can read its bytes). Where the browser
//   cannot store a CryptoKey, the key's bytes are kept instead and `keyBytes` says so. Beside it, `signing`: the
//   device's Ed25519 key pair (CryptoKeys, the private one non-extractable), its public key in base64url and
//   whether the relay holds it (docs/crypto.md §4.8); absent where the browser has no Ed25519 or cannot keep them.
// - "outbox": tasks and answers not yet acknowledged by the relay, kept *sealed* (the envelope and the
//   id chosen for it) so that a retry after a reload sends the same id: the relay stores it once.
// - "answer:<questionId>": the sealed answer this browser gave, to show it again after a reload.

const DB_NAME = "pacerelle";
const DB_VERSION = 1;
const KV = "kv";
const OUTBOX = "outbox";

let dbPromise = null;

function db() {
  if (!dbPromise) {
    dbPromise = new Promise((resolve, reject) => {
      const req = indexedDB.open(DB_NAME, DB_VERSION);
      req.onupgradeneeded = () => {
        const d = req.result;
        if (!d.objectStoreNames.contains(KV)) d.createObjectStore(KV);
        if (!d.objectStoreNames.contains(OUTBOX)) d.createObjectStore(OUTBOX, { keyPath: "id" });
      };
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
      req.onblocked = () => reject(new Error("the app's storage is blocked by another tab"));
    });
  }
  return dbPromise;
}

async function tx(store, mode, fn) {
  const d = await db();
  return new Promise((resolve, reject) => {
    const t = d.transaction(store, mode);
    let result;
    Promise.resolve(fn(t.objectStore(store))).then((r) => {
      result = r;
    }, reject);
    t.oncomplete = () => resolve(result);
    t.onerror = () => reject(t.error);
    t.onabort = () => reject(t.error || new Error("storage transaction aborted"));
  });
}

const wrap = (req) =>
  new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });

/** The stored pairing, or null. */
export async function loadDevice() {
  const got = await tx(KV, "readonly", (s) => wrap(s.get("device")));
  return got || null;
}

/**
 * Stores the pairing. `device.key` is a non-extractable CryptoKey; `rawKey` its bytes, used only when the
 * browser refuses to store a CryptoKey (then the bytes are stored and imported again at each start).
 */
export async function saveDevice(device, rawKey) {
  try {
    await tx(KV, "readwrite", (s) => wrap(s.put(device, "device")));
    return { keyBytes: false };
  } catch (e) {
    if (e && e.name === "DataCloneError" && rawKey) {
      // A browser that cannot keep a CryptoKey keeps no signing key either (`canKeep` refused it at pairing).
      const { key: _unused, signing: _none, ...rest } = device;
      await tx(KV, "readwrite", (s) => wrap(s.put({ ...rest, keyBytes: rawKey }, "device")));
      return { keyBytes: true };
    }
    throw e;
  }
}

/** Whether this browser can keep `value` (CryptoKeys, say) in its storage: written once and deleted. */
export async function canKeep(value) {
  try {
    await tx(KV, "readwrite", (s) => wrap(s.put(value, "probe")));
    await tx(KV, "readwrite", (s) => wrap(s.delete("probe")));
    return true;
  } catch {
    return false;
  }
}

/** Forgets the pairing, the answers given and everything not yet sent. */
export async function forgetDevice() {
  await tx(KV, "readwrite", (s) => wrap(s.clear()));
  await tx(OUTBOX, "readwrite", (s) => wrap(s.clear()));
}

/** Keeps the sealed answer given to a question, to show it again after a reload (the relay does not). */
export function saveAnswer(questionId, envelope) {
  return tx(KV, "readwrite", (s) => wrap(s.put(envelope, `answer:${questionId}`)));
}

/** The sealed answer given to a question from this browser, or null. */
export async function loadAnswer(questionId) {
  const got = await tx(KV, "readonly", (s) => wrap(s.get(`answer:${questionId}`)));
  return got || null;
}

/** Adds or replaces an outbox entry `{id, type, …}`. */
export function putOutbox(entry) {
  return tx(OUTBOX, "readwrite", (s) => wrap(s.put(entry)));
}

/** Removes an outbox entry once the relay acknowledged it (or refused it for good). */
export function deleteOutbox(id) {
  return tx(OUTBOX, "readwrite", (s) => wrap(s.delete(id)));
}

/** Every outbox entry, oldest first. */
export async function listOutbox() {
  const all = await tx(OUTBOX, "readonly", (s) => wrap(s.getAll()));
  return all.sort((a, b) => a.queuedAt - b.queuedAt);
}
