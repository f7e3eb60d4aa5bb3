-- Group commit of tasks (issue 36): the tasks that several devices send at once are stored by one call of this
-- function, one statement and one commit for all of them, where each used to cost six round trips (BEGIN, the
-- agent's lock, the id check, the quota, the insert, COMMIT) and a commit of its own.
--
-- The tasks are handled in the order given, each exactly as `PgStore::put_message_alone` handles one (read it
-- for the meaning of each outcome): an id already used by its device is found (`found`), by another device
-- refused (`conflict`); a new task past the agent's quota of tasks not yet processed is refused (`quota`);
-- otherwise it is stored (`stored`). Each step sees what the steps before it did (the quota counts the tasks
-- stored just before in the same call; an id sent twice in one call is stored once and found once).
--
-- The counter rows of every agent in the call are locked first, in the order of their ids, and held until the
-- commit: each agent's items still draw their sequence numbers in commit order (ADR 0003), and two calls
-- (two relay instances, or one instance's batches) that share agents lock them in the same order, so they
-- wait for each other instead of deadlocking. A transaction of one agent locks only that agent's row.
--
-- A new task is one statement: the insert, whose unique index finds a taken id (`ON CONFLICT DO NOTHING`);
-- only a task that was not stored looks for the row it met. A lookup first, for every task, cost a scan of
-- all the agent's tasks while the table had no statistics yet (a fresh database, until autovacuum's first
-- ANALYZE): the planner, seeing an empty table, took `items_by_kind` (agent, kind, seq) and filtered on the
-- id, and the plan cached for the session kept doing so — measured on a fresh database, 5 000 tasks of one
-- agent in one call took 1.8 s (354 µs a task, growing with each task) against 46 µs a task with statistics.
-- A taken id still draws a number from the identity; `seq` only has to grow, not to be dense.
--
-- Each agent's counters are read once, counted on here, and written once at the end: the per-row trigger that
-- counts tasks (`items_count_messages`) stands aside while this function runs (the transaction-local setting
-- `pacerelle.counted_by_caller`). Left to count, it rewrote the agent's counter row once per task, and every
-- later read of that row in the same transaction walked the chain of its versions — the largest cost of a
-- batch of 30 tasks of one agent.
CREATE FUNCTION pacerelle_put_messages(
    agent_ids   TEXT[],
    device_ids  TEXT[],
    message_ids TEXT[],
    envelopes   TEXT[],
    max_pending BIGINT[],
    nows        BIGINT[]
) RETURNS TABLE (o_outcome TEXT, o_seq BIGINT, o_created_at BIGINT)
LANGUAGE plpgsql AS $$
DECLARE
    i         INT;
    k         INT;
    found_seq BIGINT;
    found_dev TEXT;
    found_at  BIGINT;
    -- The agents of the call (sorted, distinct), the tasks each had pending before it, and those it stored.
    agents    TEXT[];
    pending   BIGINT[];
    stored    BIGINT[];
BEGIN
    PERFORM 1 FROM agent_counts c WHERE c.agent_id = ANY (agent_ids) ORDER BY c.agent_id FOR UPDATE;
    SELECT array_agg(u.agent_id ORDER BY u.agent_id),
           array_agg(COALESCE(c.messages - c.processed, 0) ORDER BY u.agent_id),
           array_agg(0::BIGINT ORDER BY u.agent_id)
    INTO agents, pending, stored
    FROM (SELECT DISTINCT a.agent_id FROM unnest(agent_ids) AS a (agent_id)) u
    LEFT JOIN agent_counts c ON c.agent_id = u.agent_id;
    PERFORM set_config('pacerelle.counted_by_caller', 'on', true);
    FOR i IN 1 .. COALESCE(array_length(agent_ids, 1), 0) LOOP
        k := array_position(agents, agent_ids[i]);
        o_seq := NULL;
        IF pending[k] + stored[k] < max_pending[i] THEN
            INSERT INTO items (agent_id, kind, item_id, device_id, envelope, created_at)
            VALUES (agent_ids[i], 'message', message_ids[i], device_ids[i], envelopes[i], nows[i])
            ON CONFLICT (agent_id, kind, item_id) DO NOTHING
            RETURNING items.seq INTO o_seq;
        END IF;
        IF o_seq IS NOT NULL THEN
            stored[k] := stored[k] + 1;
            o_outcome := 'stored'; o_created_at := nows[i];
            RETURN NEXT;
            CONTINUE;
        END IF;
        -- Not stored: the id was already taken (a retry, or another device's task), or the agent is at its quota.
        SELECT it.seq, it.device_id, it.created_at INTO found_seq, found_dev, found_at
        FROM items it
        WHERE it.agent_id = agent_ids[i] AND it.kind = 'message' AND it.item_id = message_ids[i];
        IF NOT FOUND THEN
            o_outcome := 'quota'; o_seq := NULL; o_created_at := NULL;
        ELSIF found_dev IS DISTINCT FROM device_ids[i] THEN
            o_outcome := 'conflict'; o_seq := NULL; o_created_at := NULL;
        ELSE
            o_outcome := 'found'; o_seq := found_seq; o_created_at := found_at;
        END IF;
        RETURN NEXT;
    END LOOP;
    -- What the trigger would have counted, one write per agent; then the trigger counts again for the rest of
    -- the transaction.
    FOR k IN 1 .. COALESCE(array_length(agents, 1), 0) LOOP
        IF stored[k] > 0 THEN
            INSERT INTO agent_counts AS c (agent_id, messages, processed) VALUES (agents[k], stored[k], 0)
            ON CONFLICT (agent_id) DO UPDATE SET messages = c.messages + EXCLUDED.messages;
        END IF;
    END LOOP;
    PERFORM set_config('pacerelle.counted_by_caller', 'off', true);
END;
$$;

-- The trigger that counts each stored task, as in 0001, unless the caller counts them itself (above).
DROP TRIGGER items_count_messages ON items;
CREATE TRIGGER items_count_messages AFTER INSERT ON items
FOR EACH ROW WHEN (NEW.kind = 'message'
                   AND current_setting('pacerelle.counted_by_caller', true) IS DISTINCT FROM 'on')
EXECUTE FUNCTION items_count_messages();
