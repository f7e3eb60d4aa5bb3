// Grants in the page (docs/crypto.md §4.8b, docs/hooks.md "Grants"): the Allow / Allow for … / Deny controls of a
// gate question that offers grants, with the menu of its durations and scopes; and the line saying what a yes
// granted.

import { durationLabel, readGrant, readOffer, scopeWords } from "./grant.js";

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

const button = (className, text) => {
  const b = el("button", className, text);
  b.type = "button";
  return b;
};

/** A time as a person reads it: the hour today, the day and hour otherwise. */
export function when(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  const time = d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  if (d.toDateString() === new Date().toDateString()) return time;
  return `${d.toLocaleDateString([], { day: "numeric", month: "short" })} ${time}`;
}

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
  p.append(`${live ? "Also allowed" : "Was also allowed"} until ${when(g.expiresAt)}: `, ...scopeNodes(g.scope));
  return p;
}
