-- Pacerelle relay schema, version 4: webhook secrets are stored sealed (docs/webhooks.md, "Security notes").
--
-- The relay seals each webhook secret with AES-256-GCM under a key kept outside the database, in
-- `webhook.key` beside it, so that a copy of the database alone cannot sign webhook requests. SQL cannot seal:
-- this migration only makes room. `secret` keeps the secrets stored in clear by earlier versions and becomes
-- nullable; `sealed_secret` holds `0x01 ‖ nonce ‖ ciphertext ‖ tag`. At start, before it serves anything, the
-- relay seals every secret still in clear, sets `secret` to NULL, and compacts the database (VACUUM, then a
-- truncating WAL checkpoint) so that no copy in clear remains in the file. Exactly one of the two columns is
-- set; once the relay has started, always `sealed_secret`.
--
-- SQLite cannot drop a NOT NULL constraint, so the table is rebuilt (nothing references it).

CREATE TABLE webhooks_new (
    agent_id      TEXT    NOT NULL PRIMARY KEY REFERENCES agents (agent_id),
    url           TEXT    NOT NULL,
    secret        TEXT,                     -- in clear, from an earlier version; NULL once sealed
    sealed_secret BLOB,                     -- sealed with webhook.key, the additional data naming the agent
    updated_at    INTEGER NOT NULL,
    CHECK ((secret IS NULL) <> (sealed_secret IS NULL))
) STRICT;

INSERT INTO webhooks_new (agent_id, url, secret, updated_at)
    SELECT agent_id, url, secret, updated_at FROM webhooks;

DROP TABLE webhooks;

ALTER TABLE webhooks_new RENAME TO webhooks;
