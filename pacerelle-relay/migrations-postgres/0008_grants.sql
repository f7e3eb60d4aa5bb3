-- Grants (issue 37): the same table as the SQLite migration `../migrations/0015_grants.sql` (read it for its
-- meaning). One row per grant the agent registered, keyed by its question's item; metadata only.
CREATE TABLE grants (
    item_seq     BIGINT  NOT NULL PRIMARY KEY REFERENCES questions (item_seq),
    agent_id     TEXT    NOT NULL REFERENCES agents (agent_id),
    device_id    TEXT    NOT NULL REFERENCES devices (device_id),
    granted_at   BIGINT  NOT NULL,
    expires_at   BIGINT  NOT NULL,
    uses         BIGINT  NOT NULL DEFAULT 0,
    last_used_at BIGINT,
    revoked_at   BIGINT,
    revoked_by   TEXT    REFERENCES devices (device_id),
    CHECK ((revoked_at IS NULL) = (revoked_by IS NULL))
);

-- A device's list: the agent's grants, newest first.
CREATE INDEX grants_by_agent ON grants (agent_id, item_seq);
