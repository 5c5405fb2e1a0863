//! What a sign-in made, for both backends: signing it out ends its lineage, and nothing is
//! made from a sign-in already revoked. Each backend runs these in its own transaction (on
//! PostgreSQL under the owner row's lock) and cancels the ended sessions' calls its own way.

use sealpost_protocol::api::TokenKind;
use sealpost_protocol::ids::{OwnerId, SessionId, TokenId};
use sealpost_time::UnixMillis;
use sqlx::{Database, Encode, Executor, IntoArguments, Type};

use super::rows::{self, Columns};
use super::sweep::Affected;
use super::{StoreError, StoreResult, b, bound, sql, time_to_sql};
use crate::scope::AppScope;

/// Revokes the owner's token `id` (of `kind`, if given) that `reach` reaches, then every
/// sign-in descended from it through its links, voids the unused links any of them minted, and
/// ends the live sessions any of them started. The ended sessions, or `None` (and nothing
/// changed) when there is no such token.
pub(crate) async fn sign_out<DB>(
    conn: &mut DB::Connection,
    owner_id: OwnerId,
    reach: &AppScope,
    id: TokenId,
    kind: Option<TokenKind>,
    now: UnixMillis,
) -> StoreResult<Option<Vec<(OwnerId, SessionId)>>>
where
    DB: Database,
    DB::Row: Columns,
    DB::QueryResult: Affected,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
    Option<String>: for<'q> Encode<'q, DB> + Type<DB>,
{
    let done = sqlx::query::<DB>(sql::REVOKE_TOKEN)
        .bind(b(id))
        .bind(b(owner_id))
        .bind(time_to_sql(now))
        .bind(kind.map(|kind| kind.as_str().to_owned()))
        .bind(reach.stored().to_owned())
        .execute(&mut *conn)
        .await?;
    if done.affected() != 1 {
        return Ok(None);
    }
    bound::revoke_lineage::<DB>(owner_id, id, now)
        .execute(&mut *conn)
        .await?;
    bound::void_lineage_links::<DB>(owner_id, id)
        .execute(&mut *conn)
        .await?;
    let ended = bound::end_lineage_sessions::<DB>(owner_id, id, now)
        .fetch_all(&mut *conn)
        .await?;
    Ok(Some(rows::owner_sessions(&ended)?))
}

/// [`StoreError::TokenNotLive`] unless `maker` (when there is one) is an unrevoked token of the
/// owner: what a signed-out sign-in would make is refused.
pub(crate) async fn require_unrevoked<DB>(
    conn: &mut DB::Connection,
    owner_id: OwnerId,
    maker: Option<TokenId>,
) -> StoreResult<()>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
{
    let Some(maker) = maker else { return Ok(()) };
    match bound::select_unrevoked::<DB>(owner_id, maker)
        .fetch_optional(&mut *conn)
        .await?
    {
        Some(_) => Ok(()),
        None => Err(StoreError::TokenNotLive),
    }
}
