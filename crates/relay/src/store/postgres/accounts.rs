//! PostgreSQL accounts: owners, one-time sign-in codes, tokens and the stored signing key.
//! Most statements are shared with SQLite (`store::sql`).

use sealpost_protocol::api::TokenKind;
use sealpost_protocol::ids::{OwnerId, TokenId};
use sealpost_time::UnixMillis;
use sqlx::postgres::PgPool;

use crate::scope::AppScope;
use crate::store::{
    NewSigninCode, OwnerRow, Page, SigninGrant, StoreError, StoreResult, TokenRow, b,
    is_unique_violation, rows, time_to_sql,
};
use crate::store::{bound, sql};

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
    sqlx::query(sql::INSERT_SIGNIN_CODE)
        .bind(c.code_hash.to_vec())
        .bind(b(c.owner_id))
        .bind(time_to_sql(c.expires_at))
        .bind(c.app.stored())
        .bind(c.lifetime_ends_at.map(time_to_sql))
        .bind(c.pkce_challenge.map(|challenge| challenge.to_vec()))
        .execute(pool)
        .await?;
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
    sqlx::query(sql::INSERT_TOKEN)
        .bind(b(t.id))
        .bind(b(t.owner_id))
        .bind(t.kind.as_str())
        .bind(t.pair_id.map(b))
        .bind(&t.label)
        .bind(time_to_sql(t.created_at))
        .bind(time_to_sql(t.expires_at))
        .bind(t.app.stored())
        .bind(t.lifetime_ends_at.map(time_to_sql))
        .execute(pool)
        .await?;
    Ok(())
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

pub(super) async fn revoke_token(
    pool: &PgPool,
    owner_id: OwnerId,
    reach: &AppScope,
    id: TokenId,
    kind: Option<TokenKind>,
    now: UnixMillis,
) -> StoreResult<bool> {
    let done = sqlx::query(sql::REVOKE_TOKEN)
        .bind(b(id))
        .bind(b(owner_id))
        .bind(time_to_sql(now))
        .bind(kind.map(TokenKind::as_str))
        .bind(reach.stored())
        .execute(pool)
        .await?;
    Ok(done.rows_affected() == 1)
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
