-- Named sessions (issue 40): an agent may have several listening sessions, one per name; the lease is per
-- name. A session opened by a client older than names is named 'default', so such clients keep one session per
-- agent and the error naming the holder.
ALTER TABLE sessions ADD COLUMN name TEXT NOT NULL DEFAULT 'default';
ALTER TABLE sessions ADD COLUMN folder TEXT;            -- the folder it works in, as the phone shows it

DROP INDEX sessions_open_per_agent;
CREATE UNIQUE INDEX sessions_open_per_name ON sessions (agent_id, name) WHERE ended_at IS NULL;

-- The session a task is for: the name its device addressed it to, else the name of the session that was handed
-- it first (set with the delivered mark); NULL: sent to any session and not handed out yet.
ALTER TABLE items ADD COLUMN session_name TEXT;
