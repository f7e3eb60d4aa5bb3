// The relay's HTTP API (docs/relay-api.md), same origin only. Errors carry the relay's stable `code`, and the `kind`
// the app branches on: this file is the one place that names the codes.

/**
 * The kind of each relay error code, as the Rust client's `ErrorKind::of_code` classifies them
 * (pacerelle-client/src/error.rs), with the codes the app answers each in its own way kept apart as kinds of their
 * own: `no_route` (an older relay, not a missing item), `bad_cursor` (read from the start again),
 * `signing_key_exists` (registered already), each `pairing_*` (each has its own words), and `forbidden` (a valid
 * credential of the wrong kind, which is no revocation). "network" is the app's own: the relay was not reached.
 */
const KINDS = {
  unauthorized: ["unauthorized"],
  forbidden: ["forbidden", "registration_closed"],
  device_revoked: ["device_revoked"],
  not_found: ["not_found"],
  user_not_found: ["user_not_found"],
  no_route: ["no_route"],
  invalid_input: ["invalid_input", "invalid_json", "method_not_allowed", "push_endpoint_forbidden"],
  body_too_large: ["body_too_large"],
  bad_cursor: ["bad_cursor"],
  id_conflict: ["id_conflict", "agent_exists"],
  signing_key_exists: ["signing_key_exists"],
  question_id_conflict: ["question_id_conflict"],
  agent_in_use: ["agent_in_use"],
  lease_lost: ["lease_lost"],
  question_closed: ["question_answered", "question_expired", "question_cancelled"],
  no_device: ["no_device"],
  pairing_expired: ["pairing_expired"],
  pairing_claimed: ["pairing_claimed"],
  pairing_proof: ["pairing_proof"],
  roster: ["roster_rollback", "roster_invalid"],
  roster_conflict: ["roster_conflict"],
  rate_limited: ["rate_limited"],
  quota_exceeded: ["quota_exceeded"],
  unavailable: ["unavailable", "request_timeout"],
  network: ["network"],
};
const KIND_OF = new Map(Object.entries(KINDS).flatMap(([kind, codes]) => codes.map((code) => [code, kind])));

/** What a `question_closed` error says of its question: how it was closed before this answer. */
const CLOSED_STATES = new Map([
  ["question_answered", "answered"],
  ["question_expired", "expired"],
  ["question_cancelled", "cancelled"],
]);

/** The kind of a relay error code (see `KINDS`); "internal" for a failure inside the relay, or a code not known here. */
export const kindOf = (code) => KIND_OF.get(code) || "internal";

/**
 * A failed request: `code` is the relay's error code, or "network" when the relay could not be reached; `kind` is
 * what the app branches on (`kindOf`), never the code itself.
 */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
  }

  /** The error's kind (`kindOf`); a failure inside the relay behind a gateway that answered 502–504 is "unavailable". */
  get kind() {
    const kind = kindOf(this.code);
    return kind === "internal" && this.status >= 502 && this.status <= 504 ? "unavailable" : kind;
  }

  /** For a `question_closed` error, how the question was closed: "answered", "expired" or "cancelled"; else null. */
  get closedState() {
    return CLOSED_STATES.get(this.code) || null;
  }

  /**
   * True when the same request may succeed later: the relay was unreachable, overloaded or failing. Not
   * `quota_exceeded` (also 429): the agent has as many tasks waiting as its relay allows, which lasts until it
   * catches up, so the task is refused for good and the person told why (the relay's message says).
   */
  get transient() {
    if (this.kind === "quota_exceeded") return false;
    return this.kind === "network" || this.status === 408 || this.status === 429 || this.status >= 500;
  }
}

/** Whether an error says this device is no longer paired: revoked, or its credential refused. */
export const isRevocation = (e) => e instanceof ApiError && (e.kind === "device_revoked" || e.kind === "unauthorized");

/**
 * One request. `token` is the device's bearer credential; `timeoutMs` ends a request that hangs (a
 * long-poll gets the wait plus a margin); `empty` accepts an answer without a body (`204`).
 */
export async function request(method, path, { body, token, timeoutMs = 20000, empty = false, signal = null } = {}) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (token) headers.Authorization = `Bearer ${token}`;
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  // `signal`: the caller ends the request (a long-poll of a conversation no longer shown frees its connection).
  if (signal) {
    if (signal.aborted) abort.abort();
    else signal.addEventListener("abort", () => abort.abort(), { once: true });
  }
  let res;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      credentials: "omit",
      referrerPolicy: "no-referrer",
      signal: abort.signal,
    });
  } catch {
    throw new ApiError(0, "network", "the relay cannot be reached");
  } finally {
    clearTimeout(timer);
  }
  if (empty && res.ok) return null; // 204: nothing to read
  let json = null;
  try {
    json = await res.json();
  } catch {
    json = null;
  }
  if (!res.ok) {
    const code = (json && json.code) || "http_" + res.status;
    const message = (json && json.error) || `the relay answered ${res.status}`;
    throw new ApiError(res.status, code, message);
  }
  if (json === null) throw new ApiError(res.status, "invalid_response", "the relay's answer is not JSON");
  return json;
}

const enc = encodeURIComponent;

/** The device-side routes. */
export function deviceApi(token) {
  return {
    me: () => request("GET", "/v1/device", { token }),
    leave: () => request("DELETE", "/v1/device", { token }),
    status: () => request("GET", "/v1/device/status", { token, timeoutMs: 10000 }),
    send: (messageId, envelope, session) =>
      request("POST", "/v1/device/messages", { token, body: session ? { messageId, envelope, session } : { messageId, envelope } }),
    conversation: (cursor, wait, signal = null) => {
      const q = new URLSearchParams({ wait: String(wait), updates: "true" });
      if (cursor) q.set("cursor", cursor);
      return request("GET", `/v1/device/conversation?${q}`, { token, timeoutMs: (wait + 15) * 1000, signal });
    },
    questions: (state) =>
      request("GET", "/v1/device/questions" + (state ? `?state=${enc(state)}` : ""), { token }),
    /**
     * Answers a question; `closes` (a no to a question that needs several approvals) closes it whatever the count.
     * Returns the question as it stands: still pending after a yes that others must join.
     */
    answer: (questionId, envelope, copy, closes = false) =>
      request("POST", `/v1/device/questions/${enc(questionId)}/answer`, {
        token,
        body: closes ? { envelope, copy, closes: true } : { envelope, copy },
      }),
    /** Registers a push subscription (`PushSubscription.toJSON()`); the same endpoint again replaces its keys. */
    registerPush: (subscription) => request("POST", "/v1/device/push", { token, body: subscription }),
    /**
     * Registers the signing key of a device paired before signing keys (once; a second time the relay answers
     * `409 signing_key_exists`). Returns the device as the relay lists it (`DeviceInfo`).
     */
    registerSigningKey: (signingKey, signingKeySeal) =>
      request("PUT", "/v1/device/signing-key", { token, body: { signingKey, signingKeySeal } }),
    /** This agent's grants (docs/crypto.md §4.8b) as the relay keeps them: `{grants: [GrantRecord]}`, newest first. */
    grants: () => request("GET", "/v1/device/grants", { token }),
    /** Revokes a grant (owners only; again is the same): the `GrantRecord`, with `revokedAt` and `revokedBy`. */
    revokeGrant: (grantId) => request("DELETE", `/v1/device/grants/${enc(grantId)}`, { token }),
    /** Removes a push subscription; 204 also when the relay does not know it. */
    unregisterPush: (endpoint) => request("DELETE", "/v1/device/push", { token, body: { endpoint }, empty: true }),
  };
}

/** The relay's routes without credential: its version, and the public key it signs pushes with (VAPID). */
export const relayApi = {
  health: () => request("GET", "/v1/health", { timeoutMs: 10000 }),
  pushKey: () => request("GET", "/v1/push/key", { timeoutMs: 10000 }),
};

/** The pairing routes (no credential). */
export const pairingApi = {
  offer: (pairingId) => request("GET", `/v1/pairings/${enc(pairingId)}`),
  /** Claims an offer; `signing` is `{signingKey, signingKeySeal}` (this device's key, clear and sealed) or null. */
  claim: (pairingId, claimSecret, name, signing) =>
    request("POST", `/v1/pairings/${enc(pairingId)}/claim`, { body: { claimSecret, name, ...(signing || {}) } }),
};
