//! Re-confirming each person at the provider (`--oidc-recheck-hours N`): in the background,
//! every replica leases the confirmations older than half the period and renews each with the
//! person's refresh token. A confirmation extends the person's access to N hours from now; a
//! refusal (the person removed or disabled at the provider, the grant revoked) revokes every
//! token of theirs at once; a provider that does not answer is tried again after the lease.
//! Access therefore ends within N hours of removal whatever happens, and sooner when the
//! provider says so. The request path only compares `owners.confirmed_until` with now.
//!
//! A refresh token the provider rotates is stored the moment its answer arrives, before that
//! answer is checked: the spent one is never presented again (a provider that detects reuse
//! would take it for theft and revoke the person's grant).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::provider::{Provider, Refresh, Renewal};
use crate::clock::now_ms;
use crate::store::{RenewalLease, RenewalOutcome, Store, StoreResult};
use sealpost_protocol::ids::OwnerId;
use sealpost_time::UnixMillis;

/// How long a replica holds a renewal it took: well above one refresh (its request times out
/// after 10 s, and may wait as long for the provider's documents). Each person is leased on
/// their own, just before their refresh, so a long round never outlives a lease.
const LEASE: Duration = Duration::from_secs(60);

/// How often keeping a rotated refresh token is tried when the database fails, a second apart
/// (within the lease): the token the provider took back is spent, and only this one works.
const KEEP_ROTATED_ATTEMPTS: u32 = 5;

/// Renews the due confirmations every eighth of the period (between 250 ms and a minute) until
/// `shutdown`.
pub async fn recheck_loop(
    store: Arc<dyn Store>,
    provider: Arc<Provider>,
    every: Duration,
    shutdown: CancellationToken,
) {
    let tick = (every / 8).clamp(Duration::from_millis(250), Duration::from_secs(60));
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(tick) => {}
        }
        if let Err(error) = renew_due(store.as_ref(), &provider, every).await {
            tracing::warn!(error = %crate::store::ErrorChain(&error), "could not renew team sign-ins");
        }
    }
}

/// One round: renews, one person at a time, everyone last confirmed more than half of `every`
/// ago. Returns how many it renewed or found refused.
pub async fn renew_due(
    store: &dyn Store,
    provider: &Provider,
    every: Duration,
) -> StoreResult<usize> {
    let Some(at_rest) = provider.at_rest() else {
        return Ok(0);
    };
    let half = (every / 2).as_millis() as u64;
    // A renewal the provider did not answer is tried again after this (within the period).
    let retry_ms = (every / 8)
        .clamp(Duration::from_millis(250), Duration::from_secs(60))
        .as_millis() as u64;
    let mut done = 0;
    loop {
        let now = now_ms();
        let lease_until = now.saturating_add_ms(LEASE.as_millis() as u64);
        let Some(person) = store
            .lease_renewals(RenewalLease {
                issuer: provider.config().issuer.clone(),
                confirmed_before: now.saturating_sub_ms(half),
                now,
                lease_until,
                limit: 1,
            })
            .await?
            .pop()
        else {
            return Ok(done);
        };
        let Some(refresh_token) = at_rest.open(
            &person.issuer,
            &person.subject,
            &person.sealed_refresh_token,
        ) else {
            // Sealed under another client secret: the person signs in again when it lapses;
            // the lease keeps this one from being tried each round meanwhile.
            tracing::warn!(owner = %person.owner_id, "a refresh token does not open (was the client secret changed?)");
            continue;
        };
        // The provider vouches as of the moment it was asked, not when its answer arrived.
        let asked_at = now_ms();
        let unanswered = |why: &str| {
            tracing::warn!(owner = %person.owner_id, reason = %why, "the provider did not confirm a renewal; trying again shortly");
            RenewalOutcome::Unanswered {
                retry_at: now_ms().saturating_add_ms(retry_ms),
            }
        };
        let refused = |why: &str| {
            tracing::info!(owner = %person.owner_id, reason = %why, "the provider no longer vouches for this person: their tokens are revoked");
            RenewalOutcome::Refused { at: now_ms() }
        };
        let outcome = match provider.refresh(&refresh_token).await {
            Refresh::Refused(why) => refused(&why),
            Refresh::Unavailable(why) => unanswered(&why),
            Refresh::Answered(refreshed) => {
                // The presented token is spent now: its successor is stored before the answer
                // is checked, so whatever that check says, the next renewal presents the
                // successor.
                let sealed_refresh_token = match refreshed.rotated_refresh_token() {
                    Some(rotated) => {
                        let sealed = at_rest.seal(&person.issuer, &person.subject, rotated);
                        if !keep_rotated(store, person.owner_id, lease_until, &sealed).await? {
                            tracing::info!(owner = %person.owner_id, "a renewal was overtaken (a sign-in, or another replica); its outcome is dropped");
                            continue;
                        }
                        sealed
                    }
                    None => person.sealed_refresh_token.clone(),
                };
                match provider.confirm(&refreshed, &person.subject).await {
                    Renewal::Confirmed => RenewalOutcome::Confirmed {
                        at: asked_at,
                        until: asked_at.saturating_add_ms(every.as_millis() as u64),
                        sealed_refresh_token,
                    },
                    Renewal::Refused(why) => refused(&why),
                    Renewal::Unconfirmed(why) => unanswered(&why),
                }
            }
        };
        let answered = !matches!(outcome, RenewalOutcome::Unanswered { .. });
        if store
            .record_renewal(person.owner_id, lease_until, &outcome)
            .await?
        {
            done += usize::from(answered);
        } else {
            tracing::info!(owner = %person.owner_id, "a renewal was overtaken (a sign-in, or another replica); its outcome is dropped");
        }
    }
}

/// Stores a rotated refresh token under the lease `lease_until`, trying again while the
/// database fails. False when the lease is no longer this replica's (a sign-in stored a newer
/// token meanwhile).
async fn keep_rotated(
    store: &dyn Store,
    owner_id: OwnerId,
    lease_until: UnixMillis,
    sealed: &[u8],
) -> StoreResult<bool> {
    let rotated = RenewalOutcome::Rotated {
        sealed_refresh_token: sealed.to_vec(),
    };
    let mut attempt = 1;
    loop {
        match store.record_renewal(owner_id, lease_until, &rotated).await {
            Err(error) if attempt < KEEP_ROTATED_ATTEMPTS => {
                tracing::warn!(owner = %owner_id, error = %crate::store::ErrorChain(&error), "could not keep a rotated refresh token; trying again");
                attempt += 1;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            outcome => return outcome,
        }
    }
}
