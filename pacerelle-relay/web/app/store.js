// What the web app keeps in this browser, in IndexedDB. One browser holds several pairings, one per agent:
// - "pairing:<agentId>": a pairing — ids, names, the device token, for a Partner-mode user's device the user it
//   answers for (`user`: {externalId, name}) and the product's look (`branding`: {accentColor?, icon?}), and the
//   device key as a non-extractable CryptoKey (page scripts can use it; nothing can read its bytes). Where the
//   browser cannot store a CryptoKey, the key's bytes are kept instead and `keyBytes` says so. Beside it,
//   `signing`: the device's Ed25519 key pair (CryptoKeys, the private one non-extractable), its public key in
//   base64url and whether the relay holds it (docs/crypto.md §4.8); absent where the browser has no Ed25519 or
//   cannot keep them. Pairing again with the same agent replaces that agent's pairing only.
// - "selected": the agentId whose conversation the app shows.
// - "outbox": tasks and answers not yet acknowledged by the relay, kept *sealed* (the envelope and the
//   id chosen for it) so that a retry after a reload sends the same id: the relay stores it once. Each entry
//   names the agent (`agentId`) whose device sends it.
// - "answer:<questionId>": the sealed answer this browser gave, to show it again after a reload.
// Before several pairings (version 1), the one pairing was kept at "device": opening the database moves it to
// "pairing:<agentId>", selected, and names its agent on the outbox's entries, in the same upgrade transaction.

const DB_NAME = "pacerelle";
const DB_VERSION = 2;
const PAIRING = "pairing:";
const SELECTED = "selected";
const KV = "kv";
const OUTBOX = "outbox";

let dbPromise = null;

function db() {
  if (!dbPromise) {
    dbPromise = new Promise((resolve, reject) => {
      const req = indexedDB.open(DB_NAME, DB_VERSION);
      req.onupgradeneeded = (event) => {
        const d = req.result;
        if (!d.objectStoreNames.contains(KV)) d.createObjectStore(KV);
        if (!d.objectStoreNames.contains(OUTBOX)) d.createObjectStore(OUTBOX, { keyPath: "id" });
        if (event.oldVersion >= 1 && event.oldVersion < 2) migrateOnePairing(req.transaction);
      };
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
      req.onblocked = () => reject(new Error("the app's storage is blocked by another tab"));
    });
  }
  return dbPromise;
}

/**
 * Version 1 → 2: the single pairing kept at "device" becomes one of the list (and the selected one); the outbox's
 * entries, all its own, name its agent. Nobody loses their pairing on upgrade.
 */
function migrateOnePairing(t) {
  const kv = t.objectStore(KV);
  const got = kv.get("device");
  got.onsuccess = () => {
    const device = got.result;
    if (!device || !device.agentId) return;
    kv.put(device, PAIRING + device.agentId);
    kv.put(device.agentId, SELECTED);
    kv.delete("device");
    const cursor = t.objectStore(OUTBOX).openCursor();
    cursor.onsuccess = () => {
      const c = cursor.result;
      if (!c) return;
      if (!c.value.agentId) c.update({ ...c.value, agentId: device.agentId });
      c.continue();
    };
  };
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

/** Every stored pairing, oldest first. */
export async function listDevices() {
  const range = IDBKeyRange.bound(PAIRING, PAIRING + "\uffff");
  const all = await tx(KV, "readonly", (s) => wrap(s.getAll(range)));
  return all.sort((a, b) => String(a.pairedAt || "").localeCompare(String(b.pairedAt || "")));
}

/**
 * A stored pairing, or null: the one with `agentId`; without it, the selected one (or, when none is selected or
 * the selected one is gone, the oldest).
 */
export async function loadDevice(agentId) {
  if (agentId) {
    const got = await tx(KV, "readonly", (s) => wrap(s.get(PAIRING + agentId)));
    return got || null;
  }
  const selected = await tx(KV, "readonly", (s) => wrap(s.get(SELECTED)));
  if (selected) {
    const got = await loadDevice(selected);
    if (got) return got;
  }
  const [first] = await listDevices();
  return first || null;
}

/** The pairing whose device is `deviceId` (a push names it), or null. */
export async function findDevice(agentId, deviceId) {
  const device = agentId ? await loadDevice(agentId) : null;
  if (device && device.deviceId === deviceId) return device;
  return (await listDevices()).find((d) => d.deviceId === deviceId && (!agentId || d.agentId === agentId)) || null;
}

/** Makes `agentId`'s pairing the one the app shows. */
export function selectDevice(agentId) {
  return tx(KV, "readwrite", (s) => wrap(s.put(agentId, SELECTED)));
}

/**
 * Stores a pairing (replacing the one of the same agent). `device.key` is a non-extractable CryptoKey; `rawKey`
 * its bytes, used only when the browser refuses to store a CryptoKey (then the bytes are stored and imported
 * again at each start).
 */
export async function saveDevice(device, rawKey) {
  const at = PAIRING + device.agentId;
  try {
    await tx(KV, "readwrite", (s) => wrap(s.put(device, at)));
    return { keyBytes: false };
  } catch (e) {
    if (e && e.name === "DataCloneError" && rawKey) {
      // A browser that cannot keep a CryptoKey keeps no signing key either (`canKeep` refused it at pairing).
      const { key: _unused, signing: _none, ...rest } = device;
      await tx(KV, "readwrite", (s) => wrap(s.put({ ...rest, keyBytes: rawKey }, at)));
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

/**
 * Forgets one agent's pairing and what its device had not sent yet; the other pairings stay as they are. The last
 * pairing gone, everything goes (the answers given, the selection). Without `agentId`, everything.
 */
export async function forgetDevice(agentId) {
  const others = agentId ? (await listDevices()).filter((d) => d.agentId !== agentId) : [];
  if (others.length === 0) {
    await tx(KV, "readwrite", (s) => wrap(s.clear()));
    await tx(OUTBOX, "readwrite", (s) => wrap(s.clear()));
    return;
  }
  await tx(KV, "readwrite", async (s) => {
    await wrap(s.delete(PAIRING + agentId));
    if ((await wrap(s.get(SELECTED))) === agentId) await wrap(s.put(others[0].agentId, SELECTED));
  });
  for (const entry of await listOutbox(agentId)) await deleteOutbox(entry.id);
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

/** The outbox entries of `agentId`'s device (every entry without it), oldest first. */
export async function listOutbox(agentId) {
  const all = await tx(OUTBOX, "readonly", (s) => wrap(s.getAll()));
  return all.filter((e) => !agentId || e.agentId === agentId).sort((a, b) => a.queuedAt - b.queuedAt);
}
