//! The relay's persistence boundary: one [`Store`] trait, two backends, chosen by URL scheme.
//!
//! Only this module and its children know SQL. Every call-level method is scoped by owner and
//! by app (the token row's, compared in the statement: `token_app!`), and
//! the state machine (`pending → claimed → answered → delivered`, `pending|claimed → expired |
//! cancelled`) is enforced inside single statements, so concurrent requests and several relay
//! replicas cannot hand one call to two executors. Times are [`UnixMillis`] passed in by the
//! caller (an `i64` only in SQL, see `sql_time`): the store never reads a clock, which lets the contract suite drive expiry exactly.

use std::sync::Arc;

use async_trait::async_trait;
use sealpost_protocol::api::{CallState, TokenKind};
use sealpost_protocol::content::CancelReason;
use sealpost_protocol::ids::{CallId, Id, LinkId, OwnerId, PairId, SessionId, TokenId};
use sealpost_time::UnixMillis;

use crate::scope::AppScope;
use crate::wake::{Hub, Topic};

/// The app of the token whose id `$token` (an SQL expression) names, as SQL: what a statement
/// compares a session's or call's `app_origin` with, so a token acts on its own app's alone
/// (see `scope`). No such row gives NULL, which equals nothing.
macro_rules! token_app {
    ($token:literal) => {
        concat!(
            "(SELECT ta.app_origin FROM tokens ta WHERE ta.id = ",
            $token,
            ")"
        )
    };
}

mod bound;
mod hot_path;
mod identities;
mod lineage;
mod postgres;
mod rows;
mod sql;
mod sql_time;
mod sqlite;
mod sweep;

pub use identities::{ConfirmedIdentity, DueRenewal, OidcFlow, RenewalLease, RenewalOutcome};
pub(crate) use sql_time::{duration_to_sql, time_from_sql, time_to_sql};

/// Why a store operation did not happen. The HTTP layer maps each to a stable error code.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No such row in the caller's scope: another owner's or another pairing's reads the same.
    #[error("not found")]
    NotFound,
    /// The id (or owner name) is already taken.
    #[error("already exists")]
    Duplicate,
    /// The session has ended or expired.
    #[error("the session has ended")]
    SessionEnded,
    /// The claim's lease ran out before the reply; the call has expired for good.
    #[error("the lease has run out")]
    LeaseExpired,
    /// The call is in this state, from which the operation cannot move it.
    #[error("the call is {}", .0.as_str())]
    WrongState(CallState),
    /// The session already holds the most pending calls allowed.
    #[error("too many pending calls in this session")]
    TooManyPending,
    /// The owner already holds the most live sessions allowed.
    #[error("too many live sessions for this owner")]
    TooManySessions,
    /// The session already holds a catalog update with this number or a higher one.
    #[error("the session holds a newer catalog update")]
    StaleCatalogUpdate,
    /// The presented token's row is revoked, expired, of a disabled owner, or does not match.
    #[error("the token is not live")]
    TokenNotLive,
    /// The database failed. The driver's error is the source (its text never holds the row
    /// data the relay binds), so a log line can carry the whole chain ([`ErrorChain`]).
    #[error("database error")]
    Db(#[from] sqlx::Error),
    /// A grouped statement of the SQLite writer failed: every request it carried gets this,
    /// sharing the one failure as the source.
    #[error("a grouped statement failed")]
    Grouped(#[source] Arc<StoreError>),
    /// An operation's statements succeeded but its transaction did not commit.
    #[error("the transaction did not commit")]
    NotCommitted(#[source] sqlx::Error),
    /// The schema could not be brought up to date.
    #[error("the database could not be migrated")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A stored value the relay cannot read (an unknown state name, an id of the wrong size).
    #[error("unreadable stored value: {0}")]
    Unreadable(String),
    /// The SQLite writer task has stopped, or dropped the operation before answering it.
    #[error("the SQLite writer stopped before answering")]
    WriterStopped,
}

/// Displays an error and each of its sources, `outer: inner: …`, for log lines.
#[derive(Debug)]
pub struct ErrorChain<'a>(pub &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            write!(f, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

/// A store operation's result.
pub type StoreResult<T> = Result<T, StoreError>;

/// An owner account (a person or a team member).
#[derive(Debug, Clone, PartialEq)]
pub struct OwnerRow {
    /// The owner's id, the `sub` of their tokens.
    pub id: OwnerId,
    /// The unique name the admin CLI calls them by.
    pub name: String,
    /// When the owner was created.
    pub created_at: UnixMillis,
    /// Whether the owner is disabled: none of their tokens works and they cannot sign in.
    pub disabled: bool,
    /// With team sign-in re-checks, when the owner's last confirmation at the provider runs
    /// out: none of their tokens works past it.
    pub confirmed_until: Option<UnixMillis>,
}

/// A bearer token's row. A JWT names it by `sid`; the row decides whether the JWT still works.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenRow {
    /// The row's id, the JWT's `sid`.
    pub id: TokenId,
    /// The owner the token acts for.
    pub owner_id: OwnerId,
    /// An owner sign-in or an MCP token.
    pub kind: TokenKind,
    /// Set for MCP tokens: the one pairing the token may act for.
    pub pair_id: Option<PairId>,
    /// The person's name for an MCP token; `sign-in` for an owner token.
    pub label: String,
    /// When the token was made (for an owner token, the sign-in).
    pub created_at: UnixMillis,
    /// When the token lapses; an owner token's slides forward each time `GET /v1/me` renews it.
    pub expires_at: UnixMillis,
    /// The app the token belongs to: for a sign-in, its code's; for an MCP token, that of the
    /// owner token that made it.
    pub app: AppScope,
    /// For an owner token, the latest it may ever be renewed to, fixed at sign-in (its
    /// absolute lifetime, or sooner when its link came from another sign-in); `None` for MCP
    /// tokens and for sign-ins made before it was recorded.
    pub lifetime_ends_at: Option<UnixMillis>,
    /// For a sign-in made from a link another sign-in minted, that sign-in: signing it out
    /// ends this one too. The store makes such a row only while that sign-in is unrevoked.
    pub parent_id: Option<TokenId>,
}

/// A one-time sign-in code to store (its SHA-256: the code itself is never stored).
#[derive(Debug, Clone, PartialEq)]
pub struct NewSigninCode {
    /// The link's id, by which it is listed and revoked.
    pub id: LinkId,
    /// SHA-256 of the code.
    pub code_hash: [u8; 32],
    /// The owner it signs in.
    pub owner_id: OwnerId,
    /// The app it signs in to.
    pub app: AppScope,
    /// When it stops working.
    pub expires_at: UnixMillis,
    /// For a link a signed-in token minted, that sign-in's own absolute end, which the sign-in
    /// made from it keeps; `None` for the CLI's links and the first start.
    pub lifetime_ends_at: Option<UnixMillis>,
    /// For a code a team sign-in hands an app, the SHA-256 of the PKCE verifier the app must
    /// show to use it; `None` for links.
    pub pkce_challenge: Option<[u8; 32]>,
    /// The sign-in that minted the link: signing it out voids the link, and the store makes
    /// the row only while it is unrevoked. `None` for the operator's links and a team
    /// sign-in's code.
    pub minted_by: Option<TokenId>,
    /// When the link was made.
    pub created_at: UnixMillis,
}

/// What a sign-in code grants once used.
#[derive(Debug, Clone, PartialEq)]
pub struct SigninGrant {
    /// The owner it signs in.
    pub owner_id: OwnerId,
    /// The app the sign-in belongs to.
    pub app: AppScope,
    /// The absolute end the sign-in inherits, if any (see [`NewSigninCode`]).
    pub lifetime_ends_at: Option<UnixMillis>,
    /// The PKCE challenge the exchange must answer, if any (see [`NewSigninCode`]).
    pub pkce_challenge: Option<[u8; 32]>,
    /// The sign-in that minted the link, which becomes the new sign-in's parent.
    pub minted_by: Option<TokenId>,
}

/// An unused sign-in link as listed (never its code, which is not stored).
#[derive(Debug, Clone, PartialEq)]
pub struct SigninLinkRow {
    /// The link's id.
    pub id: LinkId,
    /// The app it signs in to.
    pub app: AppScope,
    /// The sign-in that minted it, if one did.
    pub minted_by: Option<TokenId>,
    /// When it was made; `None` for links made before it was recorded.
    pub created_at: Option<UnixMillis>,
    /// When it lapses unused.
    pub expires_at: UnixMillis,
}

/// A session to create. The hello is opaque bytes stored as given.
#[derive(Debug, Clone)]
pub struct NewSession {
    /// The owner whose tab starts it.
    pub owner_id: OwnerId,
    /// The app whose token starts it: it ends and replaces only that app's session of the
    /// pairing, and only that app's tokens act on it and its calls.
    pub app: AppScope,
    /// The session's id, chosen by the tab.
    pub session_id: SessionId,
    /// The pairing it serves: starting it ends that pairing's previous session.
    pub pair_id: PairId,
    /// The sealed hello the plugin will fetch and verify.
    pub hello: Vec<u8>,
    /// When it starts.
    pub created_at: UnixMillis,
    /// When it ends unless ended sooner.
    pub expires_at: UnixMillis,
    /// The owner token that starts it: signing that token out ends the session. The store
    /// starts it only while that token is unrevoked.
    pub started_by: Option<TokenId>,
}

/// What a plugin sees of a pairing's live session.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveSession {
    /// The session's id.
    pub session_id: SessionId,
    /// Its hello, as the tab posted it.
    pub hello: Vec<u8>,
    /// When it ends unless ended sooner.
    pub expires_at: UnixMillis,
    /// When the tab last claimed (to within a second); `None` if it never has.
    pub claimer_seen_at: Option<UnixMillis>,
    /// When the plugin last looked the session up (to within a second); `None` if it never has.
    pub plugin_seen_at: Option<UnixMillis>,
    /// The newest catalog update the tab posted for it, as posted; `None` if none.
    pub catalog_update: Option<Vec<u8>>,
}

/// A catalog update for a live session: opaque bytes, and the number read from their clear
/// header.
#[derive(Debug, Clone)]
pub struct CatalogUpdate {
    /// The session's owner.
    pub owner_id: OwnerId,
    /// The app of the token that posts it: only that app's session takes it.
    pub app: AppScope,
    /// The session.
    pub session_id: SessionId,
    /// Its number within the session (1 or more).
    pub seq: u64,
    /// The update, byte for byte.
    pub update: Vec<u8>,
    /// When it was posted.
    pub now: UnixMillis,
}

/// One page of a listing in id order.
#[derive(Debug, Clone, Copy)]
pub struct Page {
    /// List the rows after this id; `None`: from the first.
    pub after: Option<TokenId>,
    /// The most rows.
    pub limit: u32,
}

/// A call to post.
#[derive(Debug, Clone)]
pub struct NewCall {
    /// The owner of the session it is posted to.
    pub owner_id: OwnerId,
    /// The session whose tab is to claim it.
    pub session_id: SessionId,
    /// The call's id, chosen by the plugin; a repeat is [`StoreError::Duplicate`].
    pub call_id: CallId,
    /// The sealed call, stored as given.
    pub envelope: Vec<u8>,
    /// When it is posted.
    pub created_at: UnixMillis,
    /// Requested expiry; the store clamps it to the session's expiry.
    pub expires_at: UnixMillis,
}

/// A call handed to an executor.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimedRow {
    /// The call's id.
    pub call_id: CallId,
    /// The sealed call.
    pub envelope: Vec<u8>,
    /// A reply after this is refused ([`StoreError::LeaseExpired`]).
    pub lease_expires_at: UnixMillis,
    /// When the call was posted.
    pub created_at: UnixMillis,
}

/// A call as its poster reads it. `state` is the effective state at `now`: a pending call past
/// its expiry or a claimed call past its lease reads as expired even before the sweeper runs.
#[derive(Debug, Clone, PartialEq)]
pub struct CallView {
    /// The effective state at `now`.
    pub state: CallState,
    /// The sealed reply, while the call is answered or delivered.
    pub reply: Option<Vec<u8>>,
    /// Why the call was cancelled, while it is cancelled.
    pub reason: Option<CancelReason>,
    /// When the call expires (its reply stays readable until then).
    pub expires_at: UnixMillis,
    /// When the call's state can next change on its own (expiry or lease end); readers wait no
    /// longer than this.
    pub next_change_at: Option<UnixMillis>,
}

/// The bearer token a request presented, as its verified JWT names it. The call loop's
/// operations (post, claim, reply, read) check its row themselves, in the statement that does
/// the work (SQLite) or in a query just before it (PostgreSQL), not in the HTTP layer. The
/// token is live if its row is unrevoked, unexpired at the operation's `now`, of an enabled
/// owner, and agrees with the claims (owner, kind, pairing). A token that is not live changes
/// nothing and the operation fails with [`StoreError::TokenNotLive`]. The token's app is read
/// from its row in the same statement: a call or session of another app is not found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bearer {
    /// The token row's id (the JWT's `sid`).
    pub token_id: TokenId,
    /// The owner the claims name (`sub`).
    pub owner_id: OwnerId,
    /// The kind the claims' audience names.
    pub kind: TokenKind,
    /// Set for MCP tokens: the pairing the token acts for.
    pub pair_id: Option<PairId>,
}

/// A claim a post makes for a claimer standing on the same replica (`crate::handoff`): the
/// claimer's token, how many calls it takes and their lease. The store sends the claim's
/// result to `answer` itself, whether or not the post's caller is still there.
#[derive(Debug)]
pub struct ClaimFor {
    /// The claimer's token, checked by the claim statement as for any claim.
    pub bearer: Bearer,
    /// Most calls to claim.
    pub max: u32,
    /// The lease, from the post's `now`.
    pub lease_ms: u64,
    /// Where the claimed calls go.
    pub answer: tokio::sync::oneshot::Sender<StoreResult<Vec<ClaimedRow>>>,
}

/// A read a reply makes for a reader standing on the same replica (`crate::handoff`): the
/// reader's token. The store sends the read's result to `answer` itself.
#[derive(Debug)]
pub struct ReadFor {
    /// The reader's token, checked by the read statement as for any read.
    pub bearer: Bearer,
    /// Where the call's view goes.
    pub answer: tokio::sync::oneshot::Sender<StoreResult<Option<CallView>>>,
}

/// Whether a call row still holds bytes (for the sweeper's contract and the canary tests; see
/// [`Inspect`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldBytes {
    /// The call's envelope is still stored.
    pub envelope: bool,
    /// A reply is stored.
    pub reply: bool,
}

/// Sessions that ended and the open calls that were cancelled with them (`session_ended`):
/// whom to wake, since their claimers and readers have an answer now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndedSessions {
    /// `(owner_id, session_id)` of each session that ended.
    pub sessions: Vec<(OwnerId, SessionId)>,
    /// `(owner_id, call_id)` of each call cancelled because its session ended.
    pub cancelled_calls: Vec<(OwnerId, CallId)>,
}

impl EndedSessions {
    /// The wake-up topics: each session's claimers and each cancelled call's readers.
    pub fn topics(&self) -> impl Iterator<Item = Topic> + '_ {
        let sessions = self.sessions.iter().map(|&(o, s)| Topic::Session(o, s));
        let calls = self.cancelled_calls.iter().map(|&(o, c)| Topic::Call(o, c));
        sessions.chain(calls)
    }

    /// Wakes this process's waiters on them. Other replicas hear of them through the store
    /// (PostgreSQL sends the same topics with `pg_notify` when it commits).
    pub fn wake(&self, hub: &Hub) {
        for topic in self.topics() {
            hub.wake(topic);
        }
    }
}

/// What one sweep did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepStats {
    /// Pending calls past their expiry and claimed calls past their lease, now expired.
    pub expired_calls: u64,
    /// Calls past their expiry whose remaining envelope or reply bytes were dropped.
    pub cleared_calls: u64,
    /// Call rows deleted, `grace_ms` after their expiry.
    pub deleted_calls: u64,
    /// Sessions that reached their expiry and ended.
    pub ended_sessions: u64,
    /// Ended sessions deleted, `grace_ms` after their end, once no call rows remain.
    pub deleted_sessions: u64,
    /// The sessions that expired in this sweep, and their cancelled calls.
    pub ended: EndedSessions,
}

/// What an owner holds against their per-owner quotas, per app.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveGrants {
    /// Each app that holds any, by origin (the relay's own app first).
    pub by_app: Vec<AppGrants>,
}

/// What one app holds against the owner's quotas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppGrants {
    /// The app.
    pub app: AppScope,
    /// Unrevoked, unexpired MCP tokens (`max_live_mcp_tokens_per_owner`).
    pub mcp_tokens: i64,
    /// Unused, unexpired sign-in codes (`max_live_signin_codes_per_owner`).
    pub signin_codes: i64,
}

impl LiveGrants {
    /// Live MCP tokens in all apps.
    pub fn mcp_tokens(&self) -> i64 {
        self.by_app.iter().map(|a| a.mcp_tokens).sum()
    }
    /// Unused sign-in codes in all apps.
    pub fn signin_codes(&self) -> i64 {
        self.by_app.iter().map(|a| a.signin_codes).sum()
    }
    /// Live MCP tokens per app.
    pub fn mcp_tokens_by_app(&self) -> Vec<(AppScope, i64)> {
        self.by_app
            .iter()
            .map(|a| (a.app.clone(), a.mcp_tokens))
            .collect()
    }
    /// Unused sign-in codes per app.
    pub fn signin_codes_by_app(&self) -> Vec<(AppScope, i64)> {
        self.by_app
            .iter()
            .map(|a| (a.app.clone(), a.signin_codes))
            .collect()
    }
}

/// The relay's storage. Both backends pass the same contract suite (`tests/it/contract/`).
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Which backend this is ("sqlite" or "postgres"), for logs and metrics.
    fn backend(&self) -> &'static str;
    /// Checks the database answers.
    async fn ping(&self) -> StoreResult<()>;
    /// Starts forwarding other replicas' wake-ups into `hub` (PostgreSQL); no-op otherwise.
    fn start_wakeup_listener(&self, hub: Arc<Hub>, shutdown: tokio_util::sync::CancellationToken);

    /// Returns the secret stored under `name`, storing `fresh` first if there is none.
    async fn secret(&self, name: &str, fresh: Vec<u8>) -> StoreResult<Vec<u8>>;

    /// Creates an enabled owner; [`StoreError::Duplicate`] if the id or name is taken.
    async fn create_owner(&self, id: OwnerId, name: &str, now: UnixMillis) -> StoreResult<()>;
    /// Every owner, disabled or not, by name.
    async fn list_owners(&self) -> StoreResult<Vec<OwnerRow>>;
    /// The owner called `name`, disabled or not.
    async fn owner_by_name(&self, name: &str) -> StoreResult<Option<OwnerRow>>;
    /// The owner with this id, disabled or not.
    async fn owner_by_id(&self, id: OwnerId) -> StoreResult<Option<OwnerRow>>;
    /// Disables an owner and revokes all of their tokens. False if no such owner.
    async fn disable_owner(&self, name: &str, now: UnixMillis) -> StoreResult<bool>;
    /// Enables a disabled owner; their revoked tokens stay revoked (they sign in afresh). False
    /// if no such owner.
    async fn enable_owner(&self, name: &str) -> StoreResult<bool>;

    /// Stores a one-time sign-in code (its hash), with the app and absolute end it grants.
    /// A code a sign-in mints is stored only while that sign-in is unrevoked
    /// ([`StoreError::TokenNotLive`] otherwise), in one step with that check, so a link is
    /// never minted past its sign-in's sign-out.
    async fn create_signin_code(&self, code: &NewSigninCode) -> StoreResult<()>;
    /// The owner's unused, unexpired sign-in links that a token of app `reach` reaches
    /// ([`AppScope::reaches_tokens_of`]), soonest to lapse first.
    async fn list_signin_links(
        &self,
        owner_id: OwnerId,
        reach: &AppScope,
        now: UnixMillis,
    ) -> StoreResult<Vec<SigninLinkRow>>;
    /// Voids one of the owner's unused links that a token of app `reach` reaches. False if
    /// there is no such link.
    async fn revoke_signin_link(
        &self,
        owner_id: OwnerId,
        reach: &AppScope,
        id: LinkId,
    ) -> StoreResult<bool>;
    /// Uses a sign-in code up: returns what it grants if the code existed, was unexpired and
    /// the owner is enabled. A code works once, even under concurrent attempts.
    async fn consume_signin_code(
        &self,
        code_hash: [u8; 32],
        now: UnixMillis,
    ) -> StoreResult<Option<SigninGrant>>;

    /// Stores a team sign-in flow at its start.
    async fn create_oidc_flow(&self, flow: &OidcFlow) -> StoreResult<()>;
    /// Uses a flow up at its callback: the flow if its state (SHA-256) was live. Works once,
    /// even when callbacks race on two replicas.
    async fn consume_oidc_flow(
        &self,
        state_hash: [u8; 32],
        now: UnixMillis,
    ) -> StoreResult<Option<OidcFlow>>;
    /// The owner a person the provider just vouched for signs in as, by (issuer, subject):
    /// their confirmation recorded, or a new owner made.
    async fn owner_for_identity(&self, identity: &ConfirmedIdentity) -> StoreResult<OwnerRow>;
    /// Leases to this replica the confirmations due for renewal at the provider.
    async fn lease_renewals(&self, lease: RenewalLease) -> StoreResult<Vec<DueRenewal>>;
    /// Records what the provider said of a person (see [`RenewalOutcome`]) under the lease
    /// `lease_until` this replica took; false (nothing recorded) when the lease is no longer
    /// the row's: a sign-in meanwhile, or another replica's lease after this one ran out.
    async fn record_renewal(
        &self,
        owner_id: OwnerId,
        lease_until: UnixMillis,
        outcome: &RenewalOutcome,
    ) -> StoreResult<bool>;
    /// At start: every owner's confirmation lasts `every_ms` from their last one (`None`: no
    /// re-check, no limit).
    async fn apply_recheck(&self, every_ms: Option<i64>) -> StoreResult<()>;

    /// Stores a new token row (a sign-in or an MCP token), live until it expires or is revoked.
    /// A sign-in with a parent is stored only while the parent is unrevoked
    /// ([`StoreError::TokenNotLive`] otherwise), in one step with that check.
    async fn create_token(&self, token: &TokenRow) -> StoreResult<()>;
    /// The token row if it is unrevoked, unexpired and its owner is enabled.
    async fn active_token(&self, id: TokenId, now: UnixMillis) -> StoreResult<Option<TokenRow>>;
    /// Slides an owner token's expiry forward. False if it is no longer active.
    async fn extend_token(
        &self,
        id: TokenId,
        expires_at: UnixMillis,
        now: UnixMillis,
    ) -> StoreResult<bool>;
    /// Revokes one of the owner's tokens (of `kind`, if given) that a token of app `reach`
    /// reaches ([`AppScope::reaches_tokens_of`]), as [`Store::sign_out`] does. False if there
    /// is no such token.
    async fn revoke_token(
        &self,
        owner_id: OwnerId,
        reach: &AppScope,
        id: TokenId,
        kind: Option<TokenKind>,
        now: UnixMillis,
    ) -> StoreResult<bool> {
        Ok(self
            .sign_out(owner_id, reach, id, kind, now)
            .await?
            .is_some())
    }
    /// Revokes one of the owner's tokens (of `kind`, if given) that a token of app `reach`
    /// reaches, and in the same transaction everything it made: every sign-in made from its
    /// links (and from theirs, to any depth) is revoked, their unused links are voided, and
    /// the sessions any of them started end (their open calls `session_ended`). Returns those
    /// sessions and calls, or `None` if there is no such token.
    async fn sign_out(
        &self,
        owner_id: OwnerId,
        reach: &AppScope,
        id: TokenId,
        kind: Option<TokenKind>,
        now: UnixMillis,
    ) -> StoreResult<Option<EndedSessions>>;
    /// The owner's live MCP tokens that a token of app `reach` reaches, in id order: at most
    /// `page.limit`, after `page.after`.
    async fn list_mcp_tokens(
        &self,
        owner_id: OwnerId,
        reach: &AppScope,
        now: UnixMillis,
        page: Page,
    ) -> StoreResult<Vec<TokenRow>>;
    /// Bytes each owner's calls and replies hold now (the byte quota's recount).
    async fn bytes_held_by_owner(&self) -> StoreResult<Vec<(OwnerId, i64)>>;
    /// How many live MCP tokens and unused sign-in codes the owner holds (their quotas).
    async fn live_grants(&self, owner_id: OwnerId, now: UnixMillis) -> StoreResult<LiveGrants>;
    /// The owner's live sign-ins (owner tokens) that a token of app `reach` reaches, oldest
    /// first.
    async fn list_owner_tokens(
        &self,
        owner_id: OwnerId,
        reach: &AppScope,
        now: UnixMillis,
    ) -> StoreResult<Vec<TokenRow>>;

    /// Creates a session, ending the pairing's previous one in the same app. Returns the
    /// sessions it ended and the calls that were cancelled (`session_ended`) with them.
    /// [`StoreError::TooManySessions`] when the owner's other live sessions reach `max_live`,
    /// or, for a host app, when that app's reach its share ([`crate::shares`]). A session whose
    /// `started_by` is revoked is not started ([`StoreError::TokenNotLive`]).
    async fn create_session(
        &self,
        session: &NewSession,
        max_live: u32,
    ) -> StoreResult<EndedSessions>;
    /// How many live sessions the owner holds in each app at `now` (what a refusal names).
    async fn live_sessions_by_app(
        &self,
        owner_id: OwnerId,
        now: UnixMillis,
    ) -> StoreResult<Vec<(AppScope, i64)>>;
    /// The pairing's session of `app` that is unended and unexpired at `now` (the newest,
    /// should there be more than one).
    async fn live_session(
        &self,
        owner_id: OwnerId,
        app: &AppScope,
        pair_id: PairId,
        now: UnixMillis,
    ) -> StoreResult<Option<LiveSession>>;
    /// Keeps a live session's catalog update when its number is higher than the kept one's:
    /// `NotFound` when the session is not the owner's and app's or not live, `StaleCatalogUpdate` when
    /// the kept one is as new or newer.
    async fn set_catalog_update(&self, update: &CatalogUpdate) -> StoreResult<()>;
    /// Records that the pairing's plugin looked the live session up at `now`: written at most
    /// once per [`hot_path::CLAIMER_SEEN_RESOLUTION_MS`] per session, since the lookup starts
    /// every call.
    async fn mark_plugin_seen(
        &self,
        owner_id: OwnerId,
        session_id: SessionId,
        now: UnixMillis,
    ) -> StoreResult<()>;
    /// Ends a session of `app`; its pending and claimed calls become cancelled
    /// (`session_ended`). Returns the session and those calls. Ending an ended session is not
    /// an error; another app's is `NotFound`.
    async fn end_session(
        &self,
        owner_id: OwnerId,
        app: &AppScope,
        session_id: SessionId,
        now: UnixMillis,
    ) -> StoreResult<EndedSessions>;

    /// Posts a call to a live session of the bearer's owner (and pairing, for an MCP token).
    /// Returns the effective expiry. `max_pending`: refuse when the session already holds this
    /// many pending calls. The four call-loop operations check the bearer (see [`Bearer`]).
    async fn post_call(
        &self,
        bearer: Bearer,
        call: &NewCall,
        max_pending: Option<u32>,
    ) -> StoreResult<UnixMillis>;
    /// Posts a call as [`Store::post_call`] does, then claims for `claim` in the same write,
    /// the claim seeing the new call: one writer batch on SQLite, one statement (one commit)
    /// on PostgreSQL. The claim is [`Store::claim_calls`] at the call's `created_at`;
    /// its result goes to `claim.answer`, even if the caller stops waiting once the write is
    /// under way. A claim that did not run (the post stored nothing, or the claim found its
    /// token or session not live on PostgreSQL) may drop `claim.answer` instead: the claimer
    /// then claims on its own, which says why.
    async fn post_call_then_claim(
        &self,
        bearer: Bearer,
        call: &NewCall,
        max_pending: Option<u32>,
        claim: ClaimFor,
    ) -> StoreResult<UnixMillis>;
    /// Atomically moves up to `max` pending calls of a live session to claimed, oldest first,
    /// with a lease that never runs past a call's expiry. Records that the tab polled.
    async fn claim_calls(
        &self,
        bearer: Bearer,
        session_id: SessionId,
        now: UnixMillis,
        max: u32,
        lease_ms: u64,
    ) -> StoreResult<Vec<ClaimedRow>>;
    /// Answers a claimed call whose lease has not run out.
    async fn reply_call(
        &self,
        bearer: Bearer,
        call_id: CallId,
        reply: Vec<u8>,
        now: UnixMillis,
    ) -> StoreResult<()>;
    /// Answers a call as [`Store::reply_call`] does, then reads it for `read`, the read seeing
    /// the reply: on SQLite in the reply's writer batch, on PostgreSQL in one statement whose
    /// transaction the reader does not wait to commit. The read runs whatever the reply came
    /// to, so the reader learns where the call is; its result goes to `read.answer`, and a
    /// read that did not run drops it (the reader then reads on its own).
    async fn reply_call_then_read(
        &self,
        bearer: Bearer,
        call_id: CallId,
        reply: Vec<u8>,
        now: UnixMillis,
        read: ReadFor,
    ) -> StoreResult<()>;
    /// Cancels a pending or claimed call in the bearer's scope. The bearer's row is not checked
    /// for liveness here (the HTTP layer reads it first), only its app.
    async fn cancel_call(
        &self,
        bearer: Bearer,
        call_id: CallId,
        reason: CancelReason,
        now: UnixMillis,
    ) -> StoreResult<()>;
    /// Reads a call in the bearer's scope; reading an answered call marks it delivered (the
    /// reply stays readable until the call expires).
    async fn read_call(
        &self,
        bearer: Bearer,
        call_id: CallId,
        now: UnixMillis,
    ) -> StoreResult<Option<CallView>>;

    /// Expires overdue calls and sessions, drops bytes of finished calls at their expiry, and
    /// deletes rows `grace_ms` after their expiry. A claim whose lease lapsed is expired by the
    /// first sweep after it, or, if its lease was written by a replica whose clock lags, by a
    /// sweep at most [`LAPSED_SWEEP_FULL_EVERY_MS`] later.
    async fn sweep(&self, now: UnixMillis, grace_ms: u64) -> StoreResult<SweepStats>;
    /// Number of call rows per stored state (for metrics).
    async fn count_calls_by_state(&self) -> StoreResult<Vec<(CallState, i64)>>;
}

/// How long a lapsed claim whose lease end a lagging clock wrote may stay `claimed` in the
/// table (it reads as expired all along): PostgreSQL's sweeps read only the lease ends since
/// the last sweep, and every lease end this often.
pub const LAPSED_SWEEP_FULL_EVERY_MS: u64 = 600_000;

/// What tests and the canary ask of a store beyond what the relay does: kept out of [`Store`]
/// so no endpoint can come to depend on it.
#[async_trait]
pub trait Inspect: Store {
    /// Which bytes a call row still holds; `None` if the row is gone.
    async fn held_bytes(
        &self,
        owner_id: OwnerId,
        call_id: CallId,
    ) -> StoreResult<Option<HeldBytes>>;
    /// Overwrites a call's stored `expires_at` with the raw integer `stored`, as a row written
    /// by hand might hold it (a negative value, say), so a test can see how the store reads it.
    async fn overwrite_call_expiry(
        &self,
        owner_id: OwnerId,
        call_id: CallId,
        stored: i64,
    ) -> StoreResult<()>;
    /// How many grouped statements the database refused (a deadlock, say), whose operations
    /// then ran alone; a store that does not group says 0.
    fn refused_groups(&self) -> u64 {
        0
    }
}

/// Opens the store a database URL names (`sqlite://…` or `postgres://…`), running migrations.
pub async fn open(url: &str) -> anyhow::Result<Arc<dyn Store>> {
    Ok(open_inspectable(url).await?)
}

/// The file a `sqlite:` URL names, when there is none yet: `None` for a file that exists, an
/// in-memory database or another backend. Commands that work on the relay's data (`owner`)
/// ask this first, so a mistyped path is an error rather than a new, empty database.
pub fn missing_sqlite_file(url: &str) -> anyhow::Result<Option<std::path::PathBuf>> {
    sqlite::missing_file(url)
}

/// [`open`], with the store's [`Inspect`] side too (for tests).
pub async fn open_inspectable(url: &str) -> anyhow::Result<Arc<dyn Inspect>> {
    if url.starts_with("sqlite:") {
        Ok(Arc::new(sqlite::SqliteStore::open(url).await?))
    } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
        Ok(Arc::new(postgres::PgStore::open(url).await?))
    } else {
        anyhow::bail!("unsupported database URL scheme: use sqlite://PATH or postgres://…")
    }
}

/// Text names of states and reasons as stored in the `state` / `cancel_reason` columns.
pub(crate) fn parse_state(text: &str) -> StoreResult<CallState> {
    CallState::parse(text)
        .ok_or_else(|| StoreError::Unreadable(format!("unknown call state {text:?}")))
}

pub(crate) fn parse_reason(text: Option<String>) -> Option<CancelReason> {
    let text = text?;
    CancelReason::ALL
        .iter()
        .copied()
        .find(|r| r.as_str() == text)
}

/// An `app_origin` column (see `scope::AppScope`).
pub(crate) fn parse_app(text: &str) -> StoreResult<AppScope> {
    AppScope::from_stored(text)
        .map_err(|error| StoreError::Unreadable(format!("stored app origin: {error}")))
}

pub(crate) fn parse_kind(text: &str) -> StoreResult<TokenKind> {
    match text {
        "owner" => Ok(TokenKind::Owner),
        "mcp" => Ok(TokenKind::Mcp),
        other => Err(StoreError::Unreadable(format!(
            "unknown token kind {other:?}"
        ))),
    }
}

/// An id as both backends store it: 16 bytes in a `BLOB` / `bytea` column.
pub(crate) fn b(id: impl Id) -> Vec<u8> {
    id.as_bytes().to_vec()
}

pub(crate) fn is_unique_violation(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db) if db.is_unique_violation())
}

pub(crate) fn id_from<I: Id>(bytes: Vec<u8>) -> StoreResult<I> {
    let bytes: [u8; 16] = bytes
        .try_into()
        .map_err(|_| StoreError::Unreadable("stored id is not 16 bytes".into()))?;
    Ok(I::from_bytes(bytes))
}

/// The effective state of a call row at `now` (lazy expiry; the sweeper makes it durable).
pub(crate) fn effective_state(
    state: CallState,
    expires_at: UnixMillis,
    lease_expires_at: Option<UnixMillis>,
    now: UnixMillis,
) -> CallState {
    match state {
        CallState::Pending if expires_at <= now => CallState::Expired,
        CallState::Claimed if lease_expires_at.is_none_or(|lease| lease <= now) => {
            CallState::Expired
        }
        CallState::Answered | CallState::Delivered if expires_at <= now => CallState::Expired,
        other => other,
    }
}

/// Builds the [`CallView`] of a row.
pub(crate) fn call_view(
    state: CallState,
    reply: Option<Vec<u8>>,
    reason: Option<CancelReason>,
    expires_at: UnixMillis,
    lease_expires_at: Option<UnixMillis>,
    now: UnixMillis,
) -> CallView {
    let state = effective_state(state, expires_at, lease_expires_at, now);
    let next_change_at = match state {
        CallState::Pending => Some(expires_at),
        CallState::Claimed => lease_expires_at,
        _ => None,
    };
    let reply = match state {
        CallState::Answered | CallState::Delivered => reply,
        _ => None,
    };
    let reason = if state == CallState::Cancelled {
        reason
    } else {
        None
    };
    CallView {
        state,
        reply,
        reason,
        expires_at,
        next_change_at,
    }
}
