-- Pacerelle relay schema, version 15: grants (issue 37; docs/relay-api.md, "Grants").
--
-- A grant is a gate question's yes extended, by the answering device, to the same calls for a while. What it
-- covers, its expiry and the device's signature travel sealed in the answer; the relay cannot read or widen
-- one. The agent registers each grant it kept (one row per question, keyed by the question's item), so that
-- owner devices list it and may revoke it, and each gate reports each use before letting a call run: a revoked
-- grant is refused at its next use. `expires_at` repeats the signed expiry, for listing only.
CREATE TABLE grants (
    item_seq     INTEGER NOT NULL PRIMARY KEY REFERENCES questions (item_seq),
    agent_id     TEXT    NOT NULL REFERENCES agents (agent_id),
    device_id    TEXT    NOT NULL REFERENCES devices (device_id),
    granted_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    uses         INTEGER NOT NULL DEFAULT 0,
    last_used_at INTEGER,
    revoked_at   INTEGER,
    revoked_by   TEXT    REFERENCES devices (device_id),
    CHECK ((revoked_at IS NULL) = (revoked_by IS NULL))
) STRICT;

-- A device's list: the agent's grants, newest first.
CREATE INDEX grants_by_agent ON grants (agent_id, item_seq);
