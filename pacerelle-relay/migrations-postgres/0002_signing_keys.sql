-- Device signing keys: the same two columns as the SQLite migration `../migrations/0012_signing_keys.sql` (read it
-- for their meaning). Both NULL for a device paired before keys; set together, once.
ALTER TABLE devices ADD COLUMN signing_key TEXT NULL;
ALTER TABLE devices ADD COLUMN signing_key_seal TEXT NULL;
