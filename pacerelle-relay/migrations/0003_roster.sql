-- Pacerelle relay schema, version 3: the agent's sealed device roster, and the copy of an answer that every
-- recipient of a question can open (DESIGN §12).
--
-- `rosters` holds, per agent, only the newest roster: sealed with the agent's self key, which the relay never
-- has. The relay cannot read it, and a roster it forged or rolled back would not open, or would be older than
-- what an agent host has seen. `version` is in clear so that an update can be a compare-and-set.

CREATE TABLE rosters (
    agent_id   TEXT    NOT NULL PRIMARY KEY REFERENCES agents (agent_id),
    version    INTEGER NOT NULL CHECK (version > 0),
    envelope   TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;

-- The answer sealed with the question's answer key, for the other recipients to show; NULL for answers given
-- before this version or by a device that sent none.
ALTER TABLE questions ADD COLUMN answer_copy TEXT;
