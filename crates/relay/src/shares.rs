//! One app's share of an owner's quotas (live sessions, MCP tokens, unused sign-in links).
//!
//! Every app of an owner draws on the same per-owner quotas. A host app may hold at most half
//! of each (and at least one), so no one app can take all of it, and the host apps together at
//! most all but a quarter (rounded down), which the relay's own app always keeps: the app where
//! the person sees and ends every app's sign-ins, plugin tokens and links. The relay's own app
//! is bound by the whole quota alone. A refusal names what each app holds, so the person knows
//! where to free a place.

use crate::scope::AppScope;

/// The most of a quota of `quota` that one host app may hold: half, and at least one.
pub fn app_share(quota: u32) -> i64 {
    i64::from((quota / 2).max(1))
}

/// The most of a quota of `quota` that the host apps together may hold: all but the quarter
/// (rounded down) the relay's own app keeps.
pub fn host_apps_share(quota: u32) -> i64 {
    i64::from(quota - quota / 4)
}

/// Whether `app` may hold one more of a quota of `quota` of which `held` is held per app.
pub fn has_room(quota: u32, held: &[(AppScope, i64)], app: &AppScope) -> bool {
    refused(quota, held, app).is_none()
}

/// Which bound `app` is at, if any.
fn refused(quota: u32, held: &[(AppScope, i64)], app: &AppScope) -> Option<Bound> {
    let total: i64 = held.iter().map(|(_, n)| n).sum();
    if total >= i64::from(quota) {
        return Some(Bound::Owner);
    }
    // The relay's own app is bound by the whole quota alone.
    app.origin()?;
    if held_by(held, app) >= app_share(quota) {
        return Some(Bound::App);
    }
    let hosts: i64 = held
        .iter()
        .filter(|(a, _)| a.origin().is_some())
        .map(|(_, n)| n)
        .sum();
    (hosts >= host_apps_share(quota)).then_some(Bound::HostApps)
}

/// The bound a refusal is for.
enum Bound {
    /// The owner's whole quota.
    Owner,
    /// The asking host app's share.
    App,
    /// The host apps' share together.
    HostApps,
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
    match refused(quota, held, app) {
        Some(Bound::Owner) | None => {
            format!("You already hold {quota} {what}, the most allowed ({holders}).")
        }
        Some(Bound::App) => format!(
            "{app} already holds {} {what}, the most one app may hold (half of your {quota}; \
             {holders}).",
            held_by(held, app)
        ),
        Some(Bound::HostApps) => format!(
            "Apps on other origins than the relay's already hold {} {what}, the most they may \
             together (the relay's own app keeps {} of your {quota}; {holders}).",
            host_apps_share(quota),
            i64::from(quota) - host_apps_share(quota)
        ),
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
        let hosts = [(a.clone(), 10), (b.clone(), 5)];
        assert!(
            !has_room(20, &hosts, &b),
            "host apps together keep a quarter free"
        );
        assert!(has_room(20, &hosts, &AppScope::RelayApp));
        assert_eq!(host_apps_share(1), 1, "a quota of one is not all reserved");
        assert_eq!(app_share(1), 1, "at least one");
        assert!(
            refusal("plugin tokens", 20, &held, &a).contains("10 for https://a.example"),
            "{}",
            refusal("plugin tokens", 20, &held, &a)
        );
    }
}
