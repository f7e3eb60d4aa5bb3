// A question's details, as the person must read them before approving: in monospace, line for line as the agent
// wrote them, never cut without a "Show all" toggle, and in a `Diff:` section (the gate writes one for a file edit,
// docs/hooks.md "What the phone shows") the added and removed lines coloured. The details are plain text: sections
// are lines such as `Tool: Edit`, `Why asked: …`, `Directory: …`, `Command:`, `Diff: <file> (+added -removed)` and
// `Input:`; nothing here depends on which of them are there.

import { el } from "./dom.js";

/** A text longer than this (characters or lines) is shown folded (details, bubbles, notes). */
const FOLD_CHARS = 1200;
const FOLD_LINES = 16;

/** A line that opens a section of its own (`Input:`, `Command:`): it ends a diff. */
const HEADING = /^[A-Z][A-Za-z ]*:$/;
/** The line that opens a diff section: `Diff:`, possibly followed by what it is about. */
const DIFF = /^Diff:/;

/**
 * How each line reads: `[{text, kind}]`, `kind` one of "text", "heading" (a section's first line), and in a diff
 * section "add" (`+…`), "del" (`-…`), "hunk" (`@@ …`), "file" (a patch's `*** Update File: …`, or a header line
 * under a bare `Diff:`) or "context" (` …`, and what else it holds but an empty line). Every `+` line is added and
 * every `-` line removed: the gate writes no `+++`/`---` file lines, and a removed `-- comment` is `--- comment`.
 */
export function classify(details) {
  const out = [];
  let inDiff = false;
  let headerSeen = false;
  for (const text of String(details).split("\n")) {
    if (DIFF.test(text)) {
      inDiff = true;
      headerSeen = false;
      out.push({ text, kind: "heading" });
      continue;
    }
    if (HEADING.test(text)) {
      inDiff = false;
      out.push({ text, kind: "heading" });
      continue;
    }
    if (!inDiff) {
      out.push({ text, kind: "text" });
      continue;
    }
    let kind;
    if (text === "") kind = "text"; // between sections: an empty context line is " "
    else if (text.startsWith("*** ")) kind = "file";
    else if (text.startsWith("@@")) kind = "hunk";
    else if (text.startsWith("+")) kind = "add";
    else if (text.startsWith("-")) kind = "del";
    else if (!headerSeen && text.trim() && !text.startsWith(" ")) kind = "file";
    else kind = "context";
    if (text.trim()) headerSeen = true;
    out.push({ text, kind });
  }
  return out;
}

/**
 * The details' nodes: a `<pre class="q-details">` holding one line element per line (a diff's added and removed
 * lines marked `add` / `del`), and when the text is long a "Show all" button that unfolds it ("Show less" folds it
 * again). Folding is only a view: the whole text is in the page, for search and copy.
 */
export function detailsNodes(details) {
  const pre = el("pre", "q-details");
  for (const { text, kind } of classify(details)) {
    const line = el("span", `line ${kind}`, text);
    pre.append(line, "\n");
  }
  // The last "\n" adds no line.
  if (pre.lastChild) pre.lastChild.remove();
  return foldable(pre, details, { label: "Show all", className: "show-more show-all" });
}

/**
 * `node` (holding `text`) and, when the text is long, a button (`label`, "Show more" by default) that unfolds it
 * (and "Show less" folds it again). Folding is only a view: the whole text is in the page, for search and copy.
 */
export function foldable(node, text, { label = "Show more", className = "show-more" } = {}) {
  const long = text.length > FOLD_CHARS || text.split("\n").length > FOLD_LINES;
  if (!long) return [node];
  node.classList.add("foldable", "folded");
  const toggle = el("button", className, label);
  toggle.type = "button";
  toggle.setAttribute("aria-expanded", "false");
  toggle.addEventListener("click", () => {
    const folded = node.classList.toggle("folded");
    toggle.textContent = folded ? label : "Show less";
    toggle.setAttribute("aria-expanded", String(!folded));
    if (folded && node.getBoundingClientRect().top < 0) node.scrollIntoView({ block: "start" });
  });
  return [node, toggle];
}
