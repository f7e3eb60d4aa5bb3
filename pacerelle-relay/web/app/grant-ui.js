// Grants in the page (docs/crypto.md §4.8b, docs/hooks.md "Grants"): the Allow / Allow for … / Deny controls of a
// gate question that offers grants, with the menu of its durations and scopes; the line saying what a yes granted;
// and the grants screen, which lists this agent's grants as the relay keeps them (`GET /v1/device/grants`) and lets
// an owner revoke one (`DELETE /v1/device/grants/{grantId}`).

import * as answers from "./answer.js";
import { durationLabel, readGrant, readOffer, scopeWords } from "./grant.js";
import { el } from "./dom.js";
import { clock } from "./format.js";

const button = (className, text) => {
  const b = el("button", className, text);
  b.type = "button";
  return b;
};

/** A scope's nodes: the command (or tool) in monospace, how it is matched, and the folder in monospace. */
function scopeNodes(scope) {
  const { code, how, folder } = scopeWords(scope);
  const what = el("span", "scope-what");
  what.append(el("code", "scope-code", code), " ", el("span", "scope-how", how));
  const where = el("span", "scope-folder");
  where.append("in ", el("code", null, folder));
  return [what, where];
}

// ── a question that offers grants ──────────────────────────────────────────────────────────────────

/**
 * The grant offer of question `q` (`{payload}`): `{offer}`, `{offer: null}` or `{offer: null, problem}` (grant.js),
 * read once and kept on `q`.
 */
export function offerOf(q) {
  if (!q.offerRead) q.offerRead = readOffer(q.payload);
  return q.offerRead;
}

/**
 * The controls of a yes/no question that offers grants: "Allow" (a yes, as today), "Deny", and "Allow for …", which
 * opens a menu of the offer's durations and, when it offers several, its scopes; a duration answers yes with a grant
 * of the chosen scope. `onAnswer(q, answer, choice)` answers (`choice`: `{scope, seconds}`, or none). `canGrant`
 * false: this device cannot sign, and the menu says so instead of offering durations. What is open and chosen is
 * kept on `q` (`q.grantMenu`), so that the card can be drawn again without closing it.
 */
export function grantControls(q, offer, { onAnswer, canGrant }) {
  const state = q.grantMenu || (q.grantMenu = { open: false, scope: 0 });
  const box = el("div", "q-controls grants");
  const allow = button("big approve", "Allow");
  const deny = button("big deny", "Deny");
  const allowFor = button("big allow-for", "Allow for …");
  allow.addEventListener("click", () => onAnswer(q, { type: "yes" }));
  deny.addEventListener("click", () => onAnswer(q, { type: "no" }));

  const menu = el("div", "grant-menu");
  menu.id = `grant-menu-${q.id}`;
  menu.setAttribute("role", "group");
  menu.setAttribute("aria-label", "Allow for");
  allowFor.setAttribute("aria-controls", menu.id);
  const setOpen = (open) => {
    state.open = open;
    menu.hidden = !open;
    allowFor.setAttribute("aria-expanded", String(open));
  };
  allowFor.addEventListener("click", () => {
    setOpen(!state.open);
    if (state.open) menu.scrollIntoView({ block: "nearest" });
  });

  menu.append(el("p", "grant-title", "Allow the same calls without asking, for a while:"));
  if (offer.scopes.length === 1) {
    const only = el("p", "grant-scope only");
    only.append(...scopeNodes(offer.scopes[0]));
    menu.append(only);
  } else {
    const set = el("fieldset", "grant-scopes");
    set.append(el("legend", null, "Which calls"));
    offer.scopes.forEach((scope, i) => {
      const label = el("label", "grant-scope");
      const radio = el("input");
      radio.type = "radio";
      radio.name = `grant-scope-${q.id}`;
      radio.value = String(i);
      radio.checked = i === state.scope;
      radio.addEventListener("change", () => {
        if (radio.checked) state.scope = i;
      });
      const text = el("span", "scope-text");
      text.append(...scopeNodes(scope));
      label.append(radio, text);
      set.append(label);
    });
    menu.append(set);
  }
  const durations = el("div", "grant-durations");
  for (const seconds of offer.durations) {
    const b = button("big grant-duration", durationLabel(seconds));
    b.dataset.seconds = String(seconds);
    b.disabled = !canGrant;
    b.addEventListener("click", () => onAnswer(q, { type: "yes" }, { scope: state.scope, seconds }));
    durations.append(b);
  }
  menu.append(durations);
  if (!canGrant) {
    menu.append(
      el("p", "grant-note", "This browser has no signing key the relay lists, so it cannot grant (the settings say why): answer Allow or Deny."),
    );
  }
  const cancel = button("secondary grant-cancel", "Cancel");
  cancel.addEventListener("click", () => {
    setOpen(false);
    allowFor.focus();
  });
  menu.append(cancel);
  setOpen(state.open);
  box.append(allow, deny, allowFor, menu);
  return box;
}

/** What a yes granted, for its card: "Also allowed for 15 min, until 14:05:" and the scope. */
export function grantedLine(grant) {
  const g = readGrant(grant);
  if (!g) return null;
  const p = el("p", "q-granted");
  const live = Date.parse(g.expiresAt) > Date.now();
  p.append(`${live ? "Also allowed" : "Was also allowed"} until ${clock(g.expiresAt)}: `, ...scopeNodes(g.scope));
  return p;
}

// ── the grants screen ─────────────────────────────────────────────────────────────────────────────

/** "12 min left", "1 h 05 min left": how long until `iso`. */
function left(iso) {
  const s = Math.max(0, Math.ceil((Date.parse(iso) - Date.now()) / 1000));
  if (s < 60) return `${s} s left`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min left`;
  return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, "0")} min left`;
}

/** Where a grant stands: "revoked", "expired" or "live". */
export function grantState(record, now = Date.now()) {
  if (record.revokedAt) return "revoked";
  if (!(Date.parse(record.expiresAt) > now)) return "expired";
  return "live";
}

const STATE_WORDS = { live: "Live", expired: "Expired", revoked: "Revoked" };

/**
 * What the app knows of one grant besides the relay's record: the question it answered, opened with this device's
 * key, and the grant given with the yes, read from that answer's copy. `{question, grant, problem}`.
 */
async function openRecord(device, record) {
  const dq = record.question;
  if (!dq || typeof dq !== "object") return { question: null, grant: null, problem: "the relay sent no question with it" };
  let opened;
  try {
    opened = await answers.openQuestion(device, { id: dq.questionId, envelope: dq.envelope, question: dq });
  } catch {
    return { question: null, grant: null, problem: "its question does not open on this device" };
  }
  const q = { id: dq.questionId, payload: opened.payload, digest: opened.digest };
  const copy = await answers.openCopy(device, q, dq);
  const grant = copy && copy.answer.type === "yes" ? readGrant(copy.grant) : null;
  return { question: { ...q, meta: dq }, grant, problem: null };
}

/** Who a device is, as this device says it: "this device", the name the relay gives, or its id. */
function deviceWords(device, id, name) {
  if (id === device.deviceId) return "this device";
  return name || id || "another device";
}

/** Why a revocation failed, in words. */
function revokeError(e) {
  if (e.status === 403) return "Only an owner device can revoke a grant.";
  if (e.status === 404 && e.kind !== "no_route") return "The relay no longer knows this grant.";
  if (e.kind === "network") return "The relay cannot be reached: the grant was not revoked. Try again.";
  return `The grant was not revoked: ${e.message}`;
}

/** One grant's card. `entry`: `{record, question, grant, problem, busy, error}`. */
function grantCard(entry, ctx) {
  const { record } = entry;
  const { device } = ctx;
  const state = grantState(record);
  const node = el("li", "grant");
  node.dataset.grantId = record.grantId;
  node.dataset.state = state;
  node.dataset.uses = String(record.uses);
  const head = el("div", "grant-head");
  head.append(el("span", `tag grant-state ${state}`, STATE_WORDS[state]), el("span", "grant-uses", usesWords(record.uses)));
  node.append(head);

  // The scope: the one the yes granted (its copy), else what the question offered, else unknown here.
  const scope = el("div", "grant-scope");
  const offer = entry.question ? readOffer(entry.question.payload).offer : null;
  if (entry.grant) {
    scope.append(...scopeNodes(entry.grant.scope));
  } else if (offer && offer.scopes.length === 1) {
    scope.append(...scopeNodes(offer.scopes[0]));
  } else if (offer) {
    scope.append(el("span", "scope-how", "One of the calls its question offered:"));
    const list = el("ul", "scope-list");
    for (const s of offer.scopes) {
      const li = el("li");
      li.append(...scopeNodes(s));
      list.append(li);
    }
    scope.append(list);
  } else {
    scope.append(el("span", "scope-how", `Which calls is not known here: ${entry.problem || "its question offers no grant"}.`));
  }
  node.append(scope);

  const facts = el("dl", "facts small");
  const add = (term, value) => facts.append(el("dt", null, term), el("dd", null, value));
  const meta = entry.question ? entry.question.meta : record.question || {};
  add("Granted by", deviceWords(device, record.deviceId, meta.answeredByName));
  add("Granted", clock(record.grantedAt));
  if (state === "revoked") {
    const by = record.revokedBy ? ` by ${deviceWords(device, record.revokedBy, null)}` : "";
    add("Revoked", `${clock(record.revokedAt)}${by}`);
  } else if (state === "expired") {
    add("Expired", clock(record.expiresAt));
  } else {
    add("Until", `${clock(record.expiresAt)} (${left(record.expiresAt)})`);
  }
  add("Uses", record.lastUsedAt ? `${record.uses}, last at ${clock(record.lastUsedAt)}` : String(record.uses));
  if (entry.question) add("Question", entry.question.payload.question);
  node.append(facts);

  if (state === "live" && device.role === "owner") {
    const revoke = button("danger revoke", entry.busy ? "Revoking…" : "Revoke");
    revoke.disabled = Boolean(entry.busy);
    revoke.addEventListener("click", () => ctx.revoke(entry));
    node.append(revoke);
  }
  if (entry.error) node.append(el("p", "error small", entry.error));
  entry.node = node;
  return node;
}

const usesWords = (n) => (n === 1 ? "1 use" : `${n} uses`);

/** Whether a record from the relay has the shape of a GrantRecord. */
const isRecord = (r) =>
  r !== null &&
  typeof r === "object" &&
  typeof r.grantId === "string" &&
  typeof r.deviceId === "string" &&
  typeof r.grantedAt === "string" &&
  typeof r.expiresAt === "string" &&
  Number.isInteger(r.uses) &&
  r.uses >= 0;

/**
 * Fills the grants screen: `list` (an `<ol>`) gets one card per grant, newest first, `status` says what is going on.
 * `device` is the pairing shown (with its key), `api` its device API; `onRevocation(e)` is called when the relay
 * says this device was revoked.
 */
export async function showGrants({ list, status }, device, api, onRevocation) {
  list.replaceChildren();
  status.textContent = "Reading the grants…";
  let records;
  try {
    records = (await api.grants()).grants;
  } catch (e) {
    if (onRevocation(e)) return;
    status.textContent =
      e.kind === "no_route" || e.status === 405
        ? "This relay does not keep grants (it is older than them): a grant is ended on the computer by changing its policy file."
        : e.status === 403
          ? "Only an owner device lists this agent's grants."
          : `The grants cannot be read: ${e.message}`;
    return;
  }
  if (!Array.isArray(records)) {
    status.textContent = "The relay's list of grants is malformed.";
    return;
  }
  const good = records.filter(isRecord);
  const bad = records.length - good.length;
  const entries = [];
  for (const record of good) entries.push({ record, ...(await openRecord(device, record)) });
  const ctx = {
    device,
    async revoke(entry) {
      entry.busy = true;
      entry.error = null;
      entry.node.replaceWith(grantCard(entry, ctx));
      try {
        const updated = await api.revokeGrant(entry.record.grantId);
        if (isRecord(updated)) entry.record = { ...entry.record, ...updated };
        else entry.record = { ...entry.record, revokedAt: new Date().toISOString(), revokedBy: device.deviceId };
      } catch (e) {
        if (onRevocation(e)) return;
        entry.error = revokeError(e);
      }
      entry.busy = false;
      entry.node.replaceWith(grantCard(entry, ctx));
    },
  };
  for (const entry of entries) list.append(grantCard(entry, ctx));
  const notes = [];
  if (entries.length === 0) notes.push("No grant yet. When a gate question offers it, “Allow for …” allows the same calls for a while.");
  if (bad > 0) notes.push(`${bad} grant(s) the relay listed are malformed and not shown.`);
  status.textContent = notes.join(" ");
}
