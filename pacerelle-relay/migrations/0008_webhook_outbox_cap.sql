-- A cap on each agent's pending webhook events, and the index that fair delivery reads them through
-- (docs/webhooks.md, "Delivery"; docs/adr/0002-webhook-outbox.md, decisions 6 and 7).
--
-- `webhook_outbox_cap` holds one row: the most events one agent may have pending. The relay writes it at each
-- start from its configuration (`--max-pending-events`), before it serves anything; the statement that queues
-- an event reads it in the same transaction, and when the agent would then have more pending events than
-- that, fails the oldest ones with `last_error` 'dropped: …'. A database that no relay has opened since this
-- migration keeps the default, 1 000.
CREATE TABLE webhook_outbox_cap (
    only_row    INTEGER NOT NULL PRIMARY KEY CHECK (only_row = 1),
    max_pending INTEGER NOT NULL CHECK (max_pending >= 1)
) STRICT;

INSERT INTO webhook_outbox_cap (only_row, max_pending) VALUES (1, 1000);

-- An agent's pending events in the order of their next attempt: counts them for the cap, finds an agent's
-- oldest due event (the deliverer attempts one per agent at a time), and skips the agents in flight.
CREATE INDEX webhook_events_pending_by_agent ON webhook_events (agent_id, next_attempt_at) WHERE state = 'pending';
