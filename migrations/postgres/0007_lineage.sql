-- What made what, so that signing a sign-in out ends everything it made (one transaction, in
-- the store, so every replica sees it at once): the sign-ins made from its links, their links
-- and sign-ins in turn, its unused links, and the sessions any of them started.

-- The owner token whose sign-in link this sign-in was made from; NULL for a sign-in from the
-- CLI's link, the first start's or a team sign-in, and for MCP tokens.
ALTER TABLE tokens ADD COLUMN parent_id BYTEA;
-- Walking a sign-in's descendants when it is signed out.
CREATE INDEX tokens_by_parent ON tokens (parent_id) WHERE parent_id IS NOT NULL;

-- An unused sign-in link's id, by which the person lists and revokes it (the code itself is
-- never stored); rows made before take the first half of their code's hash.
ALTER TABLE signin_codes ADD COLUMN id BYTEA;
UPDATE signin_codes SET id = substring(code_hash from 1 for 16);
-- The owner token that minted the link; NULL for the CLI's links, the first start's and a
-- team sign-in's hand-back code.
ALTER TABLE signin_codes ADD COLUMN minted_by BYTEA;
ALTER TABLE signin_codes ADD COLUMN created_at BIGINT;
-- Listing an owner's unused links, and voiding those a signed-out sign-in minted.
CREATE INDEX signin_codes_by_owner ON signin_codes (owner_id);
CREATE INDEX signin_codes_by_minter ON signin_codes (minted_by) WHERE minted_by IS NOT NULL;

-- The owner token that started the session; NULL for sessions started before it was recorded.
ALTER TABLE sessions ADD COLUMN started_by BYTEA;
-- Ending the live sessions of a signed-out sign-in and its descendants.
CREATE INDEX sessions_live_by_starter ON sessions (started_by) WHERE ended_at IS NULL;
