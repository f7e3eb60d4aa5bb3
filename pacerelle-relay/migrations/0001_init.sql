-- Pacerelle relay schema, version 1. Times are milliseconds since the Unix epoch (UTC).
-- The relay stores ciphertext (envelopes) and metadata only; secrets are stored as SHA-256 hashes.

CREATE TABLE agents (
    agent_id   TEXT    NOT NULL PRIMARY KEY,
    name       TEXT    NOT NULL,
    auth_hash  BLOB    NOT NULL,            -- SHA-256 of the agent's auth secret
    created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE devices (
    device_id  TEXT    NOT NULL PRIMARY KEY,
    agent_id   TEXT    NOT NULL REFERENCES agents (agent_id),
    name       TEXT    NOT NULL,
    label      TEXT,
    role       TEXT    NOT NULL CHECK (role IN ('owner', 'user')),
    token_hash BLOB    NOT NULL,            -- SHA-256 of the device token's secret
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
) STRICT;

CREATE INDEX devices_by_agent ON devices (agent_id, created_at);

-- Pairing offers. Once claimed (or expired) the sealed offer is set to NULL and the row stays as a tombstone,
-- so that a second claim gets `pairing_claimed` and the device id stays reserved.
CREATE TABLE pairings (
    pairing_id TEXT    NOT NULL PRIMARY KEY,
    agent_id   TEXT    NOT NULL REFERENCES agents (agent_id),
    device_id  TEXT    NOT NULL UNIQUE,
    label      TEXT,
    role       TEXT    NOT NULL CHECK (role IN ('owner', 'user')),
    claim_hash BLOB    NOT NULL,            -- SHA-256 of the claim secret
    offer      TEXT,                        -- the sealed offer; NULL once claimed or expired
    expires_at INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    claimed_at INTEGER
) STRICT;

CREATE INDEX pairings_by_expiry ON pairings (expires_at);

-- Every item of every agent's stream: tasks (kind 'message', sealed by a device), replies (kind 'reply', sealed
-- once per device in item_envelopes) and checkpoints (kind 'checkpoint', sealed with the agent's self key).
-- `seq` only grows (AUTOINCREMENT never reuses a value), so it orders each agent's stream strictly; cursors
-- encode it.
CREATE TABLE items (
    seq               INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    agent_id          TEXT    NOT NULL REFERENCES agents (agent_id),
    kind              TEXT    NOT NULL CHECK (kind IN ('message', 'reply', 'checkpoint')),
    item_id           TEXT    NOT NULL,     -- the sender's id (messageId, replyId or checkpointId)
    device_id         TEXT    REFERENCES devices (device_id),  -- message: the device that sent it
    envelope          TEXT,                 -- message, checkpoint: the envelope; reply: NULL (see item_envelopes)
    source_message_id TEXT,                 -- reply: the task it answers
    created_at        INTEGER NOT NULL,
    delivered_at      INTEGER,              -- message: first handed to the agent
    processed_at      INTEGER,              -- message: first marked processed
    UNIQUE (agent_id, kind, item_id)
) STRICT;

CREATE INDEX items_by_agent ON items (agent_id, seq);
CREATE INDEX items_by_kind ON items (agent_id, kind, seq);
CREATE INDEX items_unprocessed ON items (agent_id, seq) WHERE kind = 'message' AND processed_at IS NULL;

CREATE TABLE item_envelopes (
    item_seq  INTEGER NOT NULL REFERENCES items (seq),
    device_id TEXT    NOT NULL REFERENCES devices (device_id),
    envelope  TEXT    NOT NULL,
    PRIMARY KEY (item_seq, device_id)
) STRICT, WITHOUT ROWID;

-- Agent sessions and the lease (DESIGN §7). At most one session per agent is open (ended_at IS NULL); it holds
-- the lease while its last heartbeat is younger than the lease TTL.
CREATE TABLE sessions (
    session_id        TEXT    NOT NULL PRIMARY KEY,
    agent_id          TEXT    NOT NULL REFERENCES agents (agent_id),
    host              TEXT    NOT NULL,
    since             INTEGER NOT NULL,
    last_heartbeat_at INTEGER NOT NULL,
    ended_at          INTEGER
) STRICT;

CREATE UNIQUE INDEX sessions_open_per_agent ON sessions (agent_id) WHERE ended_at IS NULL;
