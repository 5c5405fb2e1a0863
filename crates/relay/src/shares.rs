//! One app's share of an owner's quotas (live sessions, MCP tokens, unused sign-in links).
//!
//! Every app of an owner draws on the same per-owner quotas. A host app may hold at most half
//! of each (and at least one), so no one app can take all of it; the relay's own app is bound
//! by the whole quota alone, so it keeps room while fewer than two host apps are full, and it
//! is where the person sees and ends every app's sign-ins, plugin tokens and links. A refusal
//! names what each app holds, so the person knows where to free a place.

use crate::scope::AppScope;

/// The most of a quota of `quota` that one host app may hold: half, and at least one.
pub fn app_share(quota: u32) -> i64 {
    i64::from((quota / 2).max(1))
}

/// Whether `app` may hold one more of a quota of `quota` of which `held` is held per app.
pub fn has_room(quota: u32, held: &[(AppScope, i64)], app: &AppScope) -> bool {
    let total: i64 = held.iter().map(|(_, n)| n).sum();
    total < i64::from(quota) && (app.origin().is_none() || held_by(held, app) < app_share(quota))
}

fn held_by(held: &[(AppScope, i64)], app: &AppScope) -> i64 {
    held.iter().filter(|(a, _)| a == app).map(|(_, n)| n).sum()
}

/// Why `app` may not hold one more `what` (a plural noun): the owner's quota or the app's
/// share, and what each app holds ("3 for https://a.example, 1 for the relay's own app").
pub fn refusal(what: &str, quota: u32, held: &[(AppScope, i64)], app: &AppScope) -> String {
    let holders = held
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(a, n)| format!("{n} for {a}"))
        .collect::<Vec<_>>()
        .join(", ");
    let total: i64 = held.iter().map(|(_, n)| n).sum();
    if total >= i64::from(quota) {
        format!("You already hold {quota} {what}, the most allowed ({holders}).")
    } else {
        format!(
            "{app} already holds {} {what}, the most one app may hold (half of your {quota}; \
             {holders}).",
            held_by(held, app)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::origins::AppOrigin;

    fn app(origin: &str) -> AppScope {
        AppScope::HostApp(AppOrigin::parse(origin).unwrap())
    }

    #[test]
    fn a_host_app_holds_at_most_half_and_the_relays_own_app_the_rest() {
        let a = app("https://a.example");
        let b = app("https://b.example");
        let held = [(a.clone(), 10)];
        assert!(!has_room(20, &held, &a), "half is a host app's share");
        assert!(has_room(20, &held, &b), "another app still has room");
        assert!(has_room(20, &held, &AppScope::RelayApp));
        let full = [(a.clone(), 10), (AppScope::RelayApp, 10)];
        assert!(
            !has_room(20, &full, &AppScope::RelayApp),
            "the whole quota binds all"
        );
        assert_eq!(app_share(1), 1, "at least one");
        assert!(
            refusal("plugin tokens", 20, &held, &a).contains("10 for https://a.example"),
            "{}",
            refusal("plugin tokens", 20, &held, &a)
        );
    }
}
