-- Host apps on their own origins (`--app-origin`): which app each sign-in code, token, session
-- and call belongs to, as the origin a browser writes (`https://app.example.com`), or '' for
-- the relay's own web app (every row made before). '' rather than NULL, so that "the same app"
-- is a plain `=` in both dialects. The relay records it when it makes the row, from what made
-- it (the CLI's `--app`, the token that minted a link, the code, the session), never from a
-- request's Origin header.
ALTER TABLE signin_codes ADD COLUMN app_origin TEXT NOT NULL DEFAULT '';
-- A link a signed-in token minted passes on that sign-in's absolute end, so a sign-in made from
-- it never outlives the one that made the link; NULL for the CLI's links and the first start.
ALTER TABLE signin_codes ADD COLUMN lifetime_ends_at BIGINT;
ALTER TABLE tokens ADD COLUMN app_origin TEXT NOT NULL DEFAULT '';
-- The latest an owner token may ever be renewed to, fixed at sign-in; NULL for MCP tokens and
-- for sign-ins made before it was recorded (their end is the sign-in plus the lifetime).
ALTER TABLE tokens ADD COLUMN lifetime_ends_at BIGINT;
ALTER TABLE sessions ADD COLUMN app_origin TEXT NOT NULL DEFAULT '';
-- Copied from the session at post, as `pair_id` is, so a call's app is checked on its row alone.
ALTER TABLE calls ADD COLUMN app_origin TEXT NOT NULL DEFAULT '';
