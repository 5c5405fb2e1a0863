//! PostgreSQL backend, for teams running any number of relay replicas on one database.
//!
//! The claim is one statement (`FOR UPDATE SKIP LOCKED` in a CTE, then `UPDATE … RETURNING`), so
//! replicas never hand one call out twice. Writes that should wake a waiter on another replica
//! send `pg_notify` once committed (`wakeups`); each replica runs one `PgListener` that feeds
//! those into its in-process hub.
//!
//! This file connects and migrates; `accounts`, `sessions` and `calls` are the operations,
//! `batch` groups concurrent posts, claims, replies and reads, `deliveries` writes delivery marks after reads,
//! `wakeups` the notifications. Statements that are the same on SQLite are in `store::sql`, row mapping
//! in `store::rows`.

use std::sync::Arc;

use async_trait::async_trait;
use sealpost_protocol::api::{CallState, TokenKind};
use sealpost_protocol::content::CancelReason;
use sealpost_protocol::ids::{CallId, LinkId, OwnerId, PairId, SessionId, TokenId};
use sealpost_time::UnixMillis;
use sqlx::postgres::{PgPool, PgPoolOptions};
use tokio_util::sync::CancellationToken;

use super::bound;
use super::hot_path::SeenThrottle;
use super::rows;
use super::sql;
use super::{
    Bearer, CallView, CatalogUpdate, ClaimFor, ClaimedRow, EndedSessions, HeldBytes, Inspect,
    LiveGrants, LiveSession, NewCall, NewSession, NewSigninCode, OwnerRow, Page, ReadFor,
    SigninGrant, SigninLinkRow, Store, StoreError, StoreResult, SweepStats, TokenRow, b,
    time_to_sql,
};
use super::{ConfirmedIdentity, DueRenewal, OidcFlow, RenewalLease, RenewalOutcome, identities};
use crate::scope::AppScope;
use crate::wake::{Hub, Topic};
use sqlx::Postgres;

/// The bearer's token row is live, as a condition inside a hot-path statement. With no
/// arguments, the statement's first five parameters are `$1` token id, `$2` owner id, `$3`
/// kind, `$4` pair id (NULL for an owner token) and `$5` now (bound by `calls::with_bearer`);
/// a grouped statement names the columns that hold them instead. The same check as
/// [`require_live`], without its round trip.
macro_rules! token_live {
    () => {
        token_live!("$1", "$2", "$3", "$4", "$5")
    };
    ($token:literal, $owner:literal, $kind:literal, $pair:literal, $now:literal) => {
        concat!(
            "EXISTS (SELECT 1 FROM tokens t JOIN owners o ON o.id = t.owner_id WHERE t.id = ",
            $token,
            " AND t.owner_id = ",
            $owner,
            " AND t.kind = ",
            $kind,
            " AND t.pair_id IS NOT DISTINCT FROM ",
            $pair,
            " AND t.revoked_at IS NULL AND t.expires_at > ",
            $now,
            " AND o.disabled_at IS NULL AND (o.confirmed_until IS NULL OR o.confirmed_until > ",
            $now,
            "))"
        )
    };
}

mod accounts;
mod batch;
mod calls;
mod deliveries;
mod migrate;
mod sessions;
mod wakeups;

use wakeups::{Notifier, notify};

/// Connections per replica: enough to keep two cores busy; throughput comes from short
/// statements, not from more connections.
const POOL_SIZE: u32 = 16;
/// A pooled connection idle this long is pinged before it is handed out.
const PING_IF_IDLE_FOR: std::time::Duration = std::time::Duration::from_secs(1);
/// The PostgreSQL store.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    seen: Arc<SeenThrottle>,
    plugin_seen: Arc<SeenThrottle>,
    batch: batch::Batcher,
    notifier: Notifier,
    deliveries: deliveries::Deliveries,
    /// Which lease ends this process's sweeps have read.
    sweep_window: Arc<std::sync::Mutex<calls::SweepWindow>>,
}

impl PgStore {
    /// Connects and migrates (serialised across replicas by an advisory lock).
    pub async fn open(url: &str) -> StoreResult<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(POOL_SIZE)
            // A ping before every statement would double the hot path's round trips; a
            // connection idle long enough to have been cut (a database restart) is pinged.
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if meta.idle_for < PING_IF_IDLE_FOR {
                        return Ok(true);
                    }
                    sqlx::Connection::ping(conn).await.map(|()| true)
                })
            })
            .connect(url)
            .await?;
        migrate::run(&pool).await?;
        log_commit_mode(&pool).await;
        let notifier = Notifier::start(pool.clone());
        Ok(Self {
            batch: batch::Batcher::start(pool.clone(), notifier.clone()),
            notifier,
            deliveries: deliveries::Deliveries::start(pool.clone()),
            pool,
            seen: Arc::default(),
            plugin_seen: Arc::default(),
            sweep_window: Arc::default(),
        })
    }
}

/// Says whether commits wait for the disk: a team chooses with PostgreSQL's own
/// `synchronous_commit` (for the relay's role, or `options[synchronous_commit]=off` in the
/// database URL; docs/RELAY.md, "Durability on PostgreSQL").
async fn log_commit_mode(pool: &PgPool) {
    match sqlx::query_scalar::<_, String>("SHOW synchronous_commit")
        .fetch_one(pool)
        .await
    {
        Ok(mode) if mode == "off" => tracing::info!(
            synchronous_commit = %mode,
            "PostgreSQL: commits do not wait for the disk; a crash of the database server can lose the last fraction of a second of them"
        ),
        Ok(mode) => {
            tracing::info!(synchronous_commit = %mode, "PostgreSQL: commits wait for the disk")
        }
        Err(error) => tracing::warn!(%error, "PostgreSQL: synchronous_commit unreadable"),
    }
}

impl PgStore {
    /// Records that the tab claimed, at most once a second per session. Advisory: its failure
    /// must not cost the tab the calls it has just claimed.
    async fn claimer_seen(&self, owner_id: OwnerId, session_id: SessionId, now: UnixMillis) {
        if self.seen.due(owner_id, session_id, now)
            && let Err(error) = bound::mark_claimer_seen(owner_id, session_id, now)
                .execute(&self.pool)
                .await
        {
            let error = StoreError::from(error);
            tracing::warn!(error = %crate::store::ErrorChain(&error), "claimer_seen_at not written");
        }
    }

    /// A read's view, marked delivered (in memory, written lazily) when it is the first read of
    /// an answer, and read as delivered when it is not.
    fn marked(
        &self,
        view: StoreResult<Option<CallView>>,
        owner_id: OwnerId,
        call_id: CallId,
    ) -> StoreResult<Option<CallView>> {
        let mut view = view?;
        if let Some(view) = &mut view
            && view.state == CallState::Answered
            && !self.deliveries.mark(owner_id, call_id)
        {
            view.state = CallState::Delivered;
        }
        Ok(view)
    }

    /// A call read here and not yet marked in the database says `delivered` in a refusal too,
    /// as it does to a read.
    fn delivered_if_marked(
        &self,
        result: StoreResult<()>,
        owner_id: OwnerId,
        call_id: CallId,
    ) -> StoreResult<()> {
        match result {
            Err(StoreError::WrongState(CallState::Answered))
                if self.deliveries.is_marked(owner_id, call_id) =>
            {
                Err(StoreError::WrongState(CallState::Delivered))
            }
            other => other,
        }
    }
}

/// Checks the bearer's token row (see [`Bearer`]): the cold paths, to tell a dead token from a
/// missing call or session.
async fn require_live(pool: &PgPool, bearer: &Bearer, now: UnixMillis) -> StoreResult<()> {
    let live: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM tokens t JOIN owners o ON o.id = t.owner_id \
         WHERE t.id = $1 AND t.owner_id = $2 AND t.kind = $3 AND t.pair_id IS NOT DISTINCT FROM $4 \
         AND t.revoked_at IS NULL AND t.expires_at > $5 AND o.disabled_at IS NULL \
         AND (o.confirmed_until IS NULL OR o.confirmed_until > $5))",
    )
    .bind(b(bearer.token_id))
    .bind(b(bearer.owner_id))
    .bind(bearer.kind.as_str())
    .bind(bearer.pair_id.map(b))
    .bind(time_to_sql(now))
    .fetch_one(pool)
    .await?;
    if live {
        Ok(())
    } else {
        Err(StoreError::TokenNotLive)
    }
}

#[async_trait]
impl Store for PgStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    fn start_wakeup_listener(&self, hub: Arc<Hub>, shutdown: CancellationToken) {
        tokio::spawn(wakeups::listen_loop(self.pool.clone(), hub, shutdown));
    }

    async fn secret(&self, name: &str, fresh: Vec<u8>) -> StoreResult<Vec<u8>> {
        accounts::secret(&self.pool, name, fresh).await
    }

    async fn create_owner(&self, id: OwnerId, name: &str, now: UnixMillis) -> StoreResult<()> {
        accounts::create_owner(&self.pool, id, name, now).await
    }

    async fn list_owners(&self) -> StoreResult<Vec<OwnerRow>> {
        accounts::list_owners(&self.pool).await
    }

    async fn owner_by_name(&self, name: &str) -> StoreResult<Option<OwnerRow>> {
        accounts::owner_by_name(&self.pool, name).await
    }

    async fn owner_by_id(&self, id: OwnerId) -> StoreResult<Option<OwnerRow>> {
        accounts::owner_by_id(&self.pool, id).await
    }

    async fn disable_owner(&self, name: &str, now: UnixMillis) -> StoreResult<bool> {
        accounts::disable_owner(&self.pool, name, now).await
    }

    async fn enable_owner(&self, name: &str) -> StoreResult<bool> {
        let id: Option<Vec<u8>> = sqlx::query_scalar(sql::ENABLE_OWNER)
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        Ok(id.is_some())
    }

    async fn create_signin_code(&self, code: &NewSigninCode) -> StoreResult<()> {
        accounts::create_signin_code(&self.pool, code).await
    }

    async fn consume_signin_code(
        &self,
        code_hash: [u8; 32],
        now: UnixMillis,
    ) -> StoreResult<Option<SigninGrant>> {
        accounts::consume_signin_code(&self.pool, code_hash, now).await
    }

    async fn create_oidc_flow(&self, flow: &OidcFlow) -> StoreResult<()> {
        let mut conn = self.pool.acquire().await?;
        identities::insert_flow::<Postgres>(&mut conn, flow).await
    }

    async fn consume_oidc_flow(
        &self,
        state_hash: [u8; 32],
        now: UnixMillis,
    ) -> StoreResult<Option<OidcFlow>> {
        let mut conn = self.pool.acquire().await?;
        identities::consume_flow::<Postgres>(&mut conn, state_hash, now).await
    }

    async fn owner_for_identity(&self, identity: &ConfirmedIdentity) -> StoreResult<OwnerRow> {
        let mut tx = self.pool.begin().await?;
        let owner = identities::owner_for_identity::<Postgres>(&mut tx, identity).await?;
        tx.commit().await.map_err(StoreError::NotCommitted)?;
        Ok(owner)
    }

    async fn lease_renewals(&self, lease: RenewalLease) -> StoreResult<Vec<DueRenewal>> {
        let mut conn = self.pool.acquire().await?;
        identities::lease_renewals::<Postgres>(&mut conn, lease).await
    }

    async fn record_renewal(
        &self,
        owner_id: OwnerId,
        lease_until: UnixMillis,
        outcome: &RenewalOutcome,
    ) -> StoreResult<bool> {
        let mut tx = self.pool.begin().await?;
        let recorded =
            identities::record_renewal::<Postgres>(&mut tx, owner_id, lease_until, outcome).await?;
        tx.commit().await.map_err(StoreError::NotCommitted)?;
        Ok(recorded)
    }

    async fn apply_recheck(&self, every_ms: Option<i64>) -> StoreResult<()> {
        let mut conn = self.pool.acquire().await?;
        identities::apply_recheck::<Postgres>(&mut conn, every_ms).await
    }

    async fn create_token(&self, token: &TokenRow) -> StoreResult<()> {
        accounts::create_token(&self.pool, token).await
    }

    async fn active_token(&self, id: TokenId, now: UnixMillis) -> StoreResult<Option<TokenRow>> {
        accounts::active_token(&self.pool, id, now).await
    }

    async fn extend_token(
        &self,
        id: TokenId,
        expires_at: UnixMillis,
        now: UnixMillis,
    ) -> StoreResult<bool> {
        accounts::extend_token(&self.pool, id, expires_at, now).await
    }

    async fn sign_out(
        &self,
        owner_id: OwnerId,
        reach: &AppScope,
        id: TokenId,
        kind: Option<TokenKind>,
        now: UnixMillis,
    ) -> StoreResult<Option<EndedSessions>> {
        accounts::sign_out(&self.pool, owner_id, reach, id, kind, now).await
    }

    async fn list_signin_links(
        &self,
        owner_id: OwnerId,
        reach: &AppScope,
        now: UnixMillis,
    ) -> StoreResult<Vec<SigninLinkRow>> {
        let rows = bound::select_signin_links(owner_id, reach, now)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(rows::signin_link).collect()
    }

    async fn revoke_signin_link(
        &self,
        owner_id: OwnerId,
        reach: &AppScope,
        id: LinkId,
    ) -> StoreResult<bool> {
        let done = bound::delete_signin_link(owner_id, reach, id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn list_mcp_tokens(
        &self,
        owner_id: OwnerId,
        reach: &AppScope,
        now: UnixMillis,
        page: Page,
    ) -> StoreResult<Vec<TokenRow>> {
        accounts::list_mcp_tokens(&self.pool, owner_id, reach, now, page).await
    }

    async fn bytes_held_by_owner(&self) -> StoreResult<Vec<(OwnerId, i64)>> {
        let rows = sqlx::query(sql::BYTES_HELD_BY_OWNER)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(rows::owner_bytes).collect()
    }

    async fn live_grants(&self, owner_id: OwnerId, now: UnixMillis) -> StoreResult<LiveGrants> {
        let rows = bound::count_live_grants(owner_id, now)
            .fetch_all(&self.pool)
            .await?;
        rows::live_grants(&rows)
    }

    async fn live_sessions_by_app(
        &self,
        owner_id: OwnerId,
        now: UnixMillis,
    ) -> StoreResult<Vec<(AppScope, i64)>> {
        let rows = bound::count_live_sessions(owner_id, now)
            .fetch_all(&self.pool)
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
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(rows::token).collect()
    }

    async fn create_session(&self, s: &NewSession, max_live: u32) -> StoreResult<EndedSessions> {
        sessions::create_session(&self.pool, s, max_live).await
    }

    async fn live_session(
        &self,
        owner_id: OwnerId,
        app: &AppScope,
        pair_id: PairId,
        now: UnixMillis,
    ) -> StoreResult<Option<LiveSession>> {
        sessions::live_session(&self.pool, owner_id, app, pair_id, now).await
    }

    async fn set_catalog_update(&self, update: &CatalogUpdate) -> StoreResult<()> {
        sessions::set_catalog_update(&self.pool, update).await
    }

    async fn mark_plugin_seen(
        &self,
        owner_id: OwnerId,
        session_id: SessionId,
        now: UnixMillis,
    ) -> StoreResult<()> {
        if !self.plugin_seen.due(owner_id, session_id, now) {
            return Ok(());
        }
        bound::mark_plugin_seen(owner_id, session_id, now)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn end_session(
        &self,
        owner_id: OwnerId,
        app: &AppScope,
        session_id: SessionId,
        now: UnixMillis,
    ) -> StoreResult<EndedSessions> {
        sessions::end_session(&self.pool, owner_id, app, session_id, now).await
    }

    async fn post_call(
        &self,
        bearer: Bearer,
        c: &NewCall,
        max_pending: Option<u32>,
    ) -> StoreResult<UnixMillis> {
        let op = batch::PostOp {
            bearer,
            call: c.clone(),
            max_pending,
        };
        self.batch.post(op).await
    }

    async fn post_call_then_claim(
        &self,
        bearer: Bearer,
        c: &NewCall,
        max_pending: Option<u32>,
        claim: ClaimFor,
    ) -> StoreResult<UnixMillis> {
        let (store, c) = (self.clone(), c.clone());
        // A task of its own: the claim's answer must not depend on the post's caller staying.
        tokio::spawn(async move {
            let claimer = claim.bearer;
            let posted = calls::post_call_then_claim(
                &store.pool,
                &store.notifier,
                &bearer,
                &c,
                max_pending,
                claim,
            )
            .await;
            if posted.is_ok() {
                store
                    .claimer_seen(claimer.owner_id, c.session_id, c.created_at)
                    .await;
            }
            posted
        })
        .await
        .map_err(|_| StoreError::WriterStopped)?
    }

    async fn claim_calls(
        &self,
        bearer: Bearer,
        session_id: SessionId,
        now: UnixMillis,
        max: u32,
        lease_ms: u64,
    ) -> StoreResult<Vec<ClaimedRow>> {
        let op = batch::ClaimOp {
            bearer,
            session_id,
            now,
            max,
            lease_ms,
        };
        let claimed = self.batch.claim(op).await?;
        self.claimer_seen(bearer.owner_id, session_id, now).await;
        Ok(claimed)
    }

    async fn reply_call(
        &self,
        bearer: Bearer,
        call_id: CallId,
        reply: Vec<u8>,
        now: UnixMillis,
    ) -> StoreResult<()> {
        let op = batch::ReplyOp {
            bearer,
            call_id,
            reply,
            now,
        };
        let stored = self.batch.reply(op).await;
        self.delivered_if_marked(stored, bearer.owner_id, call_id)
    }

    async fn cancel_call(
        &self,
        bearer: Bearer,
        call_id: CallId,
        reason: CancelReason,
        now: UnixMillis,
    ) -> StoreResult<()> {
        let cancelled = calls::cancel_call(&self.pool, &bearer, call_id, reason, now).await;
        self.delivered_if_marked(cancelled, bearer.owner_id, call_id)
    }

    async fn read_call(
        &self,
        bearer: Bearer,
        call_id: CallId,
        now: UnixMillis,
    ) -> StoreResult<Option<CallView>> {
        let op = batch::ReadOp {
            bearer,
            call_id,
            now,
        };
        let view = self.batch.read(op).await;
        self.marked(view, bearer.owner_id, call_id)
    }

    async fn reply_call_then_read(
        &self,
        bearer: Bearer,
        call_id: CallId,
        reply: Vec<u8>,
        now: UnixMillis,
        read: ReadFor,
    ) -> StoreResult<()> {
        // One statement in a transaction: the read sees the reply and reaches the waiting reader
        // before the commit waits for the disk (docs/RELAY.md, "Durability on PostgreSQL"); the
        // replier is answered after the commit, as for any reply.
        let ReadFor {
            bearer: reader,
            answer,
        } = read;
        let mut tx = self.pool.begin().await?;
        let Some(view) =
            calls::reply_then_read_in(&mut tx, &bearer, call_id, &reply, now, &reader).await?
        else {
            drop(tx);
            // Not stored: the plain reply says why, and the reader learns where the call is.
            let replied = self.reply_call(bearer, call_id, reply, now).await;
            let _ = answer.send(self.read_call(reader, call_id, now).await);
            return replied;
        };
        let _ = answer.send(self.marked(view, reader.owner_id, call_id));
        tx.commit().await?;
        self.notifier.send(Topic::Call(bearer.owner_id, call_id));
        Ok(())
    }

    async fn sweep(&self, now: UnixMillis, grace_ms: u64) -> StoreResult<SweepStats> {
        calls::sweep(&self.pool, now, grace_ms, &self.sweep_window).await
    }

    async fn count_calls_by_state(&self) -> StoreResult<Vec<(CallState, i64)>> {
        let found = sqlx::query(sql::COUNT_CALLS_BY_STATE)
            .fetch_all(&self.pool)
            .await?;
        found.iter().map(rows::state_count).collect()
    }
}

#[async_trait]
impl Inspect for PgStore {
    async fn held_bytes(
        &self,
        owner_id: OwnerId,
        call_id: CallId,
    ) -> StoreResult<Option<HeldBytes>> {
        let row = sqlx::query(sql::SELECT_HELD_BYTES)
            .bind(b(owner_id))
            .bind(b(call_id))
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(rows::held_bytes).transpose()
    }

    async fn overwrite_call_expiry(
        &self,
        owner_id: OwnerId,
        call_id: CallId,
        stored: i64,
    ) -> StoreResult<()> {
        sqlx::query(sql::OVERWRITE_CALL_EXPIRY)
            .bind(b(owner_id))
            .bind(b(call_id))
            .bind(stored)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    fn refused_groups(&self) -> u64 {
        self.batch.refused()
    }
}
