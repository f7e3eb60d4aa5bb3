// The relay's HTTP API (docs/relay-api.md), same origin only. Errors carry the relay's stable `code`.

/** A failed request: `code` is the relay's error code, or "network" when the relay could not be reached. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
  }

  /**
   * True when the same request may succeed later: the relay was unreachable, overloaded or failing. Not
   * `quota_exceeded` (also 429): the agent has as many tasks waiting as its relay allows, which lasts until it
   * catches up, so the task is refused for good and the person told why (the relay's message says).
   */
  get transient() {
    if (this.code === "quota_exceeded") return false;
    return this.code === "network" || this.status === 408 || this.status === 429 || this.status >= 500;
  }
}

/**
 * One request. `token` is the device's bearer credential; `timeoutMs` ends a request that hangs (a
 * long-poll gets the wait plus a margin); `empty` accepts an answer without a body (`204`).
 */
export async function request(method, path, { body, token, timeoutMs = 20000, empty = false } = {}) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (token) headers.Authorization = `Bearer ${token}`;
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), timeoutMs);
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
    send: (messageId, envelope) => request("POST", "/v1/device/messages", { token, body: { messageId, envelope } }),
    conversation: (cursor, wait) => {
      const q = new URLSearchParams({ wait: String(wait), updates: "true" });
      if (cursor) q.set("cursor", cursor);
      return request("GET", `/v1/device/conversation?${q}`, { token, timeoutMs: (wait + 15) * 1000 });
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
