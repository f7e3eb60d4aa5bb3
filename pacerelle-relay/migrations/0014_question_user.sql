-- Pacerelle relay schema, version 14: the user a question is for (Partner mode; docs/relay-api.md, "Questions").
--
-- `user_id` is the `externalId` of the agent's user the question was asked for, as the agent gave it in clear
-- beside the sealed question (`userId` of `POST /v1/agent/questions`, checked: 1 to 128 characters, no control
-- characters). The relay stores it and repeats it in the agent's views of the question and in its webhook
-- events, so that an integrator's backend knows which of its users an event concerns. It is informational
-- only: the addressee that counts is sealed in the question, and the relay routes by device. NULL for the
-- owner's questions and for every question of earlier versions.
ALTER TABLE questions ADD COLUMN user_id TEXT;
