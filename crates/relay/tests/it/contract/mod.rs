//! The store contract: every property here holds on SQLite and on PostgreSQL alike.
//! Each `check_*` function (in `calls`, `handoff`, `sessions`, `sweeper`, `accounts`, `apps`,
//! `lineage`, `bearer` and `together`) states one property; the macro at the bottom runs it on both
//! backends.

use std::sync::Arc;

use sealpost_protocol::api::TokenKind;
use sealpost_protocol::ids::{CallId, OwnerId, PairId, SessionId};
use sealpost_relay::scope::AppScope;
use sealpost_relay::store::{Bearer, Inspect, NewCall, NewSession, NewSigninCode, Store, TokenRow};
use sealpost_time::UnixMillis;

use sealpost_testkit::id;

mod accounts;
mod apps;
mod bearer;
mod calls;
mod handoff;
mod lineage;
mod sessions;
mod sweeper;
mod together;

use accounts::*;
use apps::*;
use bearer::*;
use calls::*;
use handoff::*;
use lineage::*;
use sessions::*;
use sweeper::*;
use together::*;

const T0: UnixMillis = UnixMillis::from_ms(1_700_000_000_000);
const HOUR: u64 = 3_600_000;
/// The relay's own app, whose every row is unless a check says otherwise.
const RELAY_APP: &AppScope = &AppScope::RelayApp;

struct World {
    store: Arc<dyn Inspect>,
    owner: OwnerId,
    session: SessionId,
    pair: PairId,
    /// The owner's MCP token for `pair` (the plugin's).
    mcp: Bearer,
    /// The owner's own token (the tab's).
    tab: Bearer,
}

async fn world(store: Arc<dyn Inspect>) -> World {
    let owner = id();
    store
        .create_owner(owner, &format!("owner-{owner}"), T0)
        .await
        .unwrap();
    let (session, pair) = (id(), id());
    store
        .create_session(
            &new_session(owner, session, pair, T0.saturating_add_ms(HOUR)),
            10,
        )
        .await
        .unwrap();
    let mcp = token(&*store, owner, Some(pair)).await;
    let tab = token(&*store, owner, None).await;
    World {
        store,
        owner,
        session,
        pair,
        mcp,
        tab,
    }
}

/// A live token row of `owner` (an MCP token when `pair` is given), lasting far past `T0`.
async fn token(store: &dyn Store, owner: OwnerId, pair: Option<PairId>) -> Bearer {
    app_token(store, owner, pair, RELAY_APP).await
}

/// [`token`], of `app`.
async fn app_token(
    store: &dyn Store,
    owner: OwnerId,
    pair: Option<PairId>,
    app: &AppScope,
) -> Bearer {
    let kind = if pair.is_some() {
        TokenKind::Mcp
    } else {
        TokenKind::Owner
    };
    let row = TokenRow {
        id: id(),
        owner_id: owner,
        kind,
        pair_id: pair,
        label: "contract".into(),
        created_at: T0,
        expires_at: T0.saturating_add_ms(1_000 * HOUR),
        app: app.clone(),
        lifetime_ends_at: None,
        parent_id: None,
    };
    store.create_token(&row).await.unwrap();
    Bearer {
        token_id: row.id,
        owner_id: owner,
        kind,
        pair_id: pair,
    }
}

/// A sign-in code (hash `[n; 32]`) to the relay's own app, as the CLI makes one.
fn signin_code(n: u8, owner: OwnerId, expires_at: UnixMillis) -> NewSigninCode {
    NewSigninCode {
        id: id(),
        code_hash: [n; 32],
        owner_id: owner,
        app: RELAY_APP.clone(),
        expires_at,
        lifetime_ends_at: None,
        pkce_challenge: None,
        minted_by: None,
        created_at: T0,
    }
}

fn new_session(
    owner: OwnerId,
    session: SessionId,
    pair: PairId,
    expires_at: UnixMillis,
) -> NewSession {
    NewSession {
        owner_id: owner,
        app: RELAY_APP.clone(),
        session_id: session,
        pair_id: pair,
        hello: b"hello".to_vec(),
        created_at: T0,
        expires_at,
        started_by: None,
    }
}

impl World {
    fn call(&self, call_id: CallId, at: UnixMillis, ttl: u64) -> NewCall {
        NewCall {
            owner_id: self.owner,
            session_id: self.session,
            call_id,
            envelope: call_id.as_bytes().to_vec(),
            created_at: at,
            expires_at: at.saturating_add_ms(ttl),
        }
    }

    async fn post(&self, at: UnixMillis, ttl: u64) -> CallId {
        let call_id = id();
        self.store
            .post_call(self.mcp, &self.call(call_id, at, ttl), Some(1000))
            .await
            .unwrap();
        call_id
    }
}

macro_rules! contract {
    ($($check:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $check() {
                    let db = sealpost_testkit::TestDb::sqlite();
                    super::$check(db.open().await).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $check() {
                    let Some(db) = sealpost_testkit::TestDb::postgres().await else { return };
                    super::$check(db.open().await).await;
                }
            )*
        }
    };
}

contract!(
    check_concurrent_claimers_take_every_call_exactly_once,
    check_a_claim_takes_at_most_max_calls_oldest_first,
    check_a_lapsed_lease_expires_the_call_and_it_is_never_offered_again,
    check_a_lease_never_runs_past_the_call_expiry,
    check_answer_then_read_marks_delivered_and_reads_repeat,
    check_cancel_applies_to_open_calls_only,
    check_duplicate_ids_are_refused_per_owner,
    check_expired_calls_are_not_claimable_and_read_as_expired,
    check_a_negative_stored_expiry_reads_as_the_epoch_so_expired,
    check_sweeper_drops_bytes_then_rows,
    check_the_sweeper_ends_expired_sessions_and_names_them,
    check_every_sweep_expires_the_claims_whose_lease_lapsed_since,
    check_a_lease_a_lagging_clock_wrote_expires_within_the_full_sweep_period,
    check_ending_a_session_cancels_only_open_calls,
    check_the_plugin_lookup_is_recorded_once_a_second_on_live_sessions,
    check_a_catalog_update_is_kept_only_when_newer_and_goes_with_its_session,
    check_posts_racing_a_session_end_leave_no_call_pending,
    check_replies_racing_a_session_end_each_get_an_answer,
    check_another_owner_sees_nothing,
    check_limits_on_pending_calls_and_live_sessions,
    check_signin_codes_work_once_and_tokens_are_revocable,
    check_mcp_tokens_list_in_pages_by_id_live_ones_only,
    check_a_revoked_token_changes_nothing,
    check_an_expired_token_changes_nothing,
    check_a_token_that_does_not_match_its_row_changes_nothing,
    check_operations_arriving_together_each_get_their_own_answer,
    check_claims_and_reads_arriving_together_each_get_their_own_answer,
    check_posts_arriving_together_keep_the_cap_on_pending_calls,
    check_a_sign_in_code_carries_its_app_and_end_to_its_sign_in,
    check_an_app_acts_on_its_own_sessions_and_calls_alone,
    check_another_apps_operations_arriving_together_find_nothing,
    check_tokens_are_reached_by_their_own_app_and_the_relays_own,
    check_a_post_then_claim_hands_the_new_call_to_the_claimer_once,
    check_a_post_then_claim_with_a_dead_claimer_posts_and_claims_nothing,
    check_a_post_then_claim_that_is_refused_leaves_nothing_claimed,
    check_a_post_then_claim_takes_at_most_max_calls_oldest_first,
    check_a_reply_then_read_hands_the_answer_to_the_reader,
    check_a_reply_then_read_for_a_dead_reader_reads_nothing,
    check_a_reply_then_read_for_another_pairing_or_app_finds_no_call,
    check_a_refused_reply_then_read_tells_the_reader_where_the_call_is,
    check_signing_out_ends_the_lineage_its_links_and_its_sessions,
    check_a_signed_out_sign_in_makes_no_sign_in_link_or_session,
);
