//! Why the claim loop stopped. The loop stops at once on each, and says which, so the page can
//! tell the person and the plugin's next call can say the same.

use serde::Serialize;

/// Why serving stopped.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr, strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum StopReason {
    /// The person locked the app: keys are dropped from memory.
    Locked,
    /// The person signed out (the owner token is revoked).
    SignedOut,
    /// The session was ended (by the person, by the tab closing, or by a new session).
    SessionEnded,
    /// The session's time ran out.
    Expired,
    /// The relay refused the owner token: revoked from another device, or expired.
    TokenRevoked,
    /// Another tab of this origin took over serving this pairing.
    TakenOver,
}

impl StopReason {
    /// The snake_case name, as JavaScript sees it.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// A stop the page asked for by name (`lock`, `sign_out`, `end`, `take_over`).
    pub fn requested(name: &str) -> Option<Self> {
        Some(match name {
            "locked" => Self::Locked,
            "signed_out" => Self::SignedOut,
            "session_ended" => Self::SessionEnded,
            "taken_over" => Self::TakenOver,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::StopReason::{self, *};
    use strum::VariantArray as _;

    #[test]
    fn each_reason_has_the_name_javascript_sees_in_events_and_promises() {
        for &reason in StopReason::VARIANTS {
            let serialized = serde_json::to_value(reason).unwrap();
            assert_eq!(serialized, reason.as_str(), "{reason:?}");
        }
    }

    #[test]
    fn the_page_may_ask_only_for_the_stops_a_person_causes() {
        for reason in [Locked, SignedOut, SessionEnded, TakenOver] {
            assert_eq!(StopReason::requested(reason.as_str()), Some(reason));
        }
        // Expiry and a refused token are the relay's to report, never the page's to claim.
        for name in ["expired", "token_revoked", "lock", ""] {
            assert_eq!(StopReason::requested(name), None, "{name}");
        }
    }
}
