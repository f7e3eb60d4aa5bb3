// The page's elements: found by id, made with a class and text (never HTML), and the toast that tells the person
// something for a moment.

export const $ = (id) => document.getElementById(id);

/** An element with a class and text (never HTML: texts from the agent are shown as text). */
export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

let toastTimer = null;

export function toast(text) {
  const t = $("toast");
  t.textContent = text;
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => (t.hidden = true), 6000);
}

/** A message that stays at the top until dismissed (a pairing link that could not pair, say). */
export function notice(text) {
  $("notice-text").textContent = text;
  $("notice").hidden = false;
}
