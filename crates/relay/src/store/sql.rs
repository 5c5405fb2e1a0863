//! Statements whose text is the same on SQLite and PostgreSQL, written once.
//!
//! Both backends take `$N` placeholders (SQLite reads `$N` as parameter N), so a statement
//! that uses no dialect-specific function, cast or operator lives here and each backend binds
//! the same values in the same order. What really differs stays with its backend: SQLite's
//! grouped call-loop statements over `VALUES`, PostgreSQL's `SKIP LOCKED` claim and
//! `pg_notify`, `MIN`/`MAX` against `LEAST`/`GREATEST`, `IS` against `IS NOT DISTINCT FROM`.

/// `$1` name, `$2` fresh value: stores a secret unless one of that name exists.
pub(crate) const INSERT_SECRET: &str =
    "INSERT INTO relay_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING";
/// `$1` name.
pub(crate) const SELECT_SECRET: &str = "SELECT value FROM relay_secrets WHERE name = $1";

/// `$1` id, `$2` name, `$3` now.
pub(crate) const INSERT_OWNER: &str =
    "INSERT INTO owners (id, name, created_at) VALUES ($1, $2, $3)";
pub(crate) const SELECT_OWNERS: &str = "SELECT * FROM owners ORDER BY name";
/// `$1` name.
pub(crate) const SELECT_OWNER_BY_NAME: &str = "SELECT * FROM owners WHERE name = $1";
/// `$1` id.
pub(crate) const SELECT_OWNER_BY_ID: &str = "SELECT * FROM owners WHERE id = $1";
/// `$1` name, `$2` now: returns the owner's id.
pub(crate) const DISABLE_OWNER: &str =
    "UPDATE owners SET disabled_at = COALESCE(disabled_at, $2) WHERE name = $1 RETURNING id";
/// `$1` owner id, `$2` now.
pub(crate) const REVOKE_OWNER_TOKENS: &str =
    "UPDATE tokens SET revoked_at = $2 WHERE owner_id = $1 AND revoked_at IS NULL";
/// `$1` owner id.
pub(crate) const DELETE_OWNER_SIGNIN_CODES: &str = "DELETE FROM signin_codes WHERE owner_id = $1";

/// `$1` code hash, `$2` owner id, `$3` expires_at, `$4` app, `$5` inherited lifetime end, `$6`
/// the PKCE challenge the code is bound to, `$7` link id, `$8` the minting sign-in, `$9` now.
pub(crate) const INSERT_SIGNIN_CODE: &str = "INSERT INTO signin_codes \
     (code_hash, owner_id, expires_at, app_origin, lifetime_ends_at, pkce_challenge, id, \
     minted_by, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";
/// `$1` code hash, `$2` now: uses the code up (one statement, so it works once) and returns
/// what it grants.
pub(crate) const CONSUME_SIGNIN_CODE: &str = "DELETE FROM signin_codes WHERE code_hash = $1 AND expires_at > $2 \
     AND owner_id IN (SELECT id FROM owners WHERE disabled_at IS NULL) \
     RETURNING owner_id, app_origin, lifetime_ends_at, pkce_challenge, minted_by";

/// `$1` id … `$10` parent_id, in the column order.
pub(crate) const INSERT_TOKEN: &str = "INSERT INTO tokens \
     (id, owner_id, kind, pair_id, label, created_at, expires_at, app_origin, lifetime_ends_at, \
     parent_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)";
/// `$1` token id, `$2` owner id: whether the owner's token is unrevoked (a row that would
/// descend from it is made only then: a signed-out sign-in makes nothing more).
pub(crate) const SELECT_UNREVOKED_TOKEN: &str =
    "SELECT id FROM tokens WHERE id = $1 AND owner_id = $2 AND revoked_at IS NULL";

/// The sign-in `$1` of owner `$2` and every sign-in made, link by link, from it: what signing
/// it out ends. `UNION` (not `ALL`) stops at a row already reached.
macro_rules! lineage {
    () => {
        "WITH RECURSIVE lineage(id) AS (SELECT id FROM tokens WHERE id = $1 AND owner_id = $2 \
         UNION SELECT t.id FROM tokens t JOIN lineage l ON t.parent_id = l.id) "
    };
}
/// `$1` the signed-out token, `$2` owner id, `$3` now: revokes it and its descendants.
pub(crate) const REVOKE_LINEAGE: &str = concat!(
    lineage!(),
    "UPDATE tokens SET revoked_at = COALESCE(revoked_at, $3) \
     WHERE owner_id = $2 AND id IN (SELECT id FROM lineage)"
);
/// `$1` the signed-out token, `$2` owner id: voids the unused links it and its descendants
/// minted.
pub(crate) const VOID_LINEAGE_LINKS: &str = concat!(
    lineage!(),
    "DELETE FROM signin_codes WHERE owner_id = $2 AND minted_by IN (SELECT id FROM lineage)"
);
/// `$1` the signed-out token, `$2` owner id, `$3` now: ends the live sessions it and its
/// descendants started; returns `owner_id, session_id` of each.
pub(crate) const END_LINEAGE_SESSIONS: &str = concat!(
    lineage!(),
    "UPDATE sessions SET ended_at = $3, hello = NULL, catalog_update = NULL \
     WHERE owner_id = $2 AND ended_at IS NULL AND started_by IN (SELECT id FROM lineage) \
     RETURNING owner_id, session_id"
);

/// `$1` owner id, `$2` now, `$3` the app of the token that asks (as for
/// [`SELECT_OWNER_TOKENS`]): the owner's unused sign-in links, soonest to lapse first.
pub(crate) const SELECT_SIGNIN_LINKS: &str = "SELECT id, app_origin, minted_by, created_at, \
     expires_at FROM signin_codes WHERE owner_id = $1 AND expires_at > $2 AND id IS NOT NULL \
     AND ($3 = '' OR app_origin = $3) ORDER BY expires_at, id";
/// `$1` link id, `$2` owner id, `$3` the app of the token that asks: voids one unused link.
pub(crate) const DELETE_SIGNIN_LINK: &str = "DELETE FROM signin_codes WHERE id = $1 \
     AND owner_id = $2 AND ($3 = '' OR app_origin = $3)";
/// `$1` id, `$2` now.
pub(crate) const SELECT_ACTIVE_TOKEN: &str = "SELECT t.* FROM tokens t JOIN owners o ON o.id = t.owner_id \
     WHERE t.id = $1 AND t.revoked_at IS NULL AND t.expires_at > $2 AND o.disabled_at IS NULL \
     AND (o.confirmed_until IS NULL OR o.confirmed_until > $2)";
/// `$1` owner id, `$2` now, `$3` the app of the token that asks: its own app's tokens, or
/// every app's for the relay's own (`''`, see `scope`).
pub(crate) const SELECT_OWNER_TOKENS: &str = "SELECT * FROM tokens WHERE owner_id = $1 AND kind = 'owner' \
     AND revoked_at IS NULL AND expires_at > $2 AND ($3 = '' OR app_origin = $3) \
     ORDER BY created_at";
/// Bytes each owner's calls and replies hold now.
pub(crate) const BYTES_HELD_BY_OWNER: &str = "SELECT owner_id, \
     SUM(COALESCE(LENGTH(envelope), 0) + COALESCE(LENGTH(reply), 0)) AS held FROM calls \
     WHERE envelope IS NOT NULL OR reply IS NOT NULL GROUP BY owner_id";
/// `$1` owner id, `$2` now: the owner's live MCP tokens and unused sign-in codes, per app.
pub(crate) const COUNT_LIVE_GRANTS: &str = "SELECT app_origin, SUM(mcp) AS mcp, \
     SUM(codes) AS codes FROM (\
     SELECT app_origin, 1 AS mcp, 0 AS codes FROM tokens WHERE owner_id = $1 AND kind = 'mcp' \
      AND revoked_at IS NULL AND expires_at > $2 \
     UNION ALL SELECT app_origin, 0 AS mcp, 1 AS codes FROM signin_codes \
      WHERE owner_id = $1 AND expires_at > $2) held GROUP BY app_origin ORDER BY app_origin";
/// `$1` owner name: enables the owner (their old tokens stay revoked).
pub(crate) const ENABLE_OWNER: &str =
    "UPDATE owners SET disabled_at = NULL WHERE name = $1 RETURNING id";
/// `$1` owner id, `$2` now, `$3` the id to list after (an empty blob: from the start), `$4` the
/// most rows, `$5` the app of the token that asks (as for [`SELECT_OWNER_TOKENS`]). Keyed by
/// id, so a page boundary holds whatever is minted or revoked meanwhile.
pub(crate) const SELECT_MCP_TOKENS: &str = "SELECT * FROM tokens WHERE owner_id = $1 AND kind = 'mcp' \
     AND revoked_at IS NULL AND expires_at > $2 AND id > $3 AND ($5 = '' OR app_origin = $5) \
     ORDER BY id LIMIT $4";
/// `$1` id, `$2` owner id, `$3` now, `$4` kind (NULL: either), `$5` the app of the token that
/// asks (as for [`SELECT_OWNER_TOKENS`]).
pub(crate) const REVOKE_TOKEN: &str = "UPDATE tokens SET revoked_at = COALESCE(revoked_at, $3) \
     WHERE id = $1 AND owner_id = $2 AND (CAST($4 AS TEXT) IS NULL OR kind = $4) \
     AND ($5 = '' OR app_origin = $5)";

/// `$1` owner id, `$2` pair id, `$3` now, `$4` app: the owner's live sessions per app, but the
/// one this pairing's new session of this app replaces.
pub(crate) const COUNT_OTHER_LIVE_SESSIONS: &str = "SELECT app_origin, COUNT(*) AS n FROM sessions \
     WHERE owner_id = $1 AND NOT (pair_id = $2 AND app_origin = $4) AND ended_at IS NULL \
     AND expires_at > $3 GROUP BY app_origin ORDER BY app_origin";
/// `$1` owner id, `$2` now: the owner's live sessions per app.
pub(crate) const COUNT_LIVE_SESSIONS: &str = "SELECT app_origin, COUNT(*) AS n FROM sessions \
     WHERE owner_id = $1 AND ended_at IS NULL AND expires_at > $2 \
     GROUP BY app_origin ORDER BY app_origin";
/// `$1` owner id, `$2` pair id, `$3` now, `$4` app: ends the pairing's live session in that app
/// (a new one replaces it); another app's session of the same pairing goes on.
pub(crate) const END_PAIRING_SESSIONS: &str = "UPDATE sessions SET ended_at = $3, hello = NULL, \
     catalog_update = NULL WHERE owner_id = $1 AND pair_id = $2 AND app_origin = $4 \
     AND ended_at IS NULL RETURNING owner_id, session_id";
/// `$1` owner id … `$6` expires_at, `$7` app, `$8` started_by, in the column order.
pub(crate) const INSERT_SESSION: &str = "INSERT INTO sessions \
     (owner_id, session_id, pair_id, hello, created_at, expires_at, app_origin, started_by) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";
/// `$1` owner id, `$2` pair id, `$3` now, `$4` app.
pub(crate) const SELECT_LIVE_SESSION: &str = "SELECT session_id, hello, expires_at, claimer_seen_at, plugin_seen_at, \
     catalog_update FROM sessions \
     WHERE owner_id = $1 AND pair_id = $2 AND app_origin = $4 AND ended_at IS NULL \
     AND expires_at > $3 ORDER BY created_at DESC LIMIT 1";
/// `$1` owner id, `$2` session id, `$3` now: the plugin looked the live session up.
pub(crate) const MARK_PLUGIN_SEEN: &str = "UPDATE sessions SET plugin_seen_at = $3 \
     WHERE owner_id = $1 AND session_id = $2 AND ended_at IS NULL";
/// `$1` owner id, `$2` session id, `$3` now: a tab claimed from the live session (PostgreSQL's;
/// SQLite's writer checks the token in the same statement).
pub(crate) const MARK_CLAIMER_SEEN: &str = "UPDATE sessions SET claimer_seen_at = $3 \
     WHERE owner_id = $1 AND session_id = $2 AND ended_at IS NULL";
/// `$1` owner id, `$2` session id, `$3` now, `$4` the update, `$5` its number, `$6` app: keeps a
/// live session's catalog update when it is newer than the one kept (returns the session's id
/// then).
pub(crate) const SET_CATALOG_UPDATE: &str = "UPDATE sessions SET catalog_update = $4, catalog_seq = $5 \
     WHERE owner_id = $1 AND session_id = $2 AND app_origin = $6 AND ended_at IS NULL \
     AND expires_at > $3 AND (catalog_seq IS NULL OR catalog_seq < $5) RETURNING session_id";
/// `$1` owner id, `$2` session id, `$3` now, `$4` app: whether the session is live (why an
/// update was not kept).
pub(crate) const SELECT_SESSION_LIVE: &str = "SELECT session_id FROM sessions \
     WHERE owner_id = $1 AND session_id = $2 AND app_origin = $4 AND ended_at IS NULL \
     AND expires_at > $3";
/// `$1` owner id, `$2` session id, `$3` now, `$4` app: ends a session; ending an ended one
/// keeps its end.
pub(crate) const END_SESSION: &str = "UPDATE sessions SET ended_at = COALESCE(ended_at, $3), hello = NULL, \
     catalog_update = NULL WHERE owner_id = $1 AND session_id = $2 AND app_origin = $4 \
     RETURNING owner_id";
/// `$1` owner id, `$2` session id: cancels an ended session's open calls (SQLite's; PostgreSQL
/// takes the calls' locks in order: `postgres::sessions::CANCEL_SESSION_CALLS_IN_ORDER`).
pub(crate) const CANCEL_SESSION_CALLS: &str = "UPDATE calls SET state = 'cancelled', \
     cancel_reason = 'session_ended', envelope = NULL \
     WHERE owner_id = $1 AND session_id = $2 AND state IN ('pending', 'claimed') \
     RETURNING call_id";
/// `$1` owner id, `$2` session id, `$3` the posting token's id: what explains a post that
/// inserted nothing (another app's session is not found).
pub(crate) const SELECT_SESSION_STATE: &str = concat!(
    "SELECT pair_id, expires_at, ended_at FROM sessions \
     WHERE owner_id = $1 AND session_id = $2 AND app_origin = ",
    token_app!("$3")
);

/// `$1` owner id, `$2` call id: a claimed call whose lease lapsed expires for good.
pub(crate) const EXPIRE_LAPSED_CLAIM: &str = "UPDATE calls SET state = 'expired', envelope = NULL \
     WHERE owner_id = $1 AND call_id = $2 AND state = 'claimed'";

/// The sweeper's statements, in the order it runs them; each binds `$1`, which is now unless
/// it says now − grace. A pending call that expires gets its expiry as its lease end
/// (PostgreSQL's pending index is keyed on the lease being unset: migrations/postgres/0003).
pub(crate) const SWEEP_EXPIRE_PENDING: &str = "UPDATE calls SET state = 'expired', envelope = NULL, \
     lease_expires_at = expires_at \
     WHERE state = 'pending' AND lease_expires_at IS NULL AND expires_at <= $1";
/// SQLite's; PostgreSQL reads only the lease ends since its last sweep
/// (`postgres::calls::SWEEP_EXPIRE_LAPSED_SINCE`).
pub(crate) const SWEEP_EXPIRE_LAPSED: &str = "UPDATE calls SET state = 'expired', envelope = NULL \
     WHERE state = 'claimed' AND lease_expires_at <= $1";
pub(crate) const SWEEP_CLEAR_BYTES: &str = "UPDATE calls SET reply = NULL, envelope = NULL \
     WHERE expires_at <= $1 AND (reply IS NOT NULL OR envelope IS NOT NULL)";
/// `$1` now − grace.
pub(crate) const SWEEP_DELETE_CALLS: &str = "DELETE FROM calls WHERE expires_at <= $1";
/// `$1` now: returns the sessions that ended.
pub(crate) const SWEEP_END_SESSIONS: &str = "UPDATE sessions SET ended_at = $1, hello = NULL, \
     catalog_update = NULL WHERE ended_at IS NULL AND expires_at <= $1 RETURNING owner_id, session_id";
/// `$1` now − grace: sessions with no call rows left.
pub(crate) const SWEEP_DELETE_SESSIONS: &str = "DELETE FROM sessions WHERE ended_at <= $1 \
     AND NOT EXISTS (SELECT 1 FROM calls c WHERE c.owner_id = sessions.owner_id \
     AND c.session_id = sessions.session_id)";
/// `$1` now.
pub(crate) const SWEEP_DELETE_SIGNIN_CODES: &str =
    "DELETE FROM signin_codes WHERE expires_at <= $1";
/// `$1` now: team sign-ins never finished.
pub(crate) const SWEEP_DELETE_OIDC_FLOWS: &str = "DELETE FROM oidc_flows WHERE expires_at <= $1";
/// `$1` now − grace. A row something still descends from (a sign-in, an unused link) stays:
/// signing it out must still reach them, and what it would have made is refused without it.
pub(crate) const SWEEP_DELETE_TOKENS: &str = "DELETE FROM tokens \
     WHERE (expires_at <= $1 OR revoked_at <= $1) \
     AND NOT EXISTS (SELECT 1 FROM tokens c WHERE c.parent_id = tokens.id) \
     AND NOT EXISTS (SELECT 1 FROM signin_codes s WHERE s.minted_by = tokens.id)";

pub(crate) const COUNT_CALLS_BY_STATE: &str =
    "SELECT state, COUNT(*) AS n FROM calls GROUP BY state";
/// `$1` owner id, `$2` call id, `$3` the raw integer to store as the call's expiry
/// ([`super::Inspect::overwrite_call_expiry`], for tests).
pub(crate) const OVERWRITE_CALL_EXPIRY: &str =
    "UPDATE calls SET expires_at = $3 WHERE owner_id = $1 AND call_id = $2";

/// `$1` owner id, `$2` call id.
pub(crate) const SELECT_HELD_BYTES: &str = "SELECT envelope IS NOT NULL AS e, reply IS NOT NULL AS r FROM calls \
     WHERE owner_id = $1 AND call_id = $2";
