-- The channel an answer came through: the same column and rule as the SQLite migration
-- `../migrations/0013_channel.sql` (read it for their meaning). 'phone' (a device, named by `answered_by`) or
-- 'host' (at the computer, recorded by the agent: no device); NULL while unanswered. Answered rows of before get
-- 'phone'. The check that tied `answered` to a device is replaced: 0001 created it unnamed, so PostgreSQL named
-- it `questions_check1` (the second table check of `questions`).
ALTER TABLE questions ADD COLUMN channel TEXT NULL CHECK (channel IN ('phone', 'host'));

UPDATE questions SET channel = 'phone' WHERE state = 'answered';

ALTER TABLE questions DROP CONSTRAINT questions_check1;
ALTER TABLE questions ADD CONSTRAINT questions_answered_check
    CHECK ((state = 'answered') = (answered_at IS NOT NULL AND answer_envelope IS NOT NULL
                                   AND channel IS NOT NULL AND (channel = 'host') = (answered_by IS NULL)));
