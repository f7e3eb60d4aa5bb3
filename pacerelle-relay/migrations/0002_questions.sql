-- Pacerelle relay schema, version 2: questions, notifications, webhooks and their outbox (DESIGN §6).
-- Times are milliseconds since the Unix epoch (UTC). As before, only ciphertext and metadata are stored.
--
-- Questions and notifications are items of the agent's stream, so that they get a `seq` (a cursor) from the
-- same AUTOINCREMENT as tasks and replies and appear, in order, in each device's conversation. The `kind`
-- CHECK of `items` must therefore admit 'question' and 'notification'. SQLite cannot alter a CHECK, so `items`
-- is rebuilt (https://sqlite.org/lang_altertable.html#otheralter), and `item_envelopes` with it:
--
--   * Both tables are rebuilt under new names, filled, and the old ones dropped (the child first, so no
--     foreign key is ever violated: this runs inside the migration's transaction with foreign keys on, and
--     `PRAGMA foreign_keys` cannot change inside a transaction).
--   * Renaming `items_new` to `items` rewrites the foreign key of `item_envelopes_new` that names it, and the
--     name of its row in `sqlite_sequence`.
--   * The AUTOINCREMENT high-water mark is carried over explicitly, so no sequence number is ever reused.
--
-- The columns only questions have (state, expiry, answer) live in a separate `questions` table keyed by the
-- item's seq, rather than as mostly-NULL columns of `items`: the question's self-sealed copy is the item's
-- `envelope`, its per-device copies are rows of `item_envelopes`, exactly as for replies.

CREATE TABLE items_new (
    seq               INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    agent_id          TEXT    NOT NULL REFERENCES agents (agent_id),
    kind              TEXT    NOT NULL CHECK (kind IN ('message', 'reply', 'checkpoint', 'question', 'notification')),
    item_id           TEXT    NOT NULL,     -- the sender's id (messageId, replyId, checkpointId, questionId, notificationId)
    device_id         TEXT    REFERENCES devices (device_id),  -- message: the device that sent it
    envelope          TEXT,                 -- message, checkpoint: the envelope; question: the agent's self-sealed
                                            -- copy; reply, notification: NULL (see item_envelopes)
    source_message_id TEXT,                 -- reply: the task it answers
    created_at        INTEGER NOT NULL,
    delivered_at      INTEGER,              -- message: first handed to the agent
    processed_at      INTEGER,              -- message: first marked processed
    UNIQUE (agent_id, kind, item_id)
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

DROP TABLE item_envelopes;
DROP TABLE items;
ALTER TABLE items_new RENAME TO items;
ALTER TABLE item_envelopes_new RENAME TO item_envelopes;

CREATE INDEX items_by_agent ON items (agent_id, seq);
CREATE INDEX items_by_kind ON items (agent_id, kind, seq);
CREATE INDEX items_unprocessed ON items (agent_id, seq) WHERE kind = 'message' AND processed_at IS NULL;
-- Which items a device has an envelope for (its conversation, its questions).
CREATE INDEX item_envelopes_by_device ON item_envelopes (device_id, item_seq);

-- A question's state, kept by the relay through `pacerelle_core::question::QuestionRecord` (pending →
-- answered | expired | cancelled; terminal states are final; the first valid answer wins). The relay cannot
-- read the question or its answer: `answer_envelope` is sealed by the answering device for the agent.
CREATE TABLE questions (
    item_seq         INTEGER NOT NULL PRIMARY KEY REFERENCES items (seq),
    agent_id         TEXT    NOT NULL REFERENCES agents (agent_id),
    kind             TEXT    NOT NULL CHECK (kind IN ('yes_no', 'choice', 'text')),
    state            TEXT    NOT NULL CHECK (state IN ('pending', 'answered', 'expired', 'cancelled')),
    expires_at       INTEGER NOT NULL,
    closed_at        INTEGER,              -- answered, cancelled, or expired (= expires_at)
    answered_by      TEXT    REFERENCES devices (device_id),
    answered_by_name TEXT,                 -- the device's name when it answered
    answered_at      INTEGER,              -- by the relay's clock
    answer_envelope  TEXT,
    CHECK ((state = 'pending') = (closed_at IS NULL)),
    CHECK ((state = 'answered') = (answered_by IS NOT NULL AND answered_at IS NOT NULL
                                   AND answer_envelope IS NOT NULL))
) STRICT;

CREATE INDEX questions_by_agent ON questions (agent_id, item_seq);
CREATE INDEX questions_pending_by_expiry ON questions (expires_at) WHERE state = 'pending';

-- At most one webhook per agent. The signing secret is stored as given: the relay must compute HMACs with it.
CREATE TABLE webhooks (
    agent_id   TEXT    NOT NULL PRIMARY KEY REFERENCES agents (agent_id),
    url        TEXT    NOT NULL,
    secret     TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;

-- The webhook outbox (docs/adr/0002-webhook-outbox.md). An event is inserted in the same transaction as the
-- question's state change, only when the agent has a webhook then; its body is frozen at that moment. The URL
-- and the secret are looked up at each attempt. `state` goes pending → delivered | failed, never back.
CREATE TABLE webhook_events (
    event_id        TEXT    NOT NULL PRIMARY KEY,   -- evt_…
    agent_id        TEXT    NOT NULL REFERENCES agents (agent_id),
    event_type      TEXT    NOT NULL CHECK (event_type IN ('question.answered', 'question.expired',
                                                           'question.cancelled')),
    question_seq    INTEGER NOT NULL REFERENCES questions (item_seq),
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

CREATE INDEX webhook_events_due ON webhook_events (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_events_by_agent ON webhook_events (agent_id, created_at);
