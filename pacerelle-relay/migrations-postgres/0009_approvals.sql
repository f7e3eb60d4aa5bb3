-- Questions that need several approvals (issue 37): the same column and table as the SQLite migration
-- `../migrations/0016_approvals.sql` (read it for their meaning).
ALTER TABLE questions ADD COLUMN approvals BIGINT NOT NULL DEFAULT 1;

CREATE TABLE approvals (
    item_seq    BIGINT NOT NULL REFERENCES questions (item_seq),
    device_id   TEXT   NOT NULL REFERENCES devices (device_id),
    answered_at BIGINT NOT NULL,
    envelope    TEXT   NOT NULL,
    copy        TEXT,
    PRIMARY KEY (item_seq, device_id)
);
