// What an agent is doing, in one word, from its device status (`GET /v1/device/status`): the rule the Rust side
// (core, CLI, FFI) states too, kept here in one function so that it can be checked against the same vectors.
// No DOM here.

/** The four words, most urgent first. */
export const ACTIVITIES = ["asking", "working", "listening", "offline"];

/**
 * The word for an agent, from its device status JSON `{presence, messages: {inProgress}, openQuestions?}` and
 * `waiting`, the app's own count of this agent's questions waiting for this device when it has read them (else
 * `undefined`). The app sees questions arrive and close as they happen, the status is read every few seconds: the
 * app's count, when it has one, is the fresher and decides; else the status's `openQuestions` (absent from an older
 * relay: none). Then, in order, as `wire::Activity::of` (pacerelle-core/tests/vectors/activity.json):
 * - `asking`: a question of this agent waits for this device;
 * - `working`: presence busy or waiting_confirmation, or tasks delivered and not processed (messages.inProgress > 0);
 * - `listening`: presence listening or connected (a wait is parked, or a session is connected);
 * - `offline`: else (also when the status is unknown).
 */
export function activityOf(status, waiting = undefined) {
  const st = status || {};
  const open = typeof waiting === "number" ? waiting : typeof st.openQuestions === "number" ? st.openQuestions : 0;
  if (open > 0) return "asking";
  const inProgress = (st.messages && Number(st.messages.inProgress)) || 0;
  if (st.presence === "busy" || st.presence === "waiting_confirmation" || inProgress > 0) return "working";
  if (st.presence === "listening" || st.presence === "connected") return "listening";
  return "offline";
}

/** The word as the switcher and the overview show it. */
export const ACTIVITY_WORDS = {
  asking: "Asking — a question waits for you",
  working: "Working",
  listening: "Listening",
  offline: "Offline",
};
