// What a question that needs several approvals shows on its card, in the conversation and in the pending view
// (approvals.js has the rules): how many approvals it needs and has so far, and, on a device that approved, that it
// waits for the others — with no buttons left for that device; and, read again closed, how it ended.

import { tallyText, waitingText } from "./approvals.js";
import { answeredAtComputer, describeAnswer, openCopy } from "./answer.js";

/** "Needs 2 approvals — 1 of 2 so far", after one mark per approval needed (filled for those given). */
export function tallyLine(t) {
  const line = document.createElement("p");
  line.className = "q-approvals";
  line.dataset.given = String(t.given);
  line.dataset.needed = String(t.needed);
  const marks = document.createElement("span");
  marks.className = "approval-marks";
  marks.setAttribute("aria-hidden", "true");
  for (let i = 0; i < t.needed; i++) {
    const mark = document.createElement("span");
    mark.className = i < t.given ? "approval-mark given" : "approval-mark";
    marks.append(mark);
  }
  const text = document.createElement("span");
  text.className = "approvals-text";
  text.textContent = tallyText(t);
  line.append(marks, text);
  return line;
}

/** The status of a card whose device approved while the question waits for the others. */
export function waitingStatus(t) {
  const status = document.createElement("p");
  status.className = "q-status waiting";
  status.dataset.answer = "yes";
  status.textContent = waitingText(t);
  return status;
}

/**
 * How a question the pending view shows ended, once read again closed (`dq`, as `device` reads it; `q` is
 * `{id, payload, digest}`): `{done}` when this device's answer counts (read from its copy), else `{closed,
 * closedAnswer}` — "Approved — by Bob's tablet" (the answer that counts and who gave it), "Expired — …",
 * "Cancelled by the agent".
 */
export async function closedOutcome(device, q, dq) {
  if (dq.state !== "answered") {
    return { closed: dq.state === "expired" ? "Expired — no answer was given in time" : "Cancelled by the agent" };
  }
  const copy = await openCopy(device, q, dq);
  if (copy && dq.answeredBy === device.deviceId) return { done: copy.answer };
  const who = answeredAtComputer(dq) ? "at the computer" : `by ${dq.answeredByName || "another device"}`;
  return {
    closed: copy ? `${describeAnswer(copy.answer, q.payload)} — ${who}` : `Answered ${who}`,
    closedAnswer: copy ? copy.answer.type : "",
  };
}
