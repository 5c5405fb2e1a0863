//! SQLite backend: one writer connection with group commit, plus a pool of read connections.
//!
//! WAL with `synchronous=NORMAL`: readers never block the writer, and a commit costs no fsync
//! (durability across power loss is bounded by the last checkpoint; a process crash loses
//! nothing committed). Every write, and every read of the call loop, goes through one task that
//! owns the only write connection (see `writer`), which runs each kind of call-loop
//! request of concurrent requests as one statement and answers each request once its statement
//! is done. Other reads use a small pool of read-only connections.
//!
//! This file opens the store and holds the writer's plumbing: `writer` is the writer task,
//! `batch` and `batch_read` the call loop's grouped statements, `checkpoint` the WAL
//! checkpointer; `accounts`, `sessions` and `calls` are the operations. Statements that are the
//! same on PostgreSQL are in `store::sql`, row mapping in `store::rows`.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::future::BoxFuture;
use sealpost_protocol::api::{CallState, TokenKind};
use sealpost_protocol::content::CancelReason;
use sealpost_protocol::ids::{CallId, LinkId, OwnerId, PairId, SessionId, TokenId};
use sealpost_time::UnixMillis;
use sqlx::Connection;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};
use tokio_util::sync::{CancellationToken, DropGuard};

use self::batch_read::ReadOp;
use self::writer::Writer;
use super::Inspect;
use super::hot_path::SeenThrottle;
use super::rows;
use super::{
    Bearer, CallView, CatalogUpdate, ClaimFor, ClaimedRow, EndedSessions, HeldBytes, LiveGrants,
    LiveSession, NewCall, NewSession, NewSigninCode, OwnerRow, Page, ReadFor, SigninGrant,
    SigninLinkRow, Store, StoreResult, SweepStats, TokenRow, b,
};
use super::{
    ConfirmedIdentity, DueRenewal, OidcFlow, RenewalLease, RenewalOutcome, bound, identities, sql,
};
use crate::scope::AppScope;
use crate::wake::Hub;
use sqlx::Sqlite;

mod accounts;
mod batch;
mod batch_read;
mod calls;
mod checkpoint;
mod migrate;
mod sessions;
mod writer;

/// Read connections, for the reads outside the call loop (tokens of other requests, sessions,
/// metrics): enough for the HTTP workers on a small machine; reads are short.
const READ_POOL_SIZE: u32 = 4;
/// Prepared statements the writer keeps: four grouped kinds × up to 128 row counts, the
/// delivery marks × up to 100, and the rest.
const WRITER_STATEMENT_CACHE: usize = 700;
/// How long a connection waits on a lock held by another process (e.g. the admin CLI).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The SQLite store.
#[derive(Debug)]
pub struct SqliteStore {
    pub(super) writer: Writer,
    pub(super) readers: SqlitePool,
    pub(super) seen: SeenThrottle,
    pub(super) plugin_seen: SeenThrottle,
    /// Stops the checkpointer when the store goes.
    _checkpointer: DropGuard,
}

/// See [`super::missing_sqlite_file`].
pub(super) fn missing_file(url: &str) -> anyhow::Result<Option<std::path::PathBuf>> {
    if !url.starts_with("sqlite:") {
        return Ok(None);
    }
    let options = SqliteConnectOptions::from_str(url)?;
    let path = options.get_filename();
    let in_memory = path.as_os_str() == ":memory:" || url.contains("mode=memory");
    Ok((!in_memory && !path.exists()).then(|| path.to_owned()))
}

impl SqliteStore {
    /// Opens (creating if missing) the database file a `sqlite://PATH` URL names and migrates it.
    pub async fn open(url: &str) -> StoreResult<Self> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true)
            // Freed pages are zeroed, overflow pages included, so an envelope the sweeper
            // cleared does not linger in the file (or in WAL frames written after).
            .pragma("secure_delete", "ON");
        // The writer's grouped statements differ by row count (see `batch`): room for
        // all of them in the prepared-statement cache, so none is parsed twice.
        // Checkpoints run on their own connection (`checkpoint`), never in a commit.
        let options = options.pragma("journal_size_limit", checkpoint::JOURNAL_SIZE_LIMIT);
        let writer_options = options
            .clone()
            .statement_cache_capacity(WRITER_STATEMENT_CACHE)
            .pragma("wal_autocheckpoint", "0");
        let mut conn = SqliteConnection::connect_with(&writer_options).await?;
        migrate::run(&mut conn).await?;
        let checkpointer = CancellationToken::new();
        checkpoint::spawn(&options, checkpointer.clone()).await?;
        let readers = SqlitePoolOptions::new()
            .max_connections(READ_POOL_SIZE)
            .connect_with(options.read_only(true))
            .await?;
        Ok(Self {
            writer: Writer::spawn(conn),
            readers,
            seen: SeenThrottle::default(),
            plugin_seen: SeenThrottle::default(),
            _checkpointer: checkpointer.drop_guard(),
        })
    }

    pub(super) async fn write<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, StoreResult<T>>
            + Send
            + 'static,
    {
        self.writer.run(false, f).await
    }

    /// Like `write`, inside a savepoint: a multi-statement operation that fails leaves nothing.
    pub(super) async fn write_atomic<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, StoreResult<T>>
            + Send
            + 'static,
    {
        self.writer.run(true, f).await
    }
}

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.readers).await?;
        Ok(())
    }

    fn start_wakeup_listener(
        &self,
        _hub: Arc<Hub>,
        _shutdown: tokio_util::sync::CancellationToken,
    ) {
        // One process owns an SQLite file: every wake-up is already in-process.
    }

    async fn secret(&self, name: &str, fresh: Vec<u8>) -> StoreResult<Vec<u8>> {
        self.secret_impl(name, fresh).await
    }

    async fn create_owner(&self, id: OwnerId, name: &str, now: UnixMillis) -> StoreResult<()> {
        self.create_owner_impl(id, name, now).await
    }

    async fn list_owners(&self) -> StoreResult<Vec<OwnerRow>> {
        self.list_owners_impl().await
    }

    async fn owner_by_name(&self, name: &str) -> StoreResult<Option<OwnerRow>> {
        self.owner_by_name_impl(name).await
    }

    async fn owner_by_id(&self, id: OwnerId) -> StoreResult<Option<OwnerRow>> {
        self.owner_by_id_impl(id).await
    }

    async fn disable_owner(&self, name: &str, now: UnixMillis) -> StoreResult<bool> {
        self.disable_owner_impl(name, now).await
    }

    async fn enable_owner(&self, name: &str) -> StoreResult<bool> {
        let name = name.to_owned();
        self.write(move |conn| {
            Box::pin(async move {
                let id: Option<Vec<u8>> = sqlx::query_scalar(sql::ENABLE_OWNER)
                    .bind(&name)
                    .fetch_optional(&mut *conn)
                    .await?;
                Ok(id.is_some())
            })
        })
        .await
    }

    async fn create_signin_code(&self, code: &NewSigninCode) -> StoreResult<()> {
        self.create_signin_code_impl(code).await
    }

    async fn consume_signin_code(
        &self,
        code_hash: [u8; 32],
        now: UnixMillis,
    ) -> StoreResult<Option<SigninGrant>> {
        self.consume_signin_code_impl(code_hash, now).await
    }

    async fn create_oidc_flow(&self, flow: &OidcFlow) -> StoreResult<()> {
        let flow = flow.clone();
        self.write(move |conn| {
            Box::pin(async move { identities::insert_flow::<Sqlite>(conn, &flow).await })
        })
        .await
    }

    async fn consume_oidc_flow(
        &self,
        state_hash: [u8; 32],
        now: UnixMillis,
    ) -> StoreResult<Option<OidcFlow>> {
        self.write(move |conn| {
            Box::pin(async move { identities::consume_flow::<Sqlite>(conn, state_hash, now).await })
        })
        .await
    }

    async fn owner_for_identity(&self, identity: &ConfirmedIdentity) -> StoreResult<OwnerRow> {
        let identity = identity.clone();
        self.write_atomic(move |conn| {
            Box::pin(async move { identities::owner_for_identity::<Sqlite>(conn, &identity).await })
        })
        .await
    }

    async fn lease_renewals(&self, lease: RenewalLease) -> StoreResult<Vec<DueRenewal>> {
        self.write(move |conn| {
            Box::pin(async move { identities::lease_renewals::<Sqlite>(conn, lease).await })
        })
        .await
    }

    async fn record_renewal(
        &self,
        owner_id: OwnerId,
        lease_until: UnixMillis,
        outcome: &RenewalOutcome,
    ) -> StoreResult<bool> {
        let outcome = outcome.clone();
        self.write_atomic(move |conn| {
            Box::pin(async move {
                identities::record_renewal::<Sqlite>(conn, owner_id, lease_until, &outcome).await
            })
        })
        .await
    }

    async fn apply_recheck(&self, every_ms: Option<i64>) -> StoreResult<()> {
        self.write(move |conn| {
            Box::pin(async move { identities::apply_recheck::<Sqlite>(conn, every_ms).await })
        })
        .await
    }

    async fn create_token(&self, token: &TokenRow) -> StoreResult<()> {
        self.create_token_impl(token).await
    }

    async fn active_token(&self, id: TokenId, now: UnixMillis) -> StoreResult<Option<TokenRow>> {
        self.active_token_impl(id, now).await
    }

    async fn extend_token(
        &self,
        id: TokenId,
        expires_at: UnixMillis,
        now: UnixMillis,
    ) -> StoreResult<bool> {
        self.extend_token_impl(id, expires_at, now).await
    }

    async fn sign_out(
        &self,
        owner_id: OwnerId,
        reach: &AppScope,
        id: TokenId,
        kind: Option<TokenKind>,
        now: UnixMillis,
    ) -> StoreResult<Option<EndedSessions>> {
        self.sign_out_impl(owner_id, reach, id, kind, now).await
    }

    async fn list_signin_links(
        &self,
        owner_id: OwnerId,
        reach: &AppScope,
        now: UnixMillis,
    ) -> StoreResult<Vec<SigninLinkRow>> {
        let rows = bound::select_signin_links(owner_id, reach, now)
            .fetch_all(&self.readers)
            .await?;
        rows.iter().map(rows::signin_link).collect()
    }

    async fn revoke_signin_link(
        &self,
        owner_id: OwnerId,
        reach: &AppScope,
        id: LinkId,
    ) -> StoreResult<bool> {
        let reach = reach.clone();
        self.write(move |conn| {
            Box::pin(async move {
                let done = bound::delete_signin_link(owner_id, &reach, id)
                    .execute(&mut *conn)
                    .await?;
                Ok(done.rows_affected() == 1)
            })
        })
        .await
    }

    async fn list_mcp_tokens(
        &self,
        owner_id: OwnerId,
        reach: &AppScope,
        now: UnixMillis,
        page: Page,
    ) -> StoreResult<Vec<TokenRow>> {
        self.list_mcp_tokens_impl(owner_id, reach, now, page).await
    }

    async fn bytes_held_by_owner(&self) -> StoreResult<Vec<(OwnerId, i64)>> {
        let rows = sqlx::query(sql::BYTES_HELD_BY_OWNER)
            .fetch_all(&self.readers)
            .await?;
        rows.iter().map(rows::owner_bytes).collect()
    }

    async fn live_grants(&self, owner_id: OwnerId, now: UnixMillis) -> StoreResult<LiveGrants> {
        let rows = bound::count_live_grants(owner_id, now)
            .fetch_all(&self.readers)
            .await?;
        rows::live_grants(&rows)
    }

    async fn live_sessions_by_app(
        &self,
        owner_id: OwnerId,
        now: UnixMillis,
    ) -> StoreResult<Vec<(AppScope, i64)>> {
        let rows = bound::count_live_sessions(owner_id, now)
            .fetch_all(&self.readers)
            .await?;
        rows::app_sessions(&rows)
    }

    async fn list_owner_tokens(
        &self,
        owner_id: OwnerId,
        reach: &AppScope,
        now: UnixMillis,
    ) -> StoreResult<Vec<TokenRow>> {
        let rows = bound::select_owner_tokens(owner_id, now, reach)
            .fetch_all(&self.readers)
            .await?;
        rows.iter().map(rows::token).collect()
    }

    async fn create_session(
        &self,
        session: &NewSession,
        max_live: u32,
    ) -> StoreResult<EndedSessions> {
        self.create_session_impl(session, max_live).await
    }

    async fn live_session(
        &self,
        owner_id: OwnerId,
        app: &AppScope,
        pair_id: PairId,
        now: UnixMillis,
    ) -> StoreResult<Option<LiveSession>> {
        self.live_session_impl(owner_id, app, pair_id, now).await
    }

    async fn set_catalog_update(&self, update: &CatalogUpdate) -> StoreResult<()> {
        self.set_catalog_update_impl(update).await
    }

    async fn mark_plugin_seen(
        &self,
        owner_id: OwnerId,
        session_id: SessionId,
        now: UnixMillis,
    ) -> StoreResult<()> {
        self.mark_plugin_seen_impl(owner_id, session_id, now).await
    }

    async fn end_session(
        &self,
        owner_id: OwnerId,
        app: &AppScope,
        session_id: SessionId,
        now: UnixMillis,
    ) -> StoreResult<EndedSessions> {
        self.end_session_impl(owner_id, app, session_id, now).await
    }

    async fn post_call(
        &self,
        bearer: Bearer,
        call: &NewCall,
        max_pending: Option<u32>,
    ) -> StoreResult<UnixMillis> {
        self.post_call_impl(bearer, call, max_pending).await
    }

    async fn post_call_then_claim(
        &self,
        bearer: Bearer,
        call: &NewCall,
        max_pending: Option<u32>,
        claim: ClaimFor,
    ) -> StoreResult<UnixMillis> {
        self.post_call_then_claim_impl(bearer, call, max_pending, claim)
            .await
    }

    async fn claim_calls(
        &self,
        bearer: Bearer,
        session_id: SessionId,
        now: UnixMillis,
        max: u32,
        lease_ms: u64,
    ) -> StoreResult<Vec<ClaimedRow>> {
        self.claim_calls_impl(bearer, session_id, now, max, lease_ms)
            .await
    }

    async fn reply_call(
        &self,
        bearer: Bearer,
        call_id: CallId,
        reply: Vec<u8>,
        now: UnixMillis,
    ) -> StoreResult<()> {
        self.reply_call_impl(bearer, call_id, reply, now, None)
            .await
    }

    async fn reply_call_then_read(
        &self,
        bearer: Bearer,
        call_id: CallId,
        reply: Vec<u8>,
        now: UnixMillis,
        read: ReadFor,
    ) -> StoreResult<()> {
        self.reply_call_impl(bearer, call_id, reply, now, Some(read))
            .await
    }

    async fn cancel_call(
        &self,
        bearer: Bearer,
        call_id: CallId,
        reason: CancelReason,
        now: UnixMillis,
    ) -> StoreResult<()> {
        self.cancel_call_impl(bearer, call_id, reason, now).await
    }

    async fn read_call(
        &self,
        bearer: Bearer,
        call_id: CallId,
        now: UnixMillis,
    ) -> StoreResult<Option<CallView>> {
        self.writer
            .read(|answer| ReadOp {
                bearer,
                call_id,
                now,
                answer,
            })
            .await
    }

    async fn sweep(&self, now: UnixMillis, grace_ms: u64) -> StoreResult<SweepStats> {
        self.sweep_impl(now, grace_ms).await
    }

    async fn count_calls_by_state(&self) -> StoreResult<Vec<(CallState, i64)>> {
        let found = sqlx::query(sql::COUNT_CALLS_BY_STATE)
            .fetch_all(&self.readers)
            .await?;
        found.iter().map(rows::state_count).collect()
    }
}

#[async_trait]
impl Inspect for SqliteStore {
    async fn held_bytes(
        &self,
        owner_id: OwnerId,
        call_id: CallId,
    ) -> StoreResult<Option<HeldBytes>> {
        let row = sqlx::query(sql::SELECT_HELD_BYTES)
            .bind(b(owner_id))
            .bind(b(call_id))
            .fetch_optional(&self.readers)
            .await?;
        row.as_ref().map(rows::held_bytes).transpose()
    }

    async fn overwrite_call_expiry(
        &self,
        owner_id: OwnerId,
        call_id: CallId,
        stored: i64,
    ) -> StoreResult<()> {
        self.write(move |conn| {
            Box::pin(async move {
                sqlx::query(sql::OVERWRITE_CALL_EXPIRY)
                    .bind(b(owner_id))
                    .bind(b(call_id))
                    .bind(stored)
                    .execute(&mut *conn)
                    .await?;
                Ok(())
            })
        })
        .await
    }
}
