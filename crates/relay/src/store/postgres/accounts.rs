//! PostgreSQL accounts: owners, one-time sign-in codes, tokens and the stored signing key.
//! Most statements are shared with SQLite (`store::sql`).

use sealpost_protocol::api::TokenKind;
use sealpost_protocol::ids::{OwnerId, TokenId};
use sealpost_time::UnixMillis;
use sqlx::Postgres;
use sqlx::postgres::{PgConnection, PgPool};

use super::sessions::cancel_open_calls;

use crate::scope::AppScope;
use crate::store::{
    EndedSessions, NewSigninCode, OwnerRow, Page, SigninGrant, StoreError, StoreResult, TokenRow,
    b, is_unique_violation, rows, time_to_sql,
};
use crate::store::{bound, lineage, sql};

pub(super) async fn secret(pool: &PgPool, name: &str, fresh: Vec<u8>) -> StoreResult<Vec<u8>> {
    sqlx::query(sql::INSERT_SECRET)
        .bind(name)
        .bind(fresh)
        .execute(pool)
        .await?;
    Ok(sqlx::query_scalar(sql::SELECT_SECRET)
        .bind(name)
        .fetch_one(pool)
        .await?)
}

pub(super) async fn create_owner(
    pool: &PgPool,
    id: OwnerId,
    name: &str,
    now: UnixMillis,
) -> StoreResult<()> {
    match sqlx::query(sql::INSERT_OWNER)
        .bind(b(id))
        .bind(name)
        .bind(time_to_sql(now))
        .execute(pool)
        .await
    {
        Err(e) if is_unique_violation(&e) => Err(StoreError::Duplicate),
        other => other.map(|_| ()).map_err(Into::into),
    }
}

pub(super) async fn list_owners(pool: &PgPool) -> StoreResult<Vec<OwnerRow>> {
    let rows = sqlx::query(sql::SELECT_OWNERS).fetch_all(pool).await?;
    rows.iter().map(rows::owner).collect()
}

pub(super) async fn owner_by_name(pool: &PgPool, name: &str) -> StoreResult<Option<OwnerRow>> {
    let row = sqlx::query(sql::SELECT_OWNER_BY_NAME)
        .bind(name)
        .fetch_optional(pool)
        .await?;
    row.as_ref().map(rows::owner).transpose()
}

pub(super) async fn owner_by_id(pool: &PgPool, id: OwnerId) -> StoreResult<Option<OwnerRow>> {
    let row = sqlx::query(sql::SELECT_OWNER_BY_ID)
        .bind(b(id))
        .fetch_optional(pool)
        .await?;
    row.as_ref().map(rows::owner).transpose()
}

pub(super) async fn disable_owner(pool: &PgPool, name: &str, now: UnixMillis) -> StoreResult<bool> {
    let mut tx = pool.begin().await?;
    let id = bound::disable_owner(name, now)
        .fetch_optional(&mut *tx)
        .await?;
    let Some(id) = id else { return Ok(false) };
    bound::revoke_owner_tokens(&id, now)
        .execute(&mut *tx)
        .await?;
    bound::delete_owner_signin_codes(&id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(true)
}

pub(super) async fn create_signin_code(pool: &PgPool, c: &NewSigninCode) -> StoreResult<()> {
    let mut tx = pool.begin().await?;
    require_unrevoked(&mut tx, c.owner_id, c.minted_by).await?;
    bound::insert_signin_code(c).execute(&mut *tx).await?;
    tx.commit().await.map_err(StoreError::NotCommitted)?;
    Ok(())
}

pub(super) async fn consume_signin_code(
    pool: &PgPool,
    code_hash: [u8; 32],
    now: UnixMillis,
) -> StoreResult<Option<SigninGrant>> {
    let used = sqlx::query(sql::CONSUME_SIGNIN_CODE)
        .bind(code_hash.to_vec())
        .bind(time_to_sql(now))
        .fetch_optional(pool)
        .await?;
    used.as_ref().map(rows::signin_grant).transpose()
}

pub(super) async fn create_token(pool: &PgPool, t: &TokenRow) -> StoreResult<()> {
    let mut tx = pool.begin().await?;
    require_unrevoked(&mut tx, t.owner_id, t.parent_id).await?;
    bound::insert_token(t).execute(&mut *tx).await?;
    tx.commit().await.map_err(StoreError::NotCommitted)?;
    Ok(())
}

/// [`StoreError::TokenNotLive`] unless `parent` (when there is one) is an unrevoked token of
/// the owner. The owner's row is locked for share first: a sign-out holds it for update
/// ([`sign_out`]), so the check and what the caller then writes either both come before a
/// sign-out, which then finds and ends that write, or both after it, and the check fails.
pub(super) async fn require_unrevoked(
    conn: &mut PgConnection,
    owner_id: OwnerId,
    parent: Option<TokenId>,
) -> StoreResult<()> {
    if parent.is_none() {
        return Ok(());
    }
    sqlx::query("SELECT 1 FROM owners WHERE id = $1 FOR SHARE")
        .bind(b(owner_id))
        .execute(&mut *conn)
        .await?;
    lineage::require_unrevoked::<Postgres>(conn, owner_id, parent).await
}

pub(super) async fn active_token(
    pool: &PgPool,
    id: TokenId,
    now: UnixMillis,
) -> StoreResult<Option<TokenRow>> {
    let row = sqlx::query(sql::SELECT_ACTIVE_TOKEN)
        .bind(b(id))
        .bind(time_to_sql(now))
        .fetch_optional(pool)
        .await?;
    row.as_ref().map(rows::token).transpose()
}

pub(super) async fn extend_token(
    pool: &PgPool,
    id: TokenId,
    expires_at: UnixMillis,
    now: UnixMillis,
) -> StoreResult<bool> {
    let done = sqlx::query(
        "UPDATE tokens SET expires_at = GREATEST(expires_at, $2) \
         WHERE id = $1 AND revoked_at IS NULL AND expires_at > $3",
    )
    .bind(b(id))
    .bind(time_to_sql(expires_at))
    .bind(time_to_sql(now))
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Revokes the token and what descends from it in one transaction, holding the owner's row
/// for update so that no sign-in, link or session can be made from a token of the lineage
/// meanwhile (see [`require_unrevoked`]); the ended sessions' waiters are woken on every
/// replica when it commits.
pub(super) async fn sign_out(
    pool: &PgPool,
    owner_id: OwnerId,
    reach: &AppScope,
    id: TokenId,
    kind: Option<TokenKind>,
    now: UnixMillis,
) -> StoreResult<Option<EndedSessions>> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT 1 FROM owners WHERE id = $1 FOR UPDATE")
        .bind(b(owner_id))
        .execute(&mut *tx)
        .await?;
    let Some(ended) =
        lineage::sign_out::<Postgres>(&mut tx, owner_id, reach, id, kind, now).await?
    else {
        return Ok(None);
    };
    let ended = cancel_open_calls(&mut tx, ended).await?;
    tx.commit().await.map_err(StoreError::NotCommitted)?;
    Ok(Some(ended))
}

pub(super) async fn list_mcp_tokens(
    pool: &PgPool,
    owner_id: OwnerId,
    reach: &AppScope,
    now: UnixMillis,
    page: Page,
) -> StoreResult<Vec<TokenRow>> {
    let rows = bound::select_mcp_tokens(owner_id, reach, now, page)
        .fetch_all(pool)
        .await?;
    rows.iter().map(rows::token).collect()
}
