//! Rows to store types, written once for both backends.
//!
//! The two backends select the same columns under the same names; only their SQL text differs.
//! [`Columns`] reads a column of either backend's row by name, so each mapping below serves
//! both, and a column read the same way cannot drift between them.

use sealpost_protocol::api::CallState;
use sealpost_protocol::ids::{Id, OwnerId, PairId, SessionId};
use sealpost_time::UnixMillis;
use sqlx::{ColumnIndex, Decode, Row, Type};

use crate::scope::AppScope;

use super::{
    AppGrants, CallView, ClaimedRow, HeldBytes, LiveGrants, LiveSession, OwnerRow, SigninGrant,
    SigninLinkRow, StoreError, StoreResult, TokenRow, call_view, effective_state, id_from,
    parse_app, parse_kind, parse_reason, parse_state, time_from_sql,
};

/// Typed reads of a row's columns by name.
pub(crate) trait Columns {
    fn id<I: Id>(&self, column: &str) -> StoreResult<I>;
    fn opt_id<I: Id>(&self, column: &str) -> StoreResult<Option<I>>;
    fn opt_bytes(&self, column: &str) -> StoreResult<Option<Vec<u8>>>;
    fn int(&self, column: &str) -> StoreResult<i64>;
    fn opt_int(&self, column: &str) -> StoreResult<Option<i64>>;
    /// A time column (see `time_from_sql`).
    fn time(&self, column: &str) -> StoreResult<UnixMillis> {
        self.int(column).map(time_from_sql)
    }
    /// A time column that may be NULL.
    fn opt_time(&self, column: &str) -> StoreResult<Option<UnixMillis>> {
        Ok(self.opt_int(column)?.map(time_from_sql))
    }
    fn text(&self, column: &str) -> StoreResult<String>;
    fn opt_text(&self, column: &str) -> StoreResult<Option<String>>;
    fn flag(&self, column: &str) -> StoreResult<bool>;
}

impl<R> Columns for R
where
    R: Row,
    for<'c> &'c str: ColumnIndex<R>,
    for<'r> Vec<u8>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> bool: Decode<'r, R::Database> + Type<R::Database>,
{
    fn id<I: Id>(&self, column: &str) -> StoreResult<I> {
        id_from(self.try_get(column)?)
    }

    fn opt_id<I: Id>(&self, column: &str) -> StoreResult<Option<I>> {
        self.opt_bytes(column)?.map(id_from).transpose()
    }

    fn opt_bytes(&self, column: &str) -> StoreResult<Option<Vec<u8>>> {
        Ok(self.try_get(column)?)
    }

    fn int(&self, column: &str) -> StoreResult<i64> {
        Ok(self.try_get(column)?)
    }

    fn opt_int(&self, column: &str) -> StoreResult<Option<i64>> {
        Ok(self.try_get(column)?)
    }

    fn text(&self, column: &str) -> StoreResult<String> {
        Ok(self.try_get(column)?)
    }

    fn opt_text(&self, column: &str) -> StoreResult<Option<String>> {
        Ok(self.try_get(column)?)
    }

    fn flag(&self, column: &str) -> StoreResult<bool> {
        Ok(self.try_get(column)?)
    }
}

/// An `owners` row.
pub(crate) fn owner(row: &impl Columns) -> StoreResult<OwnerRow> {
    Ok(OwnerRow {
        id: row.id("id")?,
        name: row.text("name")?,
        created_at: row.time("created_at")?,
        disabled: row.opt_int("disabled_at")?.is_some(),
        confirmed_until: row.opt_time("confirmed_until")?,
    })
}

/// A `tokens` row.
pub(crate) fn token(row: &impl Columns) -> StoreResult<TokenRow> {
    Ok(TokenRow {
        id: row.id("id")?,
        owner_id: row.id("owner_id")?,
        kind: parse_kind(&row.text("kind")?)?,
        pair_id: row.opt_id("pair_id")?,
        label: row.text("label")?,
        created_at: row.time("created_at")?,
        expires_at: row.time("expires_at")?,
        app: parse_app(&row.text("app_origin")?)?,
        lifetime_ends_at: row.opt_time("lifetime_ends_at")?,
        parent_id: row.opt_id("parent_id")?,
    })
}

/// `owner_id, app_origin, lifetime_ends_at, pkce_challenge, minted_by` of a sign-in code just
/// used.
pub(crate) fn signin_grant(row: &impl Columns) -> StoreResult<SigninGrant> {
    Ok(SigninGrant {
        owner_id: row.id("owner_id")?,
        app: parse_app(&row.text("app_origin")?)?,
        lifetime_ends_at: row.opt_time("lifetime_ends_at")?,
        pkce_challenge: row
            .opt_bytes("pkce_challenge")?
            .map(|bytes| {
                bytes.try_into().map_err(|_| {
                    StoreError::Unreadable("signin_codes.pkce_challenge is not 32 bytes".into())
                })
            })
            .transpose()?,
        minted_by: row.opt_id("minted_by")?,
    })
}

/// `id, app_origin, minted_by, created_at, expires_at` of an unused sign-in link.
pub(crate) fn signin_link(row: &impl Columns) -> StoreResult<SigninLinkRow> {
    Ok(SigninLinkRow {
        id: row.id("id")?,
        app: parse_app(&row.text("app_origin")?)?,
        minted_by: row.opt_id("minted_by")?,
        created_at: row.opt_time("created_at")?,
        expires_at: row.time("expires_at")?,
    })
}

/// `app_origin, n`: how many live sessions an app holds.
pub(crate) fn app_sessions(rows: &[impl Columns]) -> StoreResult<Vec<(AppScope, i64)>> {
    rows.iter()
        .map(|row| Ok((parse_app(&row.text("app_origin")?)?, row.int("n")?)))
        .collect()
}

/// `app_origin, mcp, codes`: what an app holds against the owner's quotas.
pub(crate) fn live_grants(rows: &[impl Columns]) -> StoreResult<LiveGrants> {
    let by_app = rows
        .iter()
        .map(|row| {
            Ok(AppGrants {
                app: parse_app(&row.text("app_origin")?)?,
                mcp_tokens: row.int("mcp")?,
                signin_codes: row.int("codes")?,
            })
        })
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(LiveGrants { by_app })
}

/// `session_id, hello, expires_at, claimer_seen_at, plugin_seen_at` of a live session.
pub(crate) fn live_session(row: &impl Columns) -> StoreResult<LiveSession> {
    Ok(LiveSession {
        session_id: row.id("session_id")?,
        hello: row.opt_bytes("hello")?.unwrap_or_default(),
        expires_at: row.time("expires_at")?,
        claimer_seen_at: row.opt_time("claimer_seen_at")?,
        plugin_seen_at: row.opt_time("plugin_seen_at")?,
        catalog_update: row.opt_bytes("catalog_update")?,
    })
}

/// `(owner_id, session_id)` of `owner_id, session_id` rows (sessions that just ended).
pub(crate) fn owner_sessions(rows: &[impl Columns]) -> StoreResult<Vec<(OwnerId, SessionId)>> {
    rows.iter()
        .map(|row| Ok((row.id("owner_id")?, row.id("session_id")?)))
        .collect()
}

/// Why a post inserted nothing, from its session's `pair_id, expires_at, ended_at` (if the
/// session exists in the token's app), in the order a client can act on.
pub(crate) fn why_not_posted(
    session: Option<&impl Columns>,
    pair_id: Option<PairId>,
    posted_at: UnixMillis,
) -> StoreError {
    let why = || {
        let Some(session) = session else {
            return Ok(StoreError::NotFound);
        };
        if let Some(pair_id) = pair_id
            && session.id::<PairId>("pair_id")? != pair_id
        {
            return Ok(StoreError::NotFound);
        }
        if session.opt_int("ended_at")?.is_some() || session.time("expires_at")? <= posted_at {
            return Ok(StoreError::SessionEnded);
        }
        Ok(StoreError::TooManyPending)
    };
    why().unwrap_or_else(|error| error)
}

/// `call_id, envelope, lease_expires_at, created_at` of claimed calls, oldest first.
pub(crate) fn claimed<R: Columns>(rows: Vec<R>) -> StoreResult<Vec<ClaimedRow>> {
    let mut claimed = rows
        .iter()
        .map(|row| {
            Ok(ClaimedRow {
                call_id: row.id("call_id")?,
                envelope: row.opt_bytes("envelope")?.unwrap_or_default(),
                lease_expires_at: row.time("lease_expires_at")?,
                created_at: row.time("created_at")?,
            })
        })
        .collect::<StoreResult<Vec<_>>>()?;
    claimed.sort_by_key(|c| c.created_at);
    Ok(claimed)
}

/// A call's stored `state`.
pub(crate) fn stored_state(row: &impl Columns) -> StoreResult<CallState> {
    parse_state(&row.text("state")?)
}

/// A call's effective state at `now`, from `state, expires_at, lease_expires_at`.
pub(crate) fn state_at(row: &impl Columns, now: UnixMillis) -> StoreResult<CallState> {
    Ok(effective_state(
        stored_state(row)?,
        row.time("expires_at")?,
        row.opt_time("lease_expires_at")?,
        now,
    ))
}

/// A call as its poster reads it at `now`, from
/// `state, reply, cancel_reason, expires_at, lease_expires_at`.
pub(crate) fn view_at(row: &impl Columns, now: UnixMillis) -> StoreResult<CallView> {
    Ok(call_view(
        stored_state(row)?,
        row.opt_bytes("reply")?,
        parse_reason(row.opt_text("cancel_reason")?),
        row.time("expires_at")?,
        row.opt_time("lease_expires_at")?,
        now,
    ))
}

/// `e, r`: whether the envelope and the reply are still held.
pub(crate) fn held_bytes(row: &impl Columns) -> StoreResult<HeldBytes> {
    Ok(HeldBytes {
        envelope: row.flag("e")?,
        reply: row.flag("r")?,
    })
}

/// An owner and the bytes their calls hold (`sql::BYTES_HELD_BY_OWNER`).
pub(crate) fn owner_bytes(row: &impl Columns) -> StoreResult<(OwnerId, i64)> {
    Ok((row.id("owner_id")?, row.int("held")?))
}

/// `state, n`: how many calls are in a state.
pub(crate) fn state_count(row: &impl Columns) -> StoreResult<(CallState, i64)> {
    Ok((stored_state(row)?, row.int("n")?))
}
