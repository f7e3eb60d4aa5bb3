-- Named sessions (issue 40): the same columns and index as the SQLite migration
-- `../migrations/0017_named_sessions.sql` (read it for their meaning).
ALTER TABLE sessions ADD COLUMN name TEXT NOT NULL DEFAULT 'default';
ALTER TABLE sessions ADD COLUMN folder TEXT;

DROP INDEX sessions_open_per_agent;
CREATE UNIQUE INDEX sessions_open_per_name ON sessions (agent_id, name) WHERE ended_at IS NULL;

ALTER TABLE items ADD COLUMN session_name TEXT;
