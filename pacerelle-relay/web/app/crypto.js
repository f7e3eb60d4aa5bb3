// Pacerelle cryptography v1 in WebCrypto (docs/crypto.md): strict base64url, HKDF-SHA256, AES-256-GCM
// envelopes with their additional data, pairing derivations and the link, bearer credentials, cursors, and the
// device's Ed25519 signing key with the signed answer (§4.8) and the signed grant (§4.8b).
//
// Runs unchanged in a browser (secure context) and in Node.js ≥ 20, where `node --test` checks it against
// pacerelle-core/tests/vectors/. Errors never carry plaintext or key material.

const subtle = globalThis.crypto.subtle;
const utf8 = new TextEncoder();
const utf8Strict = new TextDecoder("utf-8", { fatal: true });

/** A crypto failure: `kind` is "malformed" (refused before decryption) or "open" (authentication failed). */
export class CryptoError extends Error {
  constructor(kind, message) {
    super(message || (kind === "open" ? "the envelope does not open" : "malformed input"));
    this.name = "CryptoError";
    this.kind = kind;
  }
}

const malformed = (what) => new CryptoError("malformed", what);

// ── bytes ──────────────────────────────────────────────────────────────────────────────────────────

/** UTF-8 bytes of a string. */
export const encodeUtf8 = (text) => utf8.encode(text);

/** A string from UTF-8 bytes; invalid UTF-8 is refused. */
export function decodeUtf8(bytes) {
  try {
    return utf8Strict.decode(bytes);
  } catch {
    throw malformed("invalid UTF-8");
  }
}

/** Concatenation of byte arrays. */
export function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** Byte-wise equality (not constant time: only for public values). */
export function bytesEqual(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** `n` bytes from the secure random generator. */
export const randomBytes = (n) => globalThis.crypto.getRandomValues(new Uint8Array(n));

// ── base64url (RFC 4648 §5, no padding, strict) ───────────────────────────────────────────────────

const B64URL = /^[A-Za-z0-9_-]*$/;

/** base64url without padding. */
export function b64encode(bytes) {
  let bin = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    bin += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** Strict base64url decoding: refuses padding, `+ /`, whitespace, impossible lengths, non-canonical text. */
export function b64decode(text) {
  if (typeof text !== "string" || !B64URL.test(text) || text.length % 4 === 1) {
    throw malformed("malformed base64url");
  }
  let bin;
  try {
    bin = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  } catch {
    throw malformed("malformed base64url");
  }
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  // Unused low bits of the last character must be zero: the re-encoding must give the same text.
  if (b64encode(bytes) !== text) throw malformed("non-canonical base64url");
  return bytes;
}

// ── hashes and keys ───────────────────────────────────────────────────────────────────────────────

/** SHA-256. */
export async function sha256(bytes) {
  return new Uint8Array(await subtle.digest("SHA-256", bytes));
}

/** HKDF-SHA256 (RFC 5869) with a 32-byte output. */
export async function hkdf(ikm, salt, info) {
  const key = await subtle.importKey("raw", ikm, "HKDF", false, ["deriveBits"]);
  const bits = await subtle.deriveBits({ name: "HKDF", hash: "SHA-256", salt, info }, key, 256);
  return new Uint8Array(bits);
}

/** `deviceKey(deviceId)` and `selfKey` from the master secret (§2). The web app never holds `master`. */
export async function contentKeys(master, agentId, deviceId) {
  const salt = encodeUtf8(agentId);
  return {
    deviceKey: await hkdf(master, salt, encodeUtf8("pacerelle/v1/device/" + deviceId)),
    selfKey: await hkdf(master, salt, encodeUtf8("pacerelle/v1/self")),
  };
}

/**
 * An AES-256-GCM key from its 32 bytes. Non-extractable by default: page scripts can use it but cannot
 * read its bytes, and it can be kept in IndexedDB as it is.
 */
export async function importKey(raw, extractable = false) {
  if (!(raw instanceof Uint8Array) || raw.length !== 32) throw malformed("a key is 32 bytes");
  return subtle.importKey("raw", raw, "AES-GCM", extractable, ["encrypt", "decrypt"]);
}

const asKey = async (key) => (key instanceof Uint8Array ? importKey(key) : key);

// ── envelopes (§4) ────────────────────────────────────────────────────────────────────────────────

const AAD_LABEL = encodeUtf8("pacerelle/v1/aad");
const VERSION = 1;
const NONCE_LEN = 12;
const TAG_LEN = 16;
const MIN_ENVELOPE = 1 + NONCE_LEN + TAG_LEN;

/** Directions and kinds of the additional data. */
export const Direction = Object.freeze({ D2A: "d2a", A2D: "a2d", SELF: "self", OFFER: "offer" });
export const Kind = Object.freeze({
  MESSAGE: "message",
  REPLY: "reply",
  CHECKPOINT: "checkpoint",
  QUESTION: "question",
  ANSWER: "answer",
  ANSWER_COPY: "answer_copy",
  NOTIFICATION: "notification",
  OFFER: "offer",
  SIGNING_KEY: "signing_key",
});

/** The additional data: label ‖ 0x01 ‖ five length-prefixed fields. */
export function aad({ agentId, deviceId, direction, kind, objectId }) {
  const parts = [AAD_LABEL, new Uint8Array([VERSION])];
  for (const field of [agentId, deviceId, direction, kind, objectId]) {
    if (typeof field !== "string") throw malformed("an additional-data field is missing");
    const bytes = encodeUtf8(field);
    if (bytes.length > 0xffff) throw malformed("an additional-data field is too long");
    parts.push(new Uint8Array([bytes.length >> 8, bytes.length & 0xff]), bytes);
  }
  return concat(...parts);
}

/** Seals with a given nonce. Only for the vectors: a nonce must never be reused under one key. */
export async function sealWithNonce(key, fields, nonce, plaintext) {
  if (!(nonce instanceof Uint8Array) || nonce.length !== NONCE_LEN) throw malformed("a nonce is 12 bytes");
  const ad = aad(fields);
  const ct = await subtle.encrypt(
    { name: "AES-GCM", iv: nonce, additionalData: ad, tagLength: 128 },
    await asKey(key),
    plaintext,
  );
  return b64encode(concat(new Uint8Array([VERSION]), nonce, new Uint8Array(ct)));
}

/** Seals `plaintext` (bytes) with a fresh random nonce. `key`: a CryptoKey or 32 bytes. */
export function seal(key, fields, plaintext) {
  return sealWithNonce(key, fields, randomBytes(NONCE_LEN), plaintext);
}

/** Opens an envelope to its plaintext bytes; throws a CryptoError ("malformed" or "open"). */
export async function open(key, fields, text) {
  const bytes = b64decode(text);
  if (bytes.length < MIN_ENVELOPE || bytes[0] !== VERSION) throw malformed("malformed envelope");
  const ad = aad(fields);
  try {
    const pt = await subtle.decrypt(
      { name: "AES-GCM", iv: bytes.subarray(1, 1 + NONCE_LEN), additionalData: ad, tagLength: 128 },
      await asKey(key),
      bytes.subarray(1 + NONCE_LEN),
    );
    return new Uint8Array(pt);
  } catch (e) {
    if (e instanceof CryptoError) throw e;
    throw new CryptoError("open");
  }
}

/** Seals a JSON payload. */
export function sealJson(key, fields, payload) {
  return seal(key, fields, encodeUtf8(JSON.stringify(payload)));
}

/** Opens a JSON payload (an object); anything that does not parse is an error. */
export async function openJson(key, fields, text) {
  return (await openJsonBytes(key, fields, text)).value;
}

/** Opens a JSON payload (an object) to `{value, plaintext}`: the object and the exact bytes it was read from. */
export async function openJsonBytes(key, fields, text) {
  const plaintext = await open(key, fields, text);
  return { value: parseJsonObject(plaintext), plaintext };
}

function parseJsonObject(bytes) {
  const json = decodeUtf8(bytes);
  let value;
  try {
    value = JSON.parse(json);
  } catch {
    throw malformed("the payload is not JSON");
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw malformed("the payload is not a JSON object");
  }
  return value;
}

/**
 * The digest an answer names: base64url(SHA-256) of the exact plaintext bytes of the question envelope this
 * device opened. The agent approves only an answer whose digest equals that of its own copy.
 */
export async function questionDigest(plaintext) {
  return b64encode(await sha256(plaintext));
}

/** The additional-data fields of each object (§4.4). */
export const context = {
  task: (agentId, deviceId, messageId) => ({
    agentId, deviceId, direction: Direction.D2A, kind: Kind.MESSAGE, objectId: messageId,
  }),
  reply: (agentId, deviceId, replyId) => ({
    agentId, deviceId, direction: Direction.A2D, kind: Kind.REPLY, objectId: replyId,
  }),
  question: (agentId, deviceId, questionId) => ({
    agentId, deviceId, direction: Direction.A2D, kind: Kind.QUESTION, objectId: questionId,
  }),
  answer: (agentId, deviceId, questionId) => ({
    agentId, deviceId, direction: Direction.D2A, kind: Kind.ANSWER, objectId: questionId,
  }),
  /** The copy of an answer that `deviceId` (the answering device) seals with the question's answer key. */
  answerCopy: (agentId, deviceId, questionId) => ({
    agentId, deviceId, direction: Direction.D2A, kind: Kind.ANSWER_COPY, objectId: questionId,
  }),
  notification: (agentId, deviceId, notificationId) => ({
    agentId, deviceId, direction: Direction.A2D, kind: Kind.NOTIFICATION, objectId: notificationId,
  }),
  offer: (agentId, deviceId, pairingId) => ({
    agentId, deviceId, direction: Direction.OFFER, kind: Kind.OFFER, objectId: pairingId,
  }),
  /** A device's signing key sealed for its agent (§4.8): the device's own id is the object. */
  signingKey: (agentId, deviceId) => ({
    agentId, deviceId, direction: Direction.D2A, kind: Kind.SIGNING_KEY, objectId: deviceId,
  }),
};

// ── ids ───────────────────────────────────────────────────────────────────────────────────────────

const ID = /^[A-Za-z0-9_.:-]{1,128}$/;
const BASE32 = "abcdefghijklmnopqrstuvwxyz234567";

/** True for 1 to 128 characters from `A-Z a-z 0-9 _ - . :`. */
export const isId = (id) => typeof id === "string" && ID.test(id);

/** A fresh id: `prefix_` and 26 lowercase base32 characters (128 random bits). */
export function generateId(prefix) {
  const bytes = randomBytes(16);
  let bits = 0;
  let value = 0;
  let out = "";
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += BASE32[(value << (5 - bits)) & 31];
  return `${prefix}_${out}`;
}

// ── pairing (§3) ──────────────────────────────────────────────────────────────────────────────────

const PAIRING_SALT = encodeUtf8("pacerelle/v1/pairing");
const OFFER_MEMBERS = ["v", "agentId", "agentName", "deviceId", "deviceKey", "role", "expiresAt"];
/** Partner mode's members of an offer, both optional: the user a device answers for, and the agent's look. */
const OFFER_OPTIONAL = ["user", "branding"];
const BRANDING_MEMBERS = ["accentColor", "icon"];
/** Most characters of a branding icon's data URL (`MAX_ICON_LEN` in the core). */
export const MAX_ICON_LEN = 16 * 1024;
const ICON_PREFIXES = ["data:image/png;base64,", "data:image/svg+xml;base64,", "data:image/jpeg;base64,"];
const ACCENT = /^#[0-9A-Fa-f]{6}$/;
const ICON_DATA = /^[A-Za-z0-9+/=]+$/;

/** `pairingId`, `pairingKey`, `claimSecret` and `claimHash` from the 32-byte pairing secret. */
export async function pairingValues(secret) {
  if (!(secret instanceof Uint8Array) || secret.length !== 32) throw malformed("a pairing secret is 32 bytes");
  const id = await hkdf(secret, PAIRING_SALT, encodeUtf8("id"));
  const pairingKey = await hkdf(secret, PAIRING_SALT, encodeUtf8("key"));
  const claimSecret = await hkdf(secret, PAIRING_SALT, encodeUtf8("claim"));
  return {
    pairingId: b64encode(id.subarray(0, 16)),
    pairingKey,
    claimSecret,
    claimHash: await sha256(claimSecret),
  };
}

/** The fragment `v1.<base64url(s)>` (with or without its `#`) to the secret; throws when malformed. */
export function parseFragment(fragment) {
  const text = fragment.startsWith("#") ? fragment.slice(1) : fragment;
  if (!text.startsWith("v1.")) throw malformed("not a pairing link");
  const secret = b64decode(text.slice(3));
  if (secret.length !== 32) throw malformed("not a pairing link");
  return secret;
}

/** A pairing link to `{relayUrl, secret}`; throws when malformed. */
export function parseLink(link) {
  const text = link.trim();
  const hash = text.indexOf("#");
  if (hash < 0) throw malformed("not a pairing link");
  const base = text.slice(0, hash);
  if (!base.endsWith("/pair")) throw malformed("not a pairing link");
  const relayUrl = base.slice(0, -"/pair".length);
  if (!relayUrl.startsWith("http://") && !relayUrl.startsWith("https://")) throw malformed("not a pairing link");
  return { relayUrl, secret: parseFragment(text.slice(hash + 1)) };
}

/** The link for a secret: `<relay>/pair#v1.<secret>`. */
export function pairingLink(relayUrl, secret) {
  return `${relayUrl.replace(/\/+$/, "")}/pair#v1.${b64encode(secret)}`;
}

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const onlyMembers = (obj, allowed) => Object.keys(obj).every((k) => allowed.includes(k));

/**
 * Why a branding (`{accentColor?, icon?}`) cannot be used, or null when it can — `Branding::validate` in the
 * core: an accent colour `#rrggbb`, an icon an inline PNG, SVG or JPEG base64 data URL of at most 16 KiB (inline, so
 * that showing it asks nothing of another server).
 */
export function brandingProblem(branding) {
  if (!isObject(branding)) return "a branding is an object";
  const { accentColor, icon } = branding;
  if (accentColor !== undefined && accentColor !== null) {
    if (typeof accentColor !== "string" || !ACCENT.test(accentColor)) return "an accent colour is written #rrggbb";
  }
  if (icon !== undefined && icon !== null) {
    const prefix = typeof icon === "string" ? ICON_PREFIXES.find((p) => icon.startsWith(p)) : undefined;
    if (!prefix) return "an icon is a data:image/png, image/svg+xml or image/jpeg base64 URL";
    if (icon.length > MAX_ICON_LEN) return "an icon's data URL is at most 16 KiB";
    if (!ICON_DATA.test(icon.slice(prefix.length))) return "an icon's data is not base64";
  }
  return null;
}

/**
 * Opens an offer with the pairing key, bound to the `agentId` and `deviceId` the relay returned, and checks
 * it (§3.5 step 3). Returns the payload, its `deviceKey` decoded to 32 bytes as `deviceKeyBytes`.
 *
 * Partner mode: `user` (`{externalId, name}`, the user this device answers for) and `branding` (`{accentColor?,
 * icon?}`) may be there too; any other member is refused, as is a malformed `user` or a `branding` that is not an
 * object of strings. A branding whose values are wrong (`brandingProblem`) is dropped, not fatal, as the Rust device
 * drops it: the device pairs and shows the default look. An absent (or null) member is left out of the result.
 */
export async function openOffer(pairingKey, pairingId, agentId, deviceId, sealed) {
  const offer = await openJson(pairingKey, context.offer(agentId, deviceId, pairingId), sealed);
  const keys = Object.keys(offer);
  if (!OFFER_MEMBERS.every((k) => keys.includes(k)) || !onlyMembers(offer, [...OFFER_MEMBERS, ...OFFER_OPTIONAL])) {
    throw malformed("the offer has unexpected members");
  }
  if (offer.v !== 1 || offer.agentId !== agentId || offer.deviceId !== deviceId) {
    throw new CryptoError("open", "the offer does not match the relay's answer");
  }
  if (typeof offer.agentName !== "string" || !["owner", "user"].includes(offer.role)) {
    throw malformed("malformed offer");
  }
  if (typeof offer.expiresAt !== "string" || typeof offer.deviceKey !== "string") throw malformed("malformed offer");
  const { user, branding, ...rest } = offer;
  const result = { ...rest };
  if (user !== undefined && user !== null) {
    if (
      !isObject(user) ||
      !onlyMembers(user, ["externalId", "name"]) ||
      typeof user.externalId !== "string" ||
      typeof user.name !== "string" ||
      !user.externalId ||
      !user.name
    ) {
      throw malformed("the offer's user is malformed");
    }
    result.user = { externalId: user.externalId, name: user.name };
  }
  if (branding !== undefined && branding !== null) {
    if (
      !isObject(branding) ||
      !onlyMembers(branding, BRANDING_MEMBERS) ||
      !BRANDING_MEMBERS.every((k) => branding[k] === undefined || branding[k] === null || typeof branding[k] === "string")
    ) {
      throw malformed("the offer's branding is malformed");
    }
    if (brandingProblem(branding) === null) {
      result.branding = {};
      for (const k of BRANDING_MEMBERS) if (typeof branding[k] === "string") result.branding[k] = branding[k];
    }
  }
  const deviceKeyBytes = b64decode(offer.deviceKey);
  if (deviceKeyBytes.length !== 32) throw malformed("the offer's key is not 32 bytes");
  return { ...result, deviceKeyBytes };
}

// ── credentials (§1) ──────────────────────────────────────────────────────────────────────────────

const TOKEN_LABEL = encodeUtf8("pacerelle/v1/token");

/** Parses an agent token `pcr1_…` to `{auth, master}`; throws when malformed or the checksum is wrong. */
export async function parseAgentToken(token) {
  const text = token.trim();
  if (!text.startsWith("pcr1_")) throw malformed("not an agent token");
  const bytes = b64decode(text.slice(5));
  if (bytes.length !== 68) throw malformed("not an agent token");
  const auth = bytes.slice(0, 32);
  const master = bytes.slice(32, 64);
  const checksum = (await sha256(concat(TOKEN_LABEL, auth, master))).subarray(0, 4);
  if (!bytesEqual(checksum, bytes.subarray(64))) throw malformed("the token's checksum is wrong");
  return { auth, master };
}

/** The agent token for `auth` and `master`, and its checksum. */
export async function agentToken(auth, master) {
  const checksum = (await sha256(concat(TOKEN_LABEL, auth, master))).slice(0, 4);
  return { token: "pcr1_" + b64encode(concat(auth, master, checksum)), checksum };
}

/** Splits a bearer credential `principalId.secret` at its last dot; throws unless well formed. */
export function splitBearer(bearer) {
  const dot = bearer.lastIndexOf(".");
  if (dot < 0) throw malformed("malformed credential");
  const principalId = bearer.slice(0, dot);
  if (!isId(principalId)) throw malformed("malformed credential");
  const secret = b64decode(bearer.slice(dot + 1));
  if (secret.length !== 32) throw malformed("malformed credential");
  return { principalId, secret };
}

// ── cursors (§6): opaque to clients; here only so that the vectors pin them down ──────────────────

const MAX_SEQ = (1n << 63n) - 1n;

/** `c1.` ‖ base64url(seq, 8 bytes big-endian). `seq` is a BigInt. */
export function encodeCursor(seq) {
  if (typeof seq !== "bigint" || seq < 0n || seq > MAX_SEQ) throw malformed("cursor out of range");
  const bytes = new Uint8Array(8);
  new DataView(bytes.buffer).setBigUint64(0, seq);
  return "c1." + b64encode(bytes);
}

/** The sequence number of a cursor (BigInt); throws unless the relay could have issued it. */
export function parseCursor(text) {
  if (!text.startsWith("c1.")) throw malformed("bad cursor");
  const bytes = b64decode(text.slice(3));
  if (bytes.length !== 8) throw malformed("bad cursor");
  const seq = new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0);
  if (seq > MAX_SEQ) throw malformed("bad cursor");
  return seq;
}

// ── signed answers (§4.8) ─────────────────────────────────────────────────────────────────────────

const ANSWER_CONTEXT = encodeUtf8("pacerelle/v1/answer-signature");
/** Length of an Ed25519 public key and of a signature. */
export const PUBLIC_KEY_LEN = 32;
export const SIGNATURE_LEN = 64;
const ED25519 = { name: "Ed25519" };
/** What an answer's time looks like on the wire, and so in the signed bytes: `YYYY-MM-DDTHH:MM:SS.mmmZ`. */
const WIRE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** `u32 BE length ‖ UTF-8` of a text. */
function field(text) {
  if (typeof text !== "string") throw malformed("a signed field is missing");
  const bytes = encodeUtf8(text);
  const out = new Uint8Array(4 + bytes.length);
  new DataView(out.buffer).setUint32(0, bytes.length);
  out.set(bytes, 4);
  return out;
}

function u32(n) {
  const out = new Uint8Array(4);
  new DataView(out.buffer).setUint32(0, n);
  return out;
}

/**
 * The bytes a device signs when it answers (`SignedAnswer::bytes` in the core):
 * `"pacerelle/v1/answer-signature" ‖ 0x01 ‖ field(agentId) ‖ field(deviceId) ‖ field(questionId) ‖
 * field(questionDigest) ‖ field(answeredAt) ‖ field(answerType) ‖ u32(n) ‖ field(value₁) … field(valueₙ)`.
 * `answeredAt` is the payload's text exactly (`YYYY-MM-DDTHH:MM:SS.mmmZ`, as the agent writes it back); the values
 * are none (yes, no), the chosen options in order, or the text. Anything else is refused (CryptoError "malformed").
 */
export function signedAnswerBytes({ agentId, deviceId, questionId, questionDigest, answeredAt, answer }) {
  if (typeof answeredAt !== "string" || !WIRE_TIME.test(answeredAt)) throw malformed("answeredAt is not wire time");
  let values;
  switch (answer && answer.type) {
    case "yes":
    case "no":
      values = [];
      break;
    case "options":
      if (!Array.isArray(answer.value)) throw malformed("malformed answer");
      values = answer.value;
      break;
    case "text":
      values = [answer.value];
      break;
    default:
      throw malformed("malformed answer");
  }
  return concat(
    ANSWER_CONTEXT,
    new Uint8Array([VERSION]),
    field(agentId),
    field(deviceId),
    field(questionId),
    field(questionDigest),
    field(answeredAt),
    field(answer.type),
    u32(values.length),
    ...values.map(field),
  );
}

/**
 * A new Ed25519 key pair for this device: `{privateKey, publicKey, publicRaw}` with a non-extractable private key
 * (page scripts can sign with it; nothing can read it) and the 32 raw bytes of the public key. Null where WebCrypto
 * has no Ed25519 (the app then pairs without a key and its answers go unsigned).
 */
export async function generateSigningKey() {
  let pair;
  try {
    pair = await subtle.generateKey(ED25519, false, ["sign", "verify"]);
  } catch {
    return null;
  }
  const publicRaw = new Uint8Array(await subtle.exportKey("raw", pair.publicKey));
  if (publicRaw.length !== PUBLIC_KEY_LEN) return null;
  return { privateKey: pair.privateKey, publicKey: pair.publicKey, publicRaw };
}

/** base64url of the Ed25519 signature of `bytes` with a private CryptoKey. */
export async function sign(privateKey, bytes) {
  return b64encode(new Uint8Array(await subtle.sign(ED25519, privateKey, bytes)));
}

/** Whether `signature` (base64url, 64 bytes) is the signature of `bytes` by the raw public key `publicRaw`. */
export async function verify(publicRaw, bytes, signature) {
  let sig;
  try {
    sig = b64decode(signature);
  } catch {
    return false;
  }
  if (!(publicRaw instanceof Uint8Array) || publicRaw.length !== PUBLIC_KEY_LEN || sig.length !== SIGNATURE_LEN) {
    return false;
  }
  try {
    const key = await subtle.importKey("raw", publicRaw, ED25519, false, ["verify"]);
    return await subtle.verify(ED25519, key, sig, bytes);
  } catch {
    return false;
  }
}

/** Signs an answer (the fields of `signedAnswerBytes`) with the device's private key: base64url of 64 bytes. */
export function signAnswer(privateKey, fields) {
  return sign(privateKey, signedAnswerBytes(fields));
}

// ── signed grants (§4.8b) ─────────────────────────────────────────────────────────────────────────

const GRANT_CONTEXT = encodeUtf8("pacerelle/v1/grant-signature");
/** How a grant's command is compared with a call's (`CommandMatch` in the core). */
export const COMMAND_MATCHES = Object.freeze(["exact", "prefix"]);

/**
 * The bytes a device signs when it grants (`SignedGrant::bytes` in the core):
 * `"pacerelle/v1/grant-signature" ‖ 0x01 ‖ field(agentId) ‖ field(deviceId) ‖ field(questionId) ‖
 * field(questionDigest) ‖ field(grantedAt) ‖ field(expiresAt) ‖ field(policy) ‖ field(tool) ‖ field(command) ‖
 * field(match) ‖ field(folder)`. `grantedAt` is the answer's `answeredAt` and `grant` is `{scope, expiresAt,
 * policy}` (its signature is not signed); both times in the wire form, `command` and `match` empty when the scope
 * has none. Anything else is refused (CryptoError "malformed").
 */
export function signedGrantBytes({ agentId, deviceId, questionId, questionDigest, grantedAt, grant }) {
  if (typeof grantedAt !== "string" || !WIRE_TIME.test(grantedAt)) throw malformed("grantedAt is not wire time");
  if (!grant || typeof grant.expiresAt !== "string" || !WIRE_TIME.test(grant.expiresAt)) {
    throw malformed("a grant's expiresAt is not wire time");
  }
  const scope = grant.scope;
  if (!scope || typeof scope.tool !== "string" || typeof scope.folder !== "string") throw malformed("malformed scope");
  const command = scope.command === undefined || scope.command === null ? null : scope.command;
  const match = scope.match === undefined || scope.match === null ? null : scope.match;
  if ((command === null) !== (match === null) || (match !== null && !COMMAND_MATCHES.includes(match))) {
    throw malformed("a scope's command and its match go together");
  }
  return concat(
    GRANT_CONTEXT,
    new Uint8Array([VERSION]),
    field(agentId),
    field(deviceId),
    field(questionId),
    field(questionDigest),
    field(grantedAt),
    field(grant.expiresAt),
    field(grant.policy),
    field(scope.tool),
    field(command === null ? "" : command),
    field(match === null ? "" : match),
    field(scope.folder),
  );
}

/** Signs a grant (the fields of `signedGrantBytes`) with the device's private key: base64url of 64 bytes. */
export function signGrant(privateKey, fields) {
  return sign(privateKey, signedGrantBytes(fields));
}

/**
 * What a person compares between this device and an answer log: the first 12 bytes of SHA-256 of the raw public
 * key, in lower-case hex, in six groups of four (`3f2a 91c0 …`).
 */
export async function fingerprint(publicRaw) {
  const digest = await sha256(publicRaw);
  const groups = [];
  for (let i = 0; i < 12; i += 2) {
    groups.push([digest[i], digest[i + 1]].map((b) => b.toString(16).padStart(2, "0")).join(""));
  }
  return groups.join(" ");
}

/**
 * The device's public key as it reaches its agent: `{signingKey, signingKeySeal}`, the key in base64url and the
 * `SigningKeyPayload` `{"v":1,"agentId","deviceId","signingKey"}` sealed with the device key, so that the relay,
 * which lists the clear copy, cannot substitute it.
 */
export async function sealSigningKey(deviceKey, agentId, deviceId, publicRaw) {
  const signingKey = b64encode(publicRaw);
  const signingKeySeal = await sealJson(deviceKey, context.signingKey(agentId, deviceId), {
    v: 1,
    agentId,
    deviceId,
    signingKey,
  });
  return { signingKey, signingKeySeal };
}
