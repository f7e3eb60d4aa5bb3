-- Pacerelle relay schema, version 16: questions that need several approvals (issue 37; docs/relay-api.md,
-- "Several approvals").
--
-- `approvals` is how many distinct devices must answer yes (1: the first answer decides, as before). The agent
-- gives it in clear beside the sealed question, which seals the same number: the relay only decides when the
-- question closes, and the agent counts the signed yeses itself. While fewer devices than that answered, each
-- answer is kept in `approvals` and the question stays pending; the answer that reaches the number, or one its
-- device says closes the question (a no), closes it as answered, and is kept there too. One row per device:
-- a device answers once.
ALTER TABLE questions ADD COLUMN approvals INTEGER NOT NULL DEFAULT 1;

CREATE TABLE approvals (
    item_seq    INTEGER NOT NULL REFERENCES questions (item_seq),
    device_id   TEXT    NOT NULL REFERENCES devices (device_id),
    answered_at INTEGER NOT NULL,              -- by the relay's clock
    envelope    TEXT    NOT NULL,              -- sealed by the device for the agent
    copy        TEXT,                          -- sealed with the question's answer key
    PRIMARY KEY (item_seq, device_id)
) STRICT;
