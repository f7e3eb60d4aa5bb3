// Several approvals (issue 37; docs/crypto.md §4.7b): a yes/no question may need N distinct owner devices to
// approve. The number is sealed in the question (`approvals`, absent = 1): the agent counts the signed yeses itself.
// The relay keeps each device's first answer and states in clear which devices answered so far (`answers`; while
// the question is pending, each of them approved). A no closes such a question at once: its device says so
// (`closes` on the answer). Shared by the page (app.js) and the service worker (sw.js): words, no DOM here.

/** Most approvals a question may need (pacerelle_core::wire::MAX_APPROVALS). */
export const MAX_APPROVALS = 10;

/** How many distinct devices must approve, as the agent sealed it: 1 when absent, or not a valid count. */
export function approvalsOf(payload) {
  const n = payload ? payload.approvals : undefined;
  if (payload && payload.kind === "yes_no" && Number.isInteger(n) && n >= 2 && n <= MAX_APPROVALS) return n;
  return 1;
}

/** Whether `answer` closes question `payload` at once: a no to a question that needs several approvals. */
export const closes = (payload, answer) => approvalsOf(payload) > 1 && Boolean(answer) && answer.type === "no";

/** The devices that answered so far, as the relay states them (`answers` of its question metadata), each once. */
export function answersOf(meta) {
  const listed = meta && Array.isArray(meta.answers) ? meta.answers : [];
  return [...new Set(listed.filter((d) => typeof d === "string"))];
}

/**
 * Where the approvals of a pending question stand for device `deviceId`: `{needed, given, mine, left}` (`mine`: this
 * device is among those that answered, so it has nothing left to answer), or null for a question one answer decides.
 */
export function tally(payload, meta, deviceId) {
  const needed = approvalsOf(payload);
  if (needed < 2) return null;
  const answered = answersOf(meta);
  const given = Math.min(answered.length, needed);
  return { needed, given, mine: answered.includes(deviceId), left: needed - given };
}

/** "Needs 2 approvals — 1 of 2 so far". */
export const tallyText = (t) => `Needs ${t.needed} approvals — ${t.given} of ${t.needed} so far`;

/** "You approved — waiting for 1 more": what a device that approved reads while the question stays open. */
export const waitingText = (t) =>
  t.left > 0 ? `You approved — waiting for ${t.left} more` : "You approved — waiting for the agent";

/**
 * Whether the relay kept this device's answer and the question stays open (`dq`: the question as the answer
 * request returned it): a yes to a question that needs several approvals, before enough devices approved. Not an
 * error: the answer counts, and the question waits for the others.
 */
export const keptOpen = (payload, dq, deviceId) =>
  approvalsOf(payload) > 1 && Boolean(dq) && dq.state === "pending" && answersOf(dq).includes(deviceId);
