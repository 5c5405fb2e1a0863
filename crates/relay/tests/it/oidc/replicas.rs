//! Team sign-in across two relay replicas on one PostgreSQL: the provider's redirect back is
//! answered by the replica that did not start the flow, and both replicas' background renewals
//! share each person's refresh token without spending it twice.

use std::time::Duration;

use reqwest::StatusCode;
use sealpost_testkit::TestDb;

use super::{Browser, TestProvider, exchange, free_addr, me, pkce, relay_for, start_url};

#[tokio::test]
async fn the_callback_is_answered_by_the_other_replica_and_renewals_are_not_doubled() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let (a, b) = (free_addr(), free_addr());
    // The address people open (a load balancer's) is replica A's; the test sends the
    // provider's redirect back to replica B instead.
    let public_url = format!("http://{a}");
    let provider = TestProvider::start(&[format!("{public_url}/auth/oidc/callback")]);
    let mut args = provider.args();
    args.oidc_recheck_hours = Some(0.001);
    let oidc = args.into_config().unwrap().unwrap();
    let url = db.url.clone();
    let first_oidc = oidc.clone();
    let replica_a = relay_for(&provider, db, a, &public_url, |c| c.oidc = Some(first_oidc)).await;
    let replica_b = relay_for(&provider, TestDb::at(url), b, &public_url, |c| {
        c.oidc = Some(oidc);
    })
    .await;
    let (a_text, b_text) = (a.to_string(), b.to_string());
    let to_b = move |url: &str| -> String {
        if url.contains("/auth/oidc/callback") {
            url.replace(&a_text, &b_text)
        } else {
            url.to_owned()
        }
    };
    let (verifier, challenge) = pkce();
    let landed = Browser::new()
        .sign_in(&start_url(&replica_a, &challenge), "alice", &to_b)
        .await;
    // The code works on either replica, once.
    let signed = exchange(&replica_a, landed.code(), Some(&verifier))
        .await
        .unwrap();
    assert!(
        exchange(&replica_b, landed.code(), Some(&verifier))
            .await
            .is_err()
    );

    // Both replicas renew in the background, each every 450 ms, and each refresh now takes
    // 800 ms: without the lease both would spend the same refresh token, the provider (which
    // rotates them) would refuse the second, and the sign-in would end.
    provider.slow_down(800).await;
    tokio::time::sleep(Duration::from_millis(3_600 * 3)).await;
    for replica in [&replica_a, &replica_b] {
        assert_eq!(me(replica, &signed.token).await.0, StatusCode::OK);
    }
}
