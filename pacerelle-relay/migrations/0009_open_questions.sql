-- The quota on open questions (`--max-open-questions`, docs/relay-api.md, "Limits"): storing a new question
-- counts the agent's questions still pending and not yet past their expiry, up to the cap, in the storing
-- transaction. This index holds only pending questions (the expirer moves the expired ones out), so that count
-- reads at most the open ones and those just due, however many questions the agent has asked before.
CREATE INDEX questions_open_by_agent ON questions (agent_id, expires_at) WHERE state = 'pending';
