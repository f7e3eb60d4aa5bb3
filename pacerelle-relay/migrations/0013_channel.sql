-- Pacerelle relay schema, version 13: the channel an answer came through (docs/relay-api.md, "Answering at the
-- computer").
--
-- `channel` is 'phone' for an answer a device gave (`answered_by` names it) and 'host' for an answer given at the
-- computer and recorded by the agent itself (`POST /v1/agent/questions/{id}/answer`): no device, so
-- `answered_by` and `answered_by_name` are NULL. It is NULL while the question is not answered. Answered rows of
-- earlier versions were all answered by a device: they get 'phone'.
--
-- The CHECK that ties `answered` to `answered_by IS NOT NULL` must change, and SQLite cannot alter a CHECK, so
-- `questions` is rebuilt (https://sqlite.org/lang_altertable.html#otheralter). `webhook_events` references
-- `questions (item_seq)`, and this runs inside the migration's transaction with foreign keys on, where
-- `PRAGMA foreign_keys` cannot change. Instead of rebuilding the referencing table too (as version 5 did),
-- foreign keys are deferred to the commit for this transaction (`PRAGMA defer_foreign_keys`, reset by the
-- commit): the rows are kept in a temporary table, `questions` is dropped (each event row then counts as a
-- pending violation) and created again under the same name, and refilling it resolves every one of them. A
-- row that would still lack its parent makes the commit fail, and the migration with it. Nothing is renamed,
-- so no foreign key text is rewritten. Every index on `questions` (versions 2, 9 and 11) is created again.

PRAGMA defer_foreign_keys = ON;

CREATE TEMP TABLE questions_v12 AS SELECT * FROM questions;

DROP TABLE questions;

CREATE TABLE questions (
    item_seq         INTEGER NOT NULL PRIMARY KEY REFERENCES items (seq),
    agent_id         TEXT    NOT NULL REFERENCES agents (agent_id),
    kind             TEXT    NOT NULL CHECK (kind IN ('yes_no', 'choice', 'text')),
    state            TEXT    NOT NULL CHECK (state IN ('pending', 'answered', 'expired', 'cancelled')),
    expires_at       INTEGER NOT NULL,
    closed_at        INTEGER,              -- answered, cancelled, or expired (= expires_at)
    answered_by      TEXT    REFERENCES devices (device_id),  -- channel 'phone': the device; 'host': NULL
    answered_by_name TEXT,                 -- the device's name when it answered
    answered_at      INTEGER,              -- by the relay's clock
    answer_envelope  TEXT,                 -- phone: sealed by the device for the agent; host: by the agent itself
    answer_copy      TEXT,                 -- the answer sealed with the question's answer key (version 3)
    channel          TEXT    CHECK (channel IN ('phone', 'host')),
    CHECK ((state = 'pending') = (closed_at IS NULL)),
    CHECK ((state = 'answered') = (answered_at IS NOT NULL AND answer_envelope IS NOT NULL
                                   AND channel IS NOT NULL AND (channel = 'host') = (answered_by IS NULL)))
) STRICT;

INSERT INTO questions (item_seq, agent_id, kind, state, expires_at, closed_at, answered_by, answered_by_name,
                       answered_at, answer_envelope, answer_copy, channel)
    SELECT item_seq, agent_id, kind, state, expires_at, closed_at, answered_by, answered_by_name, answered_at,
           answer_envelope, answer_copy, CASE WHEN state = 'answered' THEN 'phone' END
    FROM questions_v12;

DROP TABLE questions_v12;

CREATE INDEX questions_by_agent ON questions (agent_id, item_seq);
CREATE INDEX questions_pending_by_expiry ON questions (expires_at) WHERE state = 'pending';
CREATE INDEX questions_open_by_agent ON questions (agent_id, expires_at) WHERE state = 'pending';
CREATE INDEX questions_closed_by_age ON questions (closed_at) WHERE closed_at IS NOT NULL;
