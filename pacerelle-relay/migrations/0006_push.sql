-- Pacerelle relay schema, version 6: Web Push subscriptions and the push outbox (docs/push.md).
--
-- A device registers the push subscriptions of its browsers or app installs (`POST /v1/device/push`): the
-- endpoint a push service gave it and the subscription's public key and auth secret (RFC 8291), which encrypt
-- what the relay pushes there. An endpoint belongs to one device; a device has at most 10.
--
-- The outbox: one row per (subscription, item) to push, written in the same transaction as the item (a
-- question sealed for the device, a reply, a notification, a question closed). The deliverer builds the
-- payload when it sends (the item as the device's conversation returns it then), encrypts it, and deletes
-- the row once the push service accepted it, so a delivered push is never sent again. A row past its
-- `expires_at` (the push's TTL) is dropped unsent. Deleting a subscription deletes its rows.

CREATE TABLE push_subscriptions (
    subscription_id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    endpoint        TEXT    NOT NULL UNIQUE,
    agent_id        TEXT    NOT NULL REFERENCES agents (agent_id),
    device_id       TEXT    NOT NULL REFERENCES devices (device_id),
    p256dh          BLOB    NOT NULL,           -- 65 bytes, an uncompressed P-256 point
    auth            BLOB    NOT NULL,           -- 16 bytes
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) STRICT;

CREATE INDEX push_subscriptions_by_device ON push_subscriptions (device_id);

CREATE TABLE push_outbox (
    push_id         INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    subscription_id INTEGER NOT NULL REFERENCES push_subscriptions (subscription_id) ON DELETE CASCADE,
    agent_id        TEXT    NOT NULL,
    device_id       TEXT    NOT NULL,
    item_seq        INTEGER NOT NULL,           -- the item pushed (its cursor)
    kind            TEXT    NOT NULL CHECK (kind IN ('question', 'reply', 'notification', 'update')),
    urgency         TEXT    NOT NULL CHECK (urgency IN ('high', 'normal')),
    topic           TEXT,                       -- the question's Topic (question and update pushes)
    expires_at      INTEGER NOT NULL,           -- created_at + TTL: dropped unsent after this
    attempts        INTEGER NOT NULL DEFAULT 0,
    last_status     INTEGER,
    last_error      TEXT,
    created_at      INTEGER NOT NULL,
    next_attempt_at INTEGER NOT NULL,
    UNIQUE (subscription_id, item_seq)
) STRICT;

CREATE INDEX push_outbox_due ON push_outbox (next_attempt_at);
