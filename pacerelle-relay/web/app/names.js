// The agents' names as the switcher's tabs show them. No DOM here.

/**
 * The tab labels for `names` (in order): several agents of one person often share their first words ("Ana’s
 * laptop", "Ana’s build server"), which a narrow tab would show as the same "Ana’…". The words every name starts
 * with are left out of the tabs (whole words, and never a name's last word), so each tab shows what tells it
 * apart; the full name stays in the header, the tab's title and its accessible name. One name, or names that
 * share no first word, are shown whole.
 */
export function tabLabels(names) {
  if (names.length < 2) return [...names];
  const words = names.map((n) => String(n).trim().split(/\s+/));
  let shared = 0;
  for (;;) {
    const word = words[0][shared];
    // Keep at least one word of every name.
    if (words.some((w) => w.length <= shared + 1 || w[shared] !== word)) break;
    shared++;
  }
  return shared === 0 ? [...names] : words.map((w) => w.slice(shared).join(" "));
}
