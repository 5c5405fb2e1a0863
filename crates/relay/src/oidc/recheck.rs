//! Re-confirming each person at the provider (`--oidc-recheck-hours N`): in the background,
//! every replica leases the confirmations older than half the period and renews each with the
//! person's refresh token. A confirmation extends the person's access to N hours from now; a
//! refusal (the person removed or disabled at the provider, the grant revoked) revokes every
//! token of theirs at once; a provider that does not answer is tried again after the lease.
//! Access therefore ends within N hours of removal whatever happens, and sooner when the
//! provider says so. The request path only compares `owners.confirmed_until` with now.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::provider::{Provider, Renewal};
use crate::clock::now_ms;
use crate::store::{RenewalLease, RenewalOutcome, Store, StoreResult};

/// How long a replica holds a renewal it took: well above one refresh (its request times out
/// after 10 s, and may wait as long for the provider's documents). Each person is leased on
/// their own, just before their refresh, so a long round never outlives a lease.
const LEASE: Duration = Duration::from_secs(60);

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
        let outcome = match provider.renew(&refresh_token, &person.subject).await {
            Renewal::Confirmed { refresh_token } => RenewalOutcome::Confirmed {
                at: asked_at,
                until: asked_at.saturating_add_ms(every.as_millis() as u64),
                sealed_refresh_token: at_rest.seal(&person.issuer, &person.subject, &refresh_token),
            },
            Renewal::Refused(why) => {
                tracing::info!(owner = %person.owner_id, reason = %why, "the provider no longer vouches for this person: their tokens are revoked");
                RenewalOutcome::Refused { at: now_ms() }
            }
            Renewal::Unavailable(why) => {
                tracing::warn!(owner = %person.owner_id, reason = %why, "the provider did not answer a renewal; trying again shortly");
                RenewalOutcome::Unanswered {
                    retry_at: now_ms().saturating_add_ms(retry_ms),
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
