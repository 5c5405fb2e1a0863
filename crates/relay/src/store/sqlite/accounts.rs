//! SQLite accounts: owners, one-time sign-in codes, tokens and the stored signing key. Writes
//! go through the writer; reads use the read pool. Most statements are shared (`store::sql`).

use sealpost_protocol::api::TokenKind;
use sealpost_protocol::ids::{OwnerId, TokenId};
use sealpost_time::UnixMillis;

use sqlx::Sqlite;

use super::SqliteStore;
use super::sessions::cancel_open_calls;
use crate::scope::AppScope;
use crate::store::{
    EndedSessions, NewSigninCode, OwnerRow, Page, SigninGrant, StoreError, StoreResult, TokenRow,
    b, is_unique_violation, rows, time_to_sql,
};
use crate::store::{bound, lineage, sql};

impl SqliteStore {
    pub(super) async fn secret_impl(&self, name: &str, fresh: Vec<u8>) -> StoreResult<Vec<u8>> {
        let name = name.to_owned();
        self.write(move |conn| {
            Box::pin(async move {
                sqlx::query(sql::INSERT_SECRET)
                    .bind(&name)
                    .bind(fresh)
                    .execute(&mut *conn)
                    .await?;
                Ok(sqlx::query_scalar(sql::SELECT_SECRET)
                    .bind(&name)
                    .fetch_one(&mut *conn)
                    .await?)
            })
        })
        .await
    }

    pub(super) async fn create_owner_impl(
        &self,
        id: OwnerId,
        name: &str,
        now: UnixMillis,
    ) -> StoreResult<()> {
        let name = name.to_owned();
        self.write(move |conn| {
            Box::pin(async move {
                match sqlx::query(sql::INSERT_OWNER)
                    .bind(b(id))
                    .bind(&name)
                    .bind(time_to_sql(now))
                    .execute(&mut *conn)
                    .await
                {
                    Err(e) if is_unique_violation(&e) => Err(StoreError::Duplicate),
                    other => other.map(|_| ()).map_err(Into::into),
                }
            })
        })
        .await
    }

    pub(super) async fn list_owners_impl(&self) -> StoreResult<Vec<OwnerRow>> {
        let rows = sqlx::query(sql::SELECT_OWNERS)
            .fetch_all(&self.readers)
            .await?;
        rows.iter().map(rows::owner).collect()
    }

    pub(super) async fn owner_by_name_impl(&self, name: &str) -> StoreResult<Option<OwnerRow>> {
        let row = sqlx::query(sql::SELECT_OWNER_BY_NAME)
            .bind(name)
            .fetch_optional(&self.readers)
            .await?;
        row.as_ref().map(rows::owner).transpose()
    }

    pub(super) async fn owner_by_id_impl(&self, id: OwnerId) -> StoreResult<Option<OwnerRow>> {
        let row = sqlx::query(sql::SELECT_OWNER_BY_ID)
            .bind(b(id))
            .fetch_optional(&self.readers)
            .await?;
        row.as_ref().map(rows::owner).transpose()
    }

    pub(super) async fn disable_owner_impl(
        &self,
        name: &str,
        now: UnixMillis,
    ) -> StoreResult<bool> {
        let name = name.to_owned();
        self.write_atomic(move |conn| {
            Box::pin(async move {
                let id = bound::disable_owner(&name, now)
                    .fetch_optional(&mut *conn)
                    .await?;
                let Some(id) = id else { return Ok(false) };
                bound::revoke_owner_tokens(&id, now)
                    .execute(&mut *conn)
                    .await?;
                bound::delete_owner_signin_codes(&id)
                    .execute(&mut *conn)
                    .await?;
                Ok(true)
            })
        })
        .await
    }

    pub(super) async fn create_signin_code_impl(&self, code: &NewSigninCode) -> StoreResult<()> {
        let c = code.clone();
        // The writer runs one operation at a time: the minter's check and the insert cannot
        // be split by a sign-out.
        self.write_atomic(move |conn| {
            Box::pin(async move {
                lineage::require_unrevoked::<Sqlite>(conn, c.owner_id, c.minted_by).await?;
                bound::insert_signin_code(&c).execute(&mut *conn).await?;
                Ok(())
            })
        })
        .await
    }

    pub(super) async fn consume_signin_code_impl(
        &self,
        code_hash: [u8; 32],
        now: UnixMillis,
    ) -> StoreResult<Option<SigninGrant>> {
        self.write(move |conn| {
            Box::pin(async move {
                let used = sqlx::query(sql::CONSUME_SIGNIN_CODE)
                    .bind(code_hash.to_vec())
                    .bind(time_to_sql(now))
                    .fetch_optional(&mut *conn)
                    .await?;
                used.as_ref().map(rows::signin_grant).transpose()
            })
        })
        .await
    }

    pub(super) async fn create_token_impl(&self, token: &TokenRow) -> StoreResult<()> {
        let t = token.clone();
        self.write_atomic(move |conn| {
            Box::pin(async move {
                lineage::require_unrevoked::<Sqlite>(conn, t.owner_id, t.parent_id).await?;
                bound::insert_token(&t).execute(&mut *conn).await?;
                Ok(())
            })
        })
        .await
    }

    pub(super) async fn active_token_impl(
        &self,
        id: TokenId,
        now: UnixMillis,
    ) -> StoreResult<Option<TokenRow>> {
        let row = sqlx::query(sql::SELECT_ACTIVE_TOKEN)
            .bind(b(id))
            .bind(time_to_sql(now))
            .fetch_optional(&self.readers)
            .await?;
        row.as_ref().map(rows::token).transpose()
    }

    pub(super) async fn extend_token_impl(
        &self,
        id: TokenId,
        expires_at: UnixMillis,
        now: UnixMillis,
    ) -> StoreResult<bool> {
        self.write(move |conn| {
            Box::pin(async move {
                let done = sqlx::query(
                    "UPDATE tokens SET expires_at = MAX(expires_at, ?2) \
                     WHERE id = ?1 AND revoked_at IS NULL AND expires_at > ?3",
                )
                .bind(b(id))
                .bind(time_to_sql(expires_at))
                .bind(time_to_sql(now))
                .execute(&mut *conn)
                .await?;
                Ok(done.rows_affected() == 1)
            })
        })
        .await
    }

    pub(super) async fn sign_out_impl(
        &self,
        owner_id: OwnerId,
        reach: &AppScope,
        id: TokenId,
        kind: Option<TokenKind>,
        now: UnixMillis,
    ) -> StoreResult<Option<EndedSessions>> {
        let reach = reach.clone();
        self.write_atomic(move |conn| {
            Box::pin(async move {
                let ended =
                    lineage::sign_out::<Sqlite>(conn, owner_id, &reach, id, kind, now).await?;
                match ended {
                    Some(ended) => Ok(Some(cancel_open_calls(conn, ended).await?)),
                    None => Ok(None),
                }
            })
        })
        .await
    }

    pub(super) async fn list_mcp_tokens_impl(
        &self,
        owner_id: OwnerId,
        reach: &AppScope,
        now: UnixMillis,
        page: Page,
    ) -> StoreResult<Vec<TokenRow>> {
        let rows = bound::select_mcp_tokens(owner_id, reach, now, page)
            .fetch_all(&self.readers)
            .await?;
        rows.iter().map(rows::token).collect()
    }
}
