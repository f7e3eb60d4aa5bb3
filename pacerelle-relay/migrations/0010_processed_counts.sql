-- The quota on tasks not yet processed (`--max-pending-tasks`, docs/relay-api.md, "Limits") in constant time:
-- beside each agent's number of tasks ever stored (0007), its number of tasks marked processed, kept by a trigger
-- in the very transaction that marks one (a task is marked once: `processed_at` is set only from NULL, and items
-- are never deleted). Tasks not yet processed = messages − processed. Existing rows are counted here. A later
-- migration that rebuilds `items` must create this trigger again.
ALTER TABLE agent_counts ADD COLUMN processed INTEGER NOT NULL DEFAULT 0;

UPDATE agent_counts
SET processed = (SELECT COUNT(*) FROM items
                 WHERE items.agent_id = agent_counts.agent_id AND kind = 'message' AND processed_at IS NOT NULL);

CREATE TRIGGER items_count_processed AFTER UPDATE OF processed_at ON items
WHEN NEW.kind = 'message' AND OLD.processed_at IS NULL AND NEW.processed_at IS NOT NULL
BEGIN
    UPDATE agent_counts SET processed = processed + 1 WHERE agent_id = NEW.agent_id;
END;
