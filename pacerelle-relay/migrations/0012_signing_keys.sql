-- Device signing keys (issue 17, docs/crypto.md): a device draws an Ed25519 key pair when it pairs and gives the
-- relay its public key twice — in clear (`signing_key`, base64url of 32 bytes) and sealed for the agent with the
-- device key (`signing_key_seal`, an envelope the relay cannot open). The relay stores both as given and lists
-- both with the device; the agent opens the seal, checks it equals the clear copy and pins the key in its roster.
-- A device paired before keys sends them once later (`PUT /v1/device/signing-key`). Both columns are set together
-- or not at all, and never change once set. Nothing private reaches the relay: the private key stays on the device.
ALTER TABLE devices ADD COLUMN signing_key TEXT;
ALTER TABLE devices ADD COLUMN signing_key_seal TEXT;
