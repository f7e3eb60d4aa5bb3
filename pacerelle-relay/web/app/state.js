// The page's state, owned here and shared by every module of the app: the pairing whose conversation is shown,
// what the page shows of it, the long-poll's cursor and the outbox's retries. Modules read and change `app`'s
// fields; nothing else holds shared mutable state. No DOM here.

import { Backoff } from "./backoff.js";

/** Longest long-poll (the relay caps at 55 s, below the usual 60 s of proxies). */
export const LONG_POLL_WAIT = 55;

/** How often presence is read (states arrive as `update` items; an older relay's are read again at this pace). */
export const STATUS_EVERY_MS = 5000;

/** Most conversation items in one answer of the relay. */
export const PAGE = 200;

/** Largest task or text answer, in UTF-8 bytes. */
export const MAX_TEXT_BYTES = 64 * 1024;

/** The page's state: the pairing shown, what the page shows of its conversation, and how it reaches the relay. */
export const app = {
  device: null, // {agentId, agentName, deviceId, deviceName, role, deviceToken, key, user?, branding?}
  api: null,
  cursor: null, // where the long-poll continues (opaque, issued by the relay)
  entries: new Map(), // item id → {kind, node, …}
  order: [], // task ids in thread order, with the cursor before each (to re-read states)
  questions: new Map(), // question id → {id, payload, digest, meta, node, sending, answer, counted, …}
  pendingAnswers: new Map(), // question id → sealed answer still in the outbox (after a reload)
  connected: null,
  presence: null,
  stopped: false,
  retry: new Backoff(), // the outbox's retries
  reconnect: new Backoff(), // the conversation long-poll's reconnections
  retryTimer: null,
  updates: null, // true when the relay sends `update` items (then states are never read again on a timer)
  focus: null, // the question to show once it is in the thread (a tap on its notification)
  signingReady: Promise.resolve(), // settles once the relay is known to hold this device's signing key, or cannot
  pairings: [], // every pairing this browser holds (the conversation shown is app.device's)
  presences: new Map(), // agentId → presence, for the switcher's dots
  revokedAgentId: null, // the agent whose device was revoked, shown on the revoked screen
  statuses: new Map(), // agentId → its device status (GET /v1/device/status), for the activity word (activity.js)
  status: null, // the shown agent's device status
  waitingBy: new Map(), // agentId → how many of its questions wait for this browser (absent: not read yet)
  generation: 0, // the shown conversation's: its loops end when another agent is shown (no reload)
  pendingShown: new Map(), // question id → what the pending view shows of it ({agent, id, payload, meta, node, …})
};
