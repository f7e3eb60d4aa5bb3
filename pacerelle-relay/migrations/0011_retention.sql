-- Retention (docs/self-hosting.md, "Retention"): the sweeper deletes what is older than the relay's settings, a
-- few hundred rows per write transaction. Until this version items were never deleted; now some are:
--
--   * tasks processed before the cut, with the `update` items about them, and replies, notifications and
--     checkpoints (each agent's newest checkpoint excepted) created before it (`--retain-days`);
--   * questions closed before the answer log's cut (`--retain-answers-days`), with their envelopes, updates and
--     webhook events; finished webhook events and expired pushes before the first cut.
--
-- Tasks not yet processed and open questions are never deleted. `seq` stays AUTOINCREMENT, so no sequence
-- number is reused and every cursor stays valid: it just finds fewer items after it. The counters of
-- `agent_counts` (0007, 0010) count tasks ever stored and ever processed; a purge deletes only processed tasks,
-- so their difference (tasks not yet processed, the quota) stays exact, and no trigger runs on delete.
--
-- The indexes below let each purge read only what it deletes, oldest first, instead of scanning the tables.
-- Each holds only the rows it serves (partial indexes), so the writes that store tasks add nothing to them.

-- Tasks by the time they were processed (only tasks have `processed_at`).
CREATE INDEX items_processed_by_age ON items (processed_at) WHERE processed_at IS NOT NULL;
-- Replies, notifications and checkpoints by the time they were stored.
CREATE INDEX items_by_age ON items (created_at) WHERE kind IN ('reply', 'notification', 'checkpoint');
-- The `update` items about an item. Beyond finding them, this is the index that the foreign key
-- `items.subject_seq → items.seq` needs when an item is deleted: without it SQLite scans `items` for each
-- deleted row (the partial index `updates_once` cannot serve that lookup, whose WHERE names no kind).
CREATE INDEX items_by_subject ON items (subject_seq) WHERE subject_seq IS NOT NULL;
-- Closed questions by the time they closed (pending ones have no `closed_at`).
CREATE INDEX questions_closed_by_age ON questions (closed_at) WHERE closed_at IS NOT NULL;
-- Finished webhook events (delivered or failed) by the time they were created.
CREATE INDEX webhook_events_finished_by_age ON webhook_events (created_at) WHERE state <> 'pending';
