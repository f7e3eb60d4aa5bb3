-- The user a question is for (Partner mode): the same column as the SQLite migration
-- `../migrations/0014_question_user.sql` (read it for its meaning). The `externalId` the agent gave in clear
-- beside the sealed question, informational only; NULL for the owner's questions and those of before.
ALTER TABLE questions ADD COLUMN user_id TEXT NULL;
