// Grants (docs/crypto.md §4.8b), what the app decides about them, without the page: a gate question's offer as
// read from its payload, how a duration and a scope read, and the grant a yes carries (built here, signed by
// answer.js with the device's key). The same rules as the Rust core's `grant.rs` and the device's `grant_for`.
// Used by the page (grant-ui.js, app.js) and, through answer.js, the service worker: no DOM here.

import { COMMAND_MATCHES } from "./crypto.js";

/** The longest grant a policy may offer: a day. */
export const MAX_GRANT_SECONDS = 24 * 3600;
/** Most durations, and most scopes, in one offer. */
const MAX_OFFERED = 8;
/** What ends a shell command or starts another (`SHELL_CONTROL` in the core): a prefix holds none of them. */
const SHELL_CONTROL = [";", "&", "|", "`", "$", "(", ")", "<", ">", "\n", "\r", "\\"];

/** A grant that cannot be made as asked; `message` says why, in words for the person. */
export class GrantError extends Error {
  constructor(message) {
    super(message);
    this.name = "GrantError";
  }
}

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const absent = (v) => v === undefined || v === null;

/**
 * Why a scope (`{tool, command?, match?, folder}`) is malformed (`GrantScope::validate`), or null when it is not:
 * a tool and a folder, `command` and `match` both present or both absent, and a prefix that is a plain command.
 */
export function scopeProblem(scope) {
  if (!isObject(scope)) return "a scope is an object";
  const { tool, command, match, folder } = scope;
  if (typeof tool !== "string" || typeof folder !== "string" || !tool || !folder) {
    return "a grant's scope names a tool and a folder";
  }
  if (absent(command) && absent(match)) return null;
  if (typeof command !== "string" || !COMMAND_MATCHES.includes(match)) {
    return "a grant's command and its match go together";
  }
  if (match === "prefix" && (!command.trim() || [...command].some((ch) => SHELL_CONTROL.includes(ch)))) {
    return "a prefix grant's command is a plain command, without shell control characters";
  }
  return null;
}

/** A scope with exactly the members the core knows, in its order (`tool`, `command`, `match`, `folder`). */
export function cleanScope(scope) {
  const out = { tool: scope.tool };
  if (!absent(scope.command)) {
    out.command = scope.command;
    out.match = scope.match;
  }
  out.folder = scope.folder;
  return out;
}

/**
 * A question payload's grant offer (`grants`, §4.8b), checked as the core checks one (`GrantOffer::validate`):
 * `{offer: null}` when it offers none, `{offer}` (`{durations, scopes, policy}`, the scopes cleaned) when it is
 * valid, `{offer: null, problem}` when it is not — then the question is answered without a grant.
 */
export function readOffer(payload) {
  const raw = payload ? payload.grants : undefined;
  if (absent(raw)) return { offer: null };
  const refuse = (problem) => ({ offer: null, problem: `This question's grant offer is malformed (${problem}): it can be answered, not granted.` });
  if (payload.kind !== "yes_no") return refuse("only a yes/no question offers grants");
  if (!isObject(raw)) return refuse("an offer is an object");
  const { durations, scopes, policy } = raw;
  if (!Array.isArray(durations) || durations.length === 0 || durations.length > MAX_OFFERED) {
    return refuse("an offer has 1 to 8 durations");
  }
  if (!durations.every((d) => Number.isInteger(d) && d >= 1 && d <= MAX_GRANT_SECONDS)) {
    return refuse("a grant lasts from 1 s to a day");
  }
  if (!Array.isArray(scopes) || scopes.length === 0 || scopes.length > MAX_OFFERED) {
    return refuse("an offer has 1 to 8 scopes");
  }
  for (const scope of scopes) {
    const problem = scopeProblem(scope);
    if (problem) return refuse(problem);
  }
  if (typeof policy !== "string" || !policy) return refuse("an offer names its policy's digest");
  return { offer: { durations: [...durations], scopes: scopes.map(cleanScope), policy } };
}

/** The longest duration an offer lets a grant last, in seconds. */
export const longest = (offer) => Math.max(0, ...offer.durations);

/** A duration as a person reads it: `900` → "15 min", `3600` → "1 h", `5400` → "1 h 30 min", `45` → "45 s". */
export function durationLabel(seconds) {
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  const parts = [];
  if (h) parts.push(`${h} h`);
  if (m) parts.push(`${m} min`);
  if (s || parts.length === 0) parts.push(`${s} s`);
  return parts.join(" ");
}

/**
 * How a scope reads: `{code, how, folder}` — what is shown in monospace (the command, `cargo test …` for a prefix,
 * or the tool's name), how it is matched in words, and the project folder.
 */
export function scopeWords(scope) {
  if (absent(scope.command)) return { code: scope.tool, how: "on files inside the folder", folder: scope.folder };
  if (scope.match === "prefix") return { code: `${scope.command} …`, how: "with any arguments", folder: scope.folder };
  return { code: scope.command, how: "exactly this command", folder: scope.folder };
}

/**
 * The grant of `choice` (`{scope, seconds}`: the scope's position in the offer, 0 being the exact call, and how
 * long) on a question offering `offer`, answered at `answeredAt` (wire time): `{scope, expiresAt, policy}`, not
 * yet signed. A choice outside the offer throws a GrantError, as the Rust device's `grant_for` refuses it.
 */
export function grantFor(offer, choice, answeredAt) {
  if (!offer) throw new GrantError("This question offers no grant: answer Allow or Deny.");
  const n = offer.scopes.length;
  if (!choice || !Number.isInteger(choice.scope) || choice.scope < 0 || choice.scope >= n) {
    throw new GrantError(`The question offers ${n} scope(s): choose one of them.`);
  }
  const max = longest(offer);
  if (!Number.isInteger(choice.seconds) || choice.seconds <= 0 || choice.seconds > max) {
    throw new GrantError(`The question lets a grant last ${durationLabel(max)} at most.`);
  }
  const start = Date.parse(answeredAt);
  if (Number.isNaN(start)) throw new GrantError("The answer has no time to start the grant from.");
  return {
    scope: cleanScope(offer.scopes[choice.scope]),
    expiresAt: new Date(start + choice.seconds * 1000).toISOString(),
    policy: offer.policy,
  };
}

/**
 * A grant as read from an answer (its copy, or the one this device sealed), for display: `{scope, expiresAt,
 * policy}` when it has that shape, else null. Shown only: the agent checks it against its own question.
 */
export function readGrant(grant) {
  if (!isObject(grant) || scopeProblem(grant.scope) !== null) return null;
  if (typeof grant.expiresAt !== "string" || Number.isNaN(Date.parse(grant.expiresAt))) return null;
  return { scope: cleanScope(grant.scope), expiresAt: grant.expiresAt, policy: grant.policy };
}
