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

/// How long a replica holds the renewals it took: a replica that stops mid-renewal leaves them
/// to another after this.
const LEASE: Duration = Duration::from_secs(60);
/// The most renewals taken in one round.
const BATCH: i64 = 50;

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
        loop {
            match renew_due(store.as_ref(), &provider, every).await {
                // A full batch: more may be due.
                Ok(renewed) if renewed as i64 >= BATCH => continue,
                Ok(_) => break,
                Err(error) => {
                    tracing::warn!(error = %crate::store::ErrorChain(&error), "could not renew team sign-ins");
                    break;
                }
            }
        }
    }
}

/// One round: leases the confirmations older than half of `every` and renews each. Returns
/// how many it took.
pub async fn renew_due(
    store: &dyn Store,
    provider: &Provider,
    every: Duration,
) -> StoreResult<usize> {
    let Some(at_rest) = provider.at_rest() else {
        return Ok(0);
    };
    let now = now_ms();
    let half = (every / 2).as_millis() as u64;
    let due = store
        .lease_renewals(RenewalLease {
            confirmed_before: now.saturating_sub_ms(half),
            now,
            lease_until: now.saturating_add_ms(LEASE.as_millis() as u64),
            limit: BATCH,
        })
        .await?;
    for person in &due {
        let Some(refresh_token) = at_rest.open(
            &person.issuer,
            &person.subject,
            &person.sealed_refresh_token,
        ) else {
            // Sealed under another client secret: the person signs in again when it lapses.
            tracing::warn!(owner = %person.owner_id, "a refresh token does not open (was the client secret changed?)");
            continue;
        };
        // The provider vouches as of the moment it was asked, not when its answer arrived.
        let asked_at = now_ms();
        let outcome = match provider.renew(&refresh_token).await {
            Renewal::Confirmed { refresh_token } => {
                let at = asked_at;
                RenewalOutcome::Confirmed {
                    at,
                    until: at.saturating_add_ms(every.as_millis() as u64),
                    sealed_refresh_token: at_rest.seal(
                        &person.issuer,
                        &person.subject,
                        &refresh_token,
                    ),
                }
            }
            Renewal::Refused(why) => {
                tracing::info!(owner = %person.owner_id, reason = %why, "the provider no longer vouches for this person: their tokens are revoked");
                RenewalOutcome::Refused { at: now_ms() }
            }
            Renewal::Unavailable(why) => {
                tracing::warn!(owner = %person.owner_id, reason = %why, "the provider did not answer a renewal; trying again after the lease");
                continue;
            }
        };
        store.record_renewal(person.owner_id, &outcome).await?;
    }
    Ok(due.len())
}
