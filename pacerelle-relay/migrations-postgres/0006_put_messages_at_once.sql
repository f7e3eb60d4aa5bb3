-- Group commit of tasks, second step (issue 36): the tasks of a batch are inserted by one statement, where
-- 0005 ran one insert per task. Each insert statement paid its executor's start-up again: the items table's
-- five CHECK constraints and the counting trigger's WHEN clause read back from their stored form
-- (`stringToNode`, 20 % of a backend's time in a profile of 0005), the foreign keys' queue set up and run
-- (`AfterTriggerEndQuery`, 20 %), the plan's nodes built — about 57 µs a task on a 2-vCPU machine, against
-- which the insert itself (heap and five indexes) is a small part.
--
-- The outcomes are those of 0005 (read it, and `PgStore::put_message_alone`, for their meaning), in the same
-- order; only how they are reached changes:
-- - An agent far enough from its quota that every task of the call fits (the tasks it has pending, plus all
--   its tasks in the call, within the smallest quota given with them) cannot be refused, whatever its tasks
--   turn out to be: its tasks are inserted together, in the order given (so its sequence numbers still
--   follow that order), by one `INSERT … SELECT … ON CONFLICT DO NOTHING`. A task that statement did not
--   insert met a taken id — a retry, another device's task, or the same id earlier in the call — and is
--   looked up, as in 0005. Its counters are written by the same statement.
-- - An agent near its quota takes the path of 0005, one task after the other, since whether a task fits then
--   depends on whether each one before it was new.
-- The counter rows are locked first, in the order of the agents' ids, exactly as in 0005.
--
-- Matching what the insert returned with the tasks: its rows come in the order it inserted them, which is
-- the order of the tasks, so each task is first compared with the next row not yet matched; should that order
-- ever differ, the row is searched for. A task whose row is neither returned nor found is an error: the batch
-- fails, and each of its tasks is tried alone.
CREATE OR REPLACE FUNCTION pacerelle_put_messages(
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
    j         INT := 1;
    r         INT;
    n         INT := COALESCE(array_length(agent_ids, 1), 0);
    found_seq BIGINT;
    found_dev TEXT;
    found_at  BIGINT;
    -- The agents of the call (sorted, distinct), the tasks each had pending before it, those it stored one by
    -- one, and whether all its tasks fit (inserted together).
    agents    TEXT[];
    pending   BIGINT[];
    stored    BIGINT[];
    roomy     BOOLEAN[];
    -- What the insert of the roomy agents' tasks returned: agent and id (joined by a line feed, which no id
    -- holds), and the sequence number.
    keys      TEXT[];
    seqs      BIGINT[];
BEGIN
    PERFORM 1 FROM agent_counts c WHERE c.agent_id = ANY (agent_ids) ORDER BY c.agent_id FOR UPDATE;
    SELECT array_agg(u.agent_id ORDER BY u.agent_id),
           array_agg(COALESCE(c.messages - c.processed, 0) ORDER BY u.agent_id),
           array_agg(0::BIGINT ORDER BY u.agent_id),
           array_agg(COALESCE(c.messages - c.processed, 0) + u.tasks <= u.cap ORDER BY u.agent_id)
    INTO agents, pending, stored, roomy
    FROM (SELECT a.agent_id, count(*) AS tasks, min(a.cap) AS cap
          FROM unnest(agent_ids, max_pending) AS a (agent_id, cap) GROUP BY a.agent_id) u
    LEFT JOIN agent_counts c ON c.agent_id = u.agent_id;
    PERFORM set_config('pacerelle.counted_by_caller', 'on', true);

    IF true = ANY (roomy) THEN
        WITH inserted AS (
            INSERT INTO items (agent_id, kind, item_id, device_id, envelope, created_at)
            SELECT t.agent_id, 'message', t.message_id, t.device_id, t.envelope, t.now
            FROM unnest(agent_ids, device_ids, message_ids, envelopes, nows) WITH ORDINALITY
                 AS t (agent_id, device_id, message_id, envelope, now, ord)
            WHERE roomy[array_position(agents, t.agent_id)]
            ORDER BY t.ord
            ON CONFLICT (agent_id, kind, item_id) DO NOTHING
            RETURNING items.agent_id, items.item_id, items.seq
        ), counted AS (
            INSERT INTO agent_counts AS c (agent_id, messages, processed)
            SELECT s.agent_id, count(*), 0 FROM inserted s GROUP BY s.agent_id
            ON CONFLICT (agent_id) DO UPDATE SET messages = c.messages + EXCLUDED.messages
        )
        SELECT array_agg(s.agent_id || E'\n' || s.item_id), array_agg(s.seq) INTO keys, seqs FROM inserted s;
    END IF;

    FOR i IN 1 .. n LOOP
        k := array_position(agents, agent_ids[i]);
        o_seq := NULL;
        IF roomy[k] THEN
            r := NULL;
            IF keys[j] = agent_ids[i] || E'\n' || message_ids[i] THEN
                r := j;
                j := j + 1;
            ELSIF keys IS NOT NULL THEN
                r := array_position(keys, agent_ids[i] || E'\n' || message_ids[i]);
            END IF;
            IF r IS NOT NULL THEN
                -- A second use of the same id in this call finds it below.
                keys[r] := NULL;
                o_outcome := 'stored'; o_seq := seqs[r]; o_created_at := nows[i];
                RETURN NEXT;
                CONTINUE;
            END IF;
        ELSIF pending[k] + stored[k] < max_pending[i] THEN
            INSERT INTO items (agent_id, kind, item_id, device_id, envelope, created_at)
            VALUES (agent_ids[i], 'message', message_ids[i], device_ids[i], envelopes[i], nows[i])
            ON CONFLICT (agent_id, kind, item_id) DO NOTHING
            RETURNING items.seq INTO o_seq;
            IF o_seq IS NOT NULL THEN
                stored[k] := stored[k] + 1;
                o_outcome := 'stored'; o_created_at := nows[i];
                RETURN NEXT;
                CONTINUE;
            END IF;
        END IF;
        -- Not stored: the id was already taken (a retry, or another device's task), or the agent is at its quota.
        SELECT it.seq, it.device_id, it.created_at INTO found_seq, found_dev, found_at
        FROM items it
        WHERE it.agent_id = agent_ids[i] AND it.kind = 'message' AND it.item_id = message_ids[i];
        IF NOT FOUND THEN
            IF roomy[k] THEN
                RAISE EXCEPTION 'task % of agent % neither inserted nor found', message_ids[i], agent_ids[i];
            END IF;
            o_outcome := 'quota'; o_seq := NULL; o_created_at := NULL;
        ELSIF found_dev IS DISTINCT FROM device_ids[i] THEN
            o_outcome := 'conflict'; o_seq := NULL; o_created_at := NULL;
        ELSE
            o_outcome := 'found'; o_seq := found_seq; o_created_at := found_at;
        END IF;
        RETURN NEXT;
    END LOOP;
    -- The agents taken one task at a time: what the trigger would have counted, one write per agent.
    FOR k IN 1 .. COALESCE(array_length(agents, 1), 0) LOOP
        IF stored[k] > 0 THEN
            INSERT INTO agent_counts AS c (agent_id, messages, processed) VALUES (agents[k], stored[k], 0)
            ON CONFLICT (agent_id) DO UPDATE SET messages = c.messages + EXCLUDED.messages;
        END IF;
    END LOOP;
    PERFORM set_config('pacerelle.counted_by_caller', 'off', true);
END;
$$;
