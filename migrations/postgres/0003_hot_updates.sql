-- PostgreSQL only (SQLite rewrites a row in place whatever its indexes cover).
--
-- A reply and a delivery mark change only `state`, `reply`, `envelope` and `answered_at`. When
-- no index covers a changed column, not even in a partial index's WHERE, PostgreSQL updates the
-- row on its page without new index entries (a HOT update). The two partial indexes on `state`
-- made every state change a full update into all five indexes. They are now keyed on
-- `lease_expires_at`, which is set once, when a call leaves `pending`: a claim sets it to the
-- lease's end, and a cancel or expiry of a pending call to the call's `expires_at`.

UPDATE calls SET lease_expires_at = expires_at WHERE lease_expires_at IS NULL AND state <> 'pending';

-- The claim's queue: pending calls of a session, oldest first.
DROP INDEX calls_pending_by_session;
CREATE INDEX calls_pending_by_session ON calls (owner_id, session_id, created_at)
    WHERE lease_expires_at IS NULL;

-- The sweeper's lapsed claims, read in a window of lease ends since its last sweep.
DROP INDEX calls_claimed_by_lease;
CREATE INDEX calls_by_lease ON calls (lease_expires_at) WHERE lease_expires_at IS NOT NULL;
