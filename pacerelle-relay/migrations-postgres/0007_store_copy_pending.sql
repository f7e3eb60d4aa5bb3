-- `pacerelle store copy` into this database (issue 36): its one row says that copies from a SQLite relay filled
-- the database and that no relay has opened it since. While it is there, a later copy may delete the rows the
-- SQLite relay deleted after an earlier copy (pushes and webhook events delivered, retention, a device's
-- subscription removed), which it otherwise refuses as another relay's data: that is what lets a first copy run
-- while the SQLite relay still serves, and a last one after it stopped take only the moments the changes need.
-- A relay that opens the database removes the row (`PgStore::open`): from then on, what the database holds that
-- the SQLite file lacks is the PostgreSQL relay's own, and a copy refuses it again.
CREATE TABLE store_copy_pending (
    only_row   BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (only_row),
    started_at BIGINT NOT NULL
);
