-- Status without scanning every task (GET /v1/agent/status, GET /v1/device/status): each agent's number of
-- tasks ever stored, kept by a trigger in the very transaction that stores the task. The unprocessed tasks are
-- read through the partial index `items_unprocessed`; processed = stored − unprocessed. Items are never
-- deleted. A later migration that rebuilds `items` must create the trigger again.
CREATE TABLE agent_counts (
    agent_id TEXT    NOT NULL PRIMARY KEY REFERENCES agents (agent_id),
    messages INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

INSERT INTO agent_counts (agent_id, messages)
SELECT agent_id, COUNT(*) FROM items WHERE kind = 'message' GROUP BY agent_id;

CREATE TRIGGER items_count_messages AFTER INSERT ON items WHEN NEW.kind = 'message'
BEGIN
    INSERT INTO agent_counts (agent_id, messages) VALUES (NEW.agent_id, 1)
    ON CONFLICT (agent_id) DO UPDATE SET messages = messages + 1;
END;
