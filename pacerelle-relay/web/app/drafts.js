// The composer's draft, one per agent: kept in memory and in this tab's sessionStorage, so that switching agents
// or reloading the page never loses a task not sent yet. Cleared once the task is sent.

const drafts = new Map();
const KEY = (agentId) => `pacerelle.draft.${agentId}`;

/** The draft kept for `agentId` ("" when none). */
export function loadDraft(agentId) {
  if (!agentId) return "";
  if (drafts.has(agentId)) return drafts.get(agentId);
  try {
    return sessionStorage.getItem(KEY(agentId)) || "";
  } catch {
    return "";
  }
}

/** Keeps `text` as `agentId`'s draft (an empty text forgets it). */
export function saveDraft(agentId, text) {
  if (!agentId) return;
  drafts.set(agentId, text);
  try {
    if (text) sessionStorage.setItem(KEY(agentId), text);
    else sessionStorage.removeItem(KEY(agentId));
  } catch {
    /* storage refused (private mode, full): the draft is kept in memory only */
  }
}
