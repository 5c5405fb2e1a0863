//! Team sign-in's rows, written once for both backends (each runs these inside its own write
//! or transaction): sign-in flows in flight, and who a person is at the provider.

use sealpost_protocol::ids::OwnerId;
use sealpost_time::UnixMillis;
use sqlx::{Database, Encode, Executor, IntoArguments, Type};

use super::rows::{self, Columns};
use super::sweep::Affected;
use super::{OwnerRow, StoreError, StoreResult, b, parse_app, time_to_sql};
use crate::ids::random_id;
use crate::scope::AppScope;

/// A sign-in between the relay and the provider, from the start to the callback.
#[derive(Debug, Clone, PartialEq)]
pub struct OidcFlow {
    /// SHA-256 of the `state` sent to the provider, which its callback brings back.
    pub state_hash: [u8; 32],
    /// SHA-256 of the cookie set on the browser that started the flow.
    pub browser_hash: [u8; 32],
    /// The nonce the ID token must carry.
    pub nonce: String,
    /// The PKCE verifier of the challenge sent to the provider.
    pub pkce_verifier: String,
    /// The app the sign-in is for.
    pub app: AppScope,
    /// The app's own PKCE challenge (S256 digest): the code handed back works only with its
    /// verifier.
    pub app_challenge: [u8; 32],
    /// When the flow stops working.
    pub expires_at: UnixMillis,
}

/// A person the provider has just vouched for (a sign-in).
#[derive(Debug, Clone, PartialEq)]
pub struct ConfirmedIdentity {
    /// The provider's `iss`.
    pub issuer: String,
    /// The provider's `sub`.
    pub subject: String,
    /// The name a new owner gets (made unique if taken); never used to find one.
    pub name: String,
    /// When the provider vouched.
    pub now: UnixMillis,
    /// The end of this confirmation when re-checks are on (`owners.confirmed_until`).
    pub confirmed_until: Option<UnixMillis>,
    /// The provider's refresh token, sealed at rest; `None` keeps the one held.
    pub sealed_refresh_token: Option<Vec<u8>>,
}

const INSERT_FLOW: &str = "INSERT INTO oidc_flows (state_hash, browser_hash, nonce, \
     pkce_verifier, app_origin, app_challenge, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)";
/// One statement, so a state works once even when two callbacks race on two replicas.
const CONSUME_FLOW: &str =
    "DELETE FROM oidc_flows WHERE state_hash = $1 AND expires_at > $2 RETURNING *";
const SELECT_IDENTITY_OWNER: &str = "SELECT o.* FROM owner_identities i \
     JOIN owners o ON o.id = i.owner_id WHERE i.issuer = $1 AND i.subject = $2";
const CONFIRM_IDENTITY: &str = "UPDATE owner_identities SET confirmed_at = $3, \
     refresh_token = COALESCE($4, refresh_token), renewing_until = NULL \
     WHERE issuer = $1 AND subject = $2";
const SET_CONFIRMED_UNTIL: &str =
    "UPDATE owners SET confirmed_until = $2 WHERE id = $1 AND disabled_at IS NULL";
const INSERT_OWNER: &str = "INSERT INTO owners (id, name, created_at, confirmed_until) \
     VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING RETURNING id";
const INSERT_IDENTITY: &str = "INSERT INTO owner_identities \
     (issuer, subject, owner_id, created_at, confirmed_at, refresh_token) \
     VALUES ($1, $2, $3, $4, $4, $5) ON CONFLICT (issuer, subject) DO NOTHING RETURNING owner_id";
const DELETE_OWNER: &str = "DELETE FROM owners WHERE id = $1";

/// Stores a flow at its start.
pub(crate) async fn insert_flow<DB>(conn: &mut DB::Connection, flow: &OidcFlow) -> StoreResult<()>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query::<DB>(INSERT_FLOW)
        .bind(flow.state_hash.to_vec())
        .bind(flow.browser_hash.to_vec())
        .bind(flow.nonce.clone())
        .bind(flow.pkce_verifier.clone())
        .bind(flow.app.stored().to_owned())
        .bind(flow.app_challenge.to_vec())
        .bind(time_to_sql(flow.expires_at))
        .execute(conn)
        .await?;
    Ok(())
}

/// Uses a flow up at its callback: the flow if its state was live.
pub(crate) async fn consume_flow<DB>(
    conn: &mut DB::Connection,
    state_hash: [u8; 32],
    now: UnixMillis,
) -> StoreResult<Option<OidcFlow>>
where
    DB: Database,
    DB::Row: Columns,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
{
    let row = sqlx::query::<DB>(CONSUME_FLOW)
        .bind(state_hash.to_vec())
        .bind(time_to_sql(now))
        .fetch_optional(conn)
        .await?;
    let Some(row) = row else { return Ok(None) };
    let digest = |column: &str| -> StoreResult<[u8; 32]> {
        row.opt_bytes(column)?
            .and_then(|bytes| bytes.try_into().ok())
            .ok_or_else(|| StoreError::Unreadable(format!("oidc_flows.{column} is not 32 bytes")))
    };
    Ok(Some(OidcFlow {
        state_hash: digest("state_hash")?,
        browser_hash: digest("browser_hash")?,
        nonce: row.text("nonce")?,
        pkce_verifier: row.text("pkce_verifier")?,
        app: parse_app(&row.text("app_origin")?)?,
        app_challenge: digest("app_challenge")?,
        expires_at: row.time("expires_at")?,
    }))
}

/// The owner a confirmed identity signs in as: found by (issuer, subject) and its confirmation
/// recorded, or created with a name of its own. Run inside one transaction: two replicas that
/// sign the same new person in at once end with one owner.
pub(crate) async fn owner_for_identity<DB>(
    conn: &mut DB::Connection,
    identity: &ConfirmedIdentity,
) -> StoreResult<OwnerRow>
where
    DB: Database,
    DB::Row: Columns,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    Option<i64>: for<'q> Encode<'q, DB> + Type<DB>,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
    Option<Vec<u8>>: for<'q> Encode<'q, DB> + Type<DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
{
    let now = time_to_sql(identity.now);
    let until = identity.confirmed_until.map(time_to_sql);
    if let Some(owner) = identity_owner::<DB>(&mut *conn, identity).await? {
        sqlx::query::<DB>(CONFIRM_IDENTITY)
            .bind(identity.issuer.clone())
            .bind(identity.subject.clone())
            .bind(now)
            .bind(identity.sealed_refresh_token.clone())
            .execute(&mut *conn)
            .await?;
        sqlx::query::<DB>(SET_CONFIRMED_UNTIL)
            .bind(b(owner.id))
            .bind(until)
            .execute(&mut *conn)
            .await?;
        return Ok(owner);
    }
    let id: OwnerId = random_id();
    let mut name = identity.name.clone();
    let mut made = false;
    for attempt in [identity.name.clone(), unique_name(identity)] {
        let inserted = sqlx::query::<DB>(INSERT_OWNER)
            .bind(b(id))
            .bind(attempt.clone())
            .bind(now)
            .bind(until)
            .fetch_optional(&mut *conn)
            .await?;
        if inserted.is_some() {
            name = attempt;
            made = true;
            break;
        }
    }
    if !made {
        // Both names taken: perhaps by this very person, made by another replica meanwhile.
        return identity_owner::<DB>(&mut *conn, identity)
            .await?
            .ok_or(StoreError::Duplicate);
    }
    let claimed = sqlx::query::<DB>(INSERT_IDENTITY)
        .bind(identity.issuer.clone())
        .bind(identity.subject.clone())
        .bind(b(id))
        .bind(now)
        .bind(identity.sealed_refresh_token.clone())
        .fetch_optional(&mut *conn)
        .await?;
    if claimed.is_none() {
        // Another replica made this person's owner between the look-up and here: theirs stands.
        sqlx::query::<DB>(DELETE_OWNER)
            .bind(b(id))
            .execute(&mut *conn)
            .await?;
        return identity_owner::<DB>(&mut *conn, identity)
            .await?
            .ok_or(StoreError::NotFound);
    }
    Ok(OwnerRow {
        id,
        name,
        created_at: identity.now,
        disabled: false,
        confirmed_until: identity.confirmed_until,
    })
}

/// The owner of the person `identity` names at the provider, if they have one.
async fn identity_owner<DB>(
    conn: &mut DB::Connection,
    identity: &ConfirmedIdentity,
) -> StoreResult<Option<OwnerRow>>
where
    DB: Database,
    DB::Row: Columns,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
{
    let row = sqlx::query::<DB>(SELECT_IDENTITY_OWNER)
        .bind(identity.issuer.clone())
        .bind(identity.subject.clone())
        .fetch_optional(conn)
        .await?;
    row.as_ref().map(rows::owner).transpose()
}

/// A name taken by someone else gets a suffix from who this person is at the provider, so it
/// stays the same across attempts and replicas.
fn unique_name(identity: &ConfirmedIdentity) -> String {
    let tag = crate::oidc::identity_tag(&identity.issuer, &identity.subject);
    format!("{} ({tag})", identity.name)
}

/// Which confirmations a replica takes to renew now.
#[derive(Debug, Clone, PartialEq)]
pub struct RenewalLease {
    /// The configured issuer: only its people are renewed, so a refresh token never goes to
    /// another issuer than the one that issued it (after the operator changes the issuer).
    pub issuer: String,
    /// Renew people last confirmed at or before this.
    pub confirmed_before: UnixMillis,
    /// Now: a lease that ended before it is taken again.
    pub now: UnixMillis,
    /// Until when the renewals taken are this replica's.
    pub lease_until: UnixMillis,
    /// The most taken at once.
    pub limit: i64,
}

/// A person whose confirmation is due, leased to this replica.
#[derive(Debug, Clone, PartialEq)]
pub struct DueRenewal {
    /// The person's owner.
    pub owner_id: OwnerId,
    /// The person at the provider: `iss` …
    pub issuer: String,
    /// … and `sub`.
    pub subject: String,
    /// The refresh token, sealed at rest.
    pub sealed_refresh_token: Vec<u8>,
}

/// What the provider said of a person.
#[derive(Debug, Clone, PartialEq)]
pub enum RenewalOutcome {
    /// Still vouched for.
    Confirmed {
        /// When.
        at: UnixMillis,
        /// Until when the confirmation counts.
        until: UnixMillis,
        /// The refresh token to keep (rotated or the same), sealed.
        sealed_refresh_token: Vec<u8>,
    },
    /// Refused: every token of the owner is revoked and no renewal is tried again; a sign-in
    /// at the provider is the only way back.
    Refused {
        /// When.
        at: UnixMillis,
    },
    /// The provider rotated the refresh token: the new one replaces the spent one at once,
    /// before the answer is checked, and the lease stays this replica's.
    Rotated {
        /// The refresh token handed back, sealed.
        sealed_refresh_token: Vec<u8>,
    },
    /// Not answered: nothing changes but when the renewal is tried again (the lease is held
    /// until then).
    Unanswered {
        /// When to try again.
        retry_at: UnixMillis,
    },
}

/// Only rows of the issuer `$5` still due and unleased are taken (the outer condition, which
/// PostgreSQL checks again on a row another replica just leased), at most `$4`, the longest
/// unconfirmed first.
const LEASE_RENEWALS: &str = "UPDATE owner_identities SET renewing_until = $3 \
     WHERE issuer = $5 AND confirmed_at <= $1 AND refresh_token IS NOT NULL \
     AND (renewing_until IS NULL OR renewing_until <= $2) \
     AND owner_id IN (SELECT id FROM owners WHERE disabled_at IS NULL) \
     AND owner_id IN (SELECT owner_id FROM owner_identities WHERE issuer = $5 \
       AND confirmed_at <= $1 AND refresh_token IS NOT NULL \
       AND (renewing_until IS NULL OR renewing_until <= $2) \
       ORDER BY confirmed_at LIMIT $4) \
     RETURNING owner_id, issuer, subject, refresh_token";
/// `$4`, `$2`: the lease this replica took; a sign-in meanwhile (which clears it) or another
/// replica's lease after this one's ran out wins, and this outcome is dropped.
const RENEWED: &str = "UPDATE owner_identities SET confirmed_at = $2, refresh_token = $3, \
     renewing_until = NULL WHERE owner_id = $1 AND renewing_until = $4";
const REFUSED: &str = "UPDATE owner_identities SET refresh_token = NULL, renewing_until = NULL \
     WHERE owner_id = $1 AND renewing_until = $2";
const ROTATED: &str = "UPDATE owner_identities SET refresh_token = $2 \
     WHERE owner_id = $1 AND renewing_until = $3";
const RETRY_AT: &str = "UPDATE owner_identities SET renewing_until = $3 \
     WHERE owner_id = $1 AND renewing_until = $2";
const LAPSE_NOW: &str = "UPDATE owners SET confirmed_until = $2 WHERE id = $1";
const CLEAR_CONFIRMED_UNTIL: &str =
    "UPDATE owners SET confirmed_until = NULL WHERE confirmed_until IS NOT NULL";
/// Each person's last confirmation plus the period, or the limit they have when that is sooner
/// (a refusal's, which a restart must not lift).
const SET_EVERY_CONFIRMED_UNTIL: &str = "UPDATE owners SET confirmed_until = CASE \
     WHEN confirmed_until IS NOT NULL AND confirmed_until < \
       (SELECT i.confirmed_at + $1 FROM owner_identities i WHERE i.owner_id = owners.id) \
     THEN confirmed_until \
     ELSE (SELECT i.confirmed_at + $1 FROM owner_identities i WHERE i.owner_id = owners.id) END \
     WHERE id IN (SELECT owner_id FROM owner_identities)";

/// Leases the confirmations due for renewal to this replica.
pub(crate) async fn lease_renewals<DB>(
    conn: &mut DB::Connection,
    lease: RenewalLease,
) -> StoreResult<Vec<DueRenewal>>
where
    DB: Database,
    DB::Row: Columns,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
{
    let rows = sqlx::query::<DB>(LEASE_RENEWALS)
        .bind(time_to_sql(lease.confirmed_before))
        .bind(time_to_sql(lease.now))
        .bind(time_to_sql(lease.lease_until))
        .bind(lease.limit)
        .bind(lease.issuer)
        .fetch_all(conn)
        .await?;
    rows.iter()
        .map(|row| {
            Ok(DueRenewal {
                owner_id: row.id("owner_id")?,
                issuer: row.text("issuer")?,
                subject: row.text("subject")?,
                sealed_refresh_token: row.opt_bytes("refresh_token")?.unwrap_or_default(),
            })
        })
        .collect()
}

/// Records what the provider said of `owner_id` under the lease `lease_until` this replica
/// took (one transaction); nothing when that lease is no longer the row's. Whether it was
/// recorded.
pub(crate) async fn record_renewal<DB>(
    conn: &mut DB::Connection,
    owner_id: OwnerId,
    lease_until: UnixMillis,
    outcome: &RenewalOutcome,
) -> StoreResult<bool>
where
    DB: Database,
    DB::QueryResult: Affected,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    Option<i64>: for<'q> Encode<'q, DB> + Type<DB>,
    Vec<u8>: for<'q> Encode<'q, DB> + Type<DB>,
{
    match outcome {
        RenewalOutcome::Confirmed {
            at,
            until,
            sealed_refresh_token,
        } => {
            let held = sqlx::query::<DB>(RENEWED)
                .bind(b(owner_id))
                .bind(time_to_sql(*at))
                .bind(sealed_refresh_token.clone())
                .bind(time_to_sql(lease_until))
                .execute(&mut *conn)
                .await?;
            if held.affected() == 0 {
                return Ok(false);
            }
            sqlx::query::<DB>(SET_CONFIRMED_UNTIL)
                .bind(b(owner_id))
                .bind(Some(time_to_sql(*until)))
                .execute(&mut *conn)
                .await?;
        }
        RenewalOutcome::Refused { at } => {
            let held = sqlx::query::<DB>(REFUSED)
                .bind(b(owner_id))
                .bind(time_to_sql(lease_until))
                .execute(&mut *conn)
                .await?;
            if held.affected() == 0 {
                return Ok(false);
            }
            sqlx::query::<DB>(LAPSE_NOW)
                .bind(b(owner_id))
                .bind(time_to_sql(*at))
                .execute(&mut *conn)
                .await?;
            sqlx::query::<DB>(super::sql::REVOKE_OWNER_TOKENS)
                .bind(b(owner_id))
                .bind(time_to_sql(*at))
                .execute(&mut *conn)
                .await?;
            // Links minted before cannot sign the person in again either.
            sqlx::query::<DB>(super::sql::DELETE_OWNER_SIGNIN_CODES)
                .bind(b(owner_id))
                .execute(&mut *conn)
                .await?;
        }
        RenewalOutcome::Rotated {
            sealed_refresh_token,
        } => {
            let held = sqlx::query::<DB>(ROTATED)
                .bind(b(owner_id))
                .bind(sealed_refresh_token.clone())
                .bind(time_to_sql(lease_until))
                .execute(&mut *conn)
                .await?;
            return Ok(held.affected() > 0);
        }
        RenewalOutcome::Unanswered { retry_at } => {
            let held = sqlx::query::<DB>(RETRY_AT)
                .bind(b(owner_id))
                .bind(time_to_sql(lease_until))
                .bind(time_to_sql(*retry_at))
                .execute(&mut *conn)
                .await?;
            return Ok(held.affected() > 0);
        }
    }
    Ok(true)
}

/// Brings every owner's `confirmed_until` in line with the configured re-check period (at
/// start): each person's last confirmation plus the period, or no limit when re-checks are off.
pub(crate) async fn apply_recheck<DB>(
    conn: &mut DB::Connection,
    every_ms: Option<i64>,
) -> StoreResult<()>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
{
    match every_ms {
        None => {
            sqlx::query::<DB>(CLEAR_CONFIRMED_UNTIL)
                .execute(conn)
                .await?
        }
        Some(every) => {
            sqlx::query::<DB>(SET_EVERY_CONFIRMED_UNTIL)
                .bind(every)
                .execute(conn)
                .await?
        }
    };
    Ok(())
}
