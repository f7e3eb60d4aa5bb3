// What an agent is doing, in one word, from its device status (`GET /v1/device/status`): the rule the Rust side
// (core, CLI, FFI) states too, kept here in one function so that it can be checked against the same vectors.
// No DOM here.

/** The four words, most urgent first. */
export const ACTIVITIES = ["asking", "working", "listening", "offline"];

/**
 * The word for an agent, from its device status JSON `{presence, messages: {inProgress}, openQuestions?}` and
 * `waiting`, the app's own count of its questions waiting for this device (used when the relay, an older one,
 * does not state `openQuestions`). In order:
 * - `asking`: a question of this agent waits for this device (openQuestions > 0);
 * - `working`: presence busy or waiting_confirmation, or tasks delivered and not processed (messages.inProgress > 0);
 * - `listening`: presence listening or connected (a wait is parked, or a session is connected);
 * - `offline`: else (also when the status is unknown).
 */
export function activityOf(status, waiting = 0) {
  const st = status || {};
  const open = typeof st.openQuestions === "number" ? st.openQuestions : Number(waiting) || 0;
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
