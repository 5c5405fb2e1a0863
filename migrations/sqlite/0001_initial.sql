-- Sealpost relay schema, SQLite. Ids are 16-byte BLOB values; times are Unix milliseconds.
-- The relay stores only ciphertext (envelopes, replies) and opaque hellos.
-- Applied by `sqlx::migrate!` (bookkept in `_sqlx_migrations`); a file, once released, is
-- never edited: a change is a new numbered file in both migrations/sqlite and migrations/postgres.

-- People who may use the relay: every query about tokens, sessions and calls is scoped by an
-- owner's id. `name` is how the admin CLI refers to them (unique, so `owner link NAME` is
-- unambiguous); `disabled_at` stops an owner without deleting what they hold.
CREATE TABLE owners (
    id          BLOB    PRIMARY KEY,
    name        TEXT    NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL,
    disabled_at INTEGER
);

-- One-time sign-in codes (`owner add`, sign-in links), stored as SHA-256 so a database reader
-- cannot sign in. The primary key is the lookup of an exchange; a row is deleted when used.
CREATE TABLE signin_codes (
    code_hash  BLOB    PRIMARY KEY,
    owner_id   BLOB    NOT NULL REFERENCES owners(id),
    expires_at INTEGER NOT NULL
);

-- One row per issued bearer token (owner sign-ins and MCP tokens). A JWT names its row by
-- `sid`; the row is checked on every request so revocation takes effect at once.
CREATE TABLE tokens (
    id         BLOB    PRIMARY KEY,
    owner_id   BLOB    NOT NULL REFERENCES owners(id),
    kind       TEXT    NOT NULL CHECK (kind IN ('owner', 'mcp')),
    pair_id    BLOB,
    label      TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    revoked_at INTEGER
);
-- Listing an owner's MCP tokens, and revoking all of an owner's tokens when they are disabled.
CREATE INDEX tokens_by_owner ON tokens (owner_id, kind);

-- Browser sessions: one tab executing for one pairing. The hello is kept byte for byte while
-- the session is live (plugins fetch it), then dropped. `claimer_seen_at` tells a plugin the
-- tab is still polling.
CREATE TABLE sessions (
    owner_id        BLOB    NOT NULL,
    session_id      BLOB    NOT NULL,
    pair_id         BLOB    NOT NULL,
    hello           BLOB,
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    ended_at        INTEGER,
    claimer_seen_at INTEGER,
    PRIMARY KEY (owner_id, session_id)
);
-- Finding a pairing's live session (and ending the previous one) without scanning ended rows.
CREATE INDEX sessions_live_by_pair ON sessions (owner_id, pair_id) WHERE ended_at IS NULL;
-- The sweeper's scan for overdue sessions, without reading every session.
CREATE INDEX sessions_by_expiry ON sessions (expires_at);

-- Calls. `envelope` is the sealed call, `reply` the sealed answer; both are cleared when the
-- call reaches a state that no longer needs them. `pair_id` is copied from the session so an
-- MCP token's scope is checked on the call row alone.
CREATE TABLE calls (
    owner_id         BLOB    NOT NULL,
    call_id          BLOB    NOT NULL,
    session_id       BLOB    NOT NULL,
    pair_id          BLOB    NOT NULL,
    state            TEXT    NOT NULL CHECK (state IN
                       ('pending', 'claimed', 'answered', 'delivered', 'expired', 'cancelled')),
    envelope         BLOB,
    reply            BLOB,
    cancel_reason    TEXT,
    created_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    lease_expires_at INTEGER,
    answered_at      INTEGER,
    PRIMARY KEY (owner_id, call_id)
);
-- The claim and the pending-calls limit: oldest pending calls of one session. Partial, so it
-- holds only the queue, not every call the session ever had.
CREATE INDEX calls_pending_by_session ON calls (owner_id, session_id, created_at)
    WHERE state = 'pending';
-- Cancelling a session's open calls when it ends.
CREATE INDEX calls_by_session ON calls (owner_id, session_id);
-- The sweeper: calls past their expiry (to expire, clear bytes, delete).
CREATE INDEX calls_by_expiry ON calls (expires_at);
-- The sweeper: claimed calls whose lease lapsed (partial: only claimed calls).
CREATE INDEX calls_claimed_by_lease ON calls (lease_expires_at) WHERE state = 'claimed';

-- Secrets the relay generates once and keeps with its data (the token signing key), so every
-- replica and every restart signs and verifies with the same key.
CREATE TABLE relay_secrets (
    name  TEXT PRIMARY KEY,
    value BLOB NOT NULL
);
