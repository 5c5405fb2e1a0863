-- A live session's latest catalog update (opaque, sealed by the tab) and its number, read
-- from the update's clear header: a tool list that changed without a new session. Dropped,
-- like the hello, when the session ends.
ALTER TABLE sessions ADD COLUMN catalog_update BYTEA, ADD COLUMN catalog_seq BIGINT;
