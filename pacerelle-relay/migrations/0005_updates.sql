-- Pacerelle relay schema, version 5: state changes are conversation items (kind 'update').
--
-- A task marked processed, and a question answered, cancelled or expired, add an item of kind 'update' to the
-- agent's stream in the same transaction as the state change, so that it gets a `seq` (a cursor) from the same
-- AUTOINCREMENT and reaches the devices' conversations in order. Its columns:
--
--   * `subject_seq`: the item whose state changed (a 'message' or a 'question' of the same agent);
--   * `update_state`: the state it reached ('processed'; 'answered', 'expired', 'cancelled');
--   * `device_id`: for a task, the device that sent it (the only one that sees the update); NULL for a
--     question, whose update every device the question was sealed for sees (its `item_envelopes` rows).
--
-- An update carries no envelope: states are metadata the relay already keeps in clear. At most one update per
-- (subject, state): `updates_once`.
--
-- The `kind` CHECK of `items` must admit 'update', and SQLite cannot alter a CHECK, so `items` is rebuilt as in
-- version 2 (https://sqlite.org/lang_altertable.html#otheralter). Since version 2, `questions` references
-- `items` and `webhook_events` references `questions`: dropping `items` while they hold rows would violate
-- their foreign keys (this runs in the migration's transaction with foreign keys on, and `PRAGMA foreign_keys`
-- cannot change inside a transaction). So the whole chain is rebuilt under new names, filled, and the old
-- tables dropped children first; renaming each new table rewrites the foreign keys that name it. The
-- AUTOINCREMENT high-water mark of `items` is carried over, so no sequence number is ever reused.

CREATE TABLE items_new (
    seq               INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    agent_id          TEXT    NOT NULL REFERENCES agents (agent_id),
    kind              TEXT    NOT NULL CHECK (kind IN ('message', 'reply', 'checkpoint', 'question', 'notification',
                                                       'update')),
    item_id           TEXT    NOT NULL,     -- the sender's id (messageId, replyId, checkpointId, questionId,
                                            -- notificationId); update: upd_… drawn by the relay
    device_id         TEXT    REFERENCES devices (device_id),  -- message: the device that sent it; update of a
                                                               -- task: that same device
    envelope          TEXT,                 -- message, checkpoint: the envelope; question: the agent's self-sealed
                                            -- copy; reply, notification: NULL (see item_envelopes); update: NULL
    source_message_id TEXT,                 -- reply: the task it answers
    created_at        INTEGER NOT NULL,
    delivered_at      INTEGER,              -- message: first handed to the agent
    processed_at      INTEGER,              -- message: first marked processed
    subject_seq       INTEGER REFERENCES items_new (seq),      -- update: the item whose state changed
    update_state      TEXT    CHECK (update_state IN ('processed', 'answered', 'expired', 'cancelled')),
    UNIQUE (agent_id, kind, item_id),
    CHECK ((kind = 'update') = (subject_seq IS NOT NULL)),
    CHECK ((kind = 'update') = (update_state IS NOT NULL))
) STRICT;

INSERT INTO items_new (seq, agent_id, kind, item_id, device_id, envelope, source_message_id, created_at,
                       delivered_at, processed_at)
    SELECT seq, agent_id, kind, item_id, device_id, envelope, source_message_id, created_at, delivered_at,
           processed_at
    FROM items;

-- Keep the high-water mark (it may exceed MAX(seq) if rows were ever deleted).
DELETE FROM sqlite_sequence WHERE name = 'items_new';
INSERT INTO sqlite_sequence (name, seq) SELECT 'items_new', seq FROM sqlite_sequence WHERE name = 'items';

CREATE TABLE item_envelopes_new (
    item_seq  INTEGER NOT NULL REFERENCES items_new (seq),
    device_id TEXT    NOT NULL REFERENCES devices (device_id),
    envelope  TEXT    NOT NULL,
    PRIMARY KEY (item_seq, device_id)
) STRICT, WITHOUT ROWID;

INSERT INTO item_envelopes_new (item_seq, device_id, envelope)
    SELECT item_seq, device_id, envelope FROM item_envelopes;

CREATE TABLE questions_new (
    item_seq         INTEGER NOT NULL PRIMARY KEY REFERENCES items_new (seq),
    agent_id         TEXT    NOT NULL REFERENCES agents (agent_id),
    kind             TEXT    NOT NULL CHECK (kind IN ('yes_no', 'choice', 'text')),
    state            TEXT    NOT NULL CHECK (state IN ('pending', 'answered', 'expired', 'cancelled')),
    expires_at       INTEGER NOT NULL,
    closed_at        INTEGER,              -- answered, cancelled, or expired (= expires_at)
    answered_by      TEXT    REFERENCES devices (device_id),
    answered_by_name TEXT,                 -- the device's name when it answered
    answered_at      INTEGER,              -- by the relay's clock
    answer_envelope  TEXT,
    answer_copy      TEXT,                 -- the answer sealed with the question's answer key (version 3)
    CHECK ((state = 'pending') = (closed_at IS NULL)),
    CHECK ((state = 'answered') = (answered_by IS NOT NULL AND answered_at IS NOT NULL
                                   AND answer_envelope IS NOT NULL))
) STRICT;

INSERT INTO questions_new (item_seq, agent_id, kind, state, expires_at, closed_at, answered_by, answered_by_name,
                           answered_at, answer_envelope, answer_copy)
    SELECT item_seq, agent_id, kind, state, expires_at, closed_at, answered_by, answered_by_name, answered_at,
           answer_envelope, answer_copy
    FROM questions;

CREATE TABLE webhook_events_new (
    event_id        TEXT    NOT NULL PRIMARY KEY,   -- evt_…
    agent_id        TEXT    NOT NULL REFERENCES agents (agent_id),
    event_type      TEXT    NOT NULL CHECK (event_type IN ('question.answered', 'question.expired',
                                                           'question.cancelled')),
    question_seq    INTEGER NOT NULL REFERENCES questions_new (item_seq),
    question_id     TEXT    NOT NULL,
    body            TEXT    NOT NULL,               -- the JSON WebhookEvent, sent byte for byte at every attempt
    state           TEXT    NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    last_status     INTEGER,
    last_error      TEXT,
    created_at      INTEGER NOT NULL,
    delivered_at    INTEGER,
    next_attempt_at INTEGER,                        -- while pending
    UNIQUE (question_seq, event_type),              -- a question closes once: one event of each type at most
    CHECK ((state = 'pending') = (next_attempt_at IS NOT NULL)),
    CHECK ((state = 'delivered') = (delivered_at IS NOT NULL))
) STRICT;

INSERT INTO webhook_events_new (event_id, agent_id, event_type, question_seq, question_id, body, state, attempts,
                                last_status, last_error, created_at, delivered_at, next_attempt_at)
    SELECT event_id, agent_id, event_type, question_seq, question_id, body, state, attempts, last_status,
           last_error, created_at, delivered_at, next_attempt_at
    FROM webhook_events;

-- Children first, so that no foreign key is ever violated.
DROP TABLE webhook_events;
DROP TABLE questions;
DROP TABLE item_envelopes;
DROP TABLE items;
ALTER TABLE items_new RENAME TO items;
ALTER TABLE item_envelopes_new RENAME TO item_envelopes;
ALTER TABLE questions_new RENAME TO questions;
ALTER TABLE webhook_events_new RENAME TO webhook_events;

CREATE INDEX items_by_agent ON items (agent_id, seq);
CREATE INDEX items_by_kind ON items (agent_id, kind, seq);
CREATE INDEX items_unprocessed ON items (agent_id, seq) WHERE kind = 'message' AND processed_at IS NULL;
CREATE INDEX item_envelopes_by_device ON item_envelopes (device_id, item_seq);
CREATE INDEX questions_by_agent ON questions (agent_id, item_seq);
CREATE INDEX questions_pending_by_expiry ON questions (expires_at) WHERE state = 'pending';
CREATE INDEX webhook_events_due ON webhook_events (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_events_by_agent ON webhook_events (agent_id, created_at);

-- At most one update per (subject, state): a retried "processed", a retried answer, or two writes meeting
-- the same expiry add nothing.
CREATE UNIQUE INDEX updates_once ON items (subject_seq, update_state) WHERE kind = 'update';
