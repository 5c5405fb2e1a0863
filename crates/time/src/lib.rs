//! Sealpost's one time type: [`UnixMillis`], a point in time as milliseconds since the Unix
//! epoch, shared by every crate that speaks of times (the envelope and hello bytes, the relay's
//! API, the executor's decisions, the relay's rows).
//!
//! A leaf crate with no dependencies (serde only behind the `serde` feature), so `seal`, which
//! may depend on crypto crates alone, and `protocol`, which may depend on no other crate, can
//! both name the same type. It never reads a clock: time stays a parameter, and whoever owns a
//! clock turns its reading into a `UnixMillis` with [`UnixMillis::from_ms`].
//!
//! Durations stay plain `u64` milliseconds (`*_ms` names): the arithmetic here takes and gives
//! them, and saturates instead of wrapping or panicking, so no input can overflow a check.

#![no_std]
#![warn(missing_docs)]

use core::fmt;

/// A point in time: milliseconds since 1970-01-01T00:00:00Z, never negative.
///
/// On the wire it is the bare number (big-endian `u64` in binary records, a JSON integer in
/// the API, `#[serde(transparent)]`). Ordered as time is: earlier is less.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(transparent)
)]
pub struct UnixMillis(u64);

impl UnixMillis {
    /// The Unix epoch itself, the earliest time there is: anything due by then has expired.
    pub const EPOCH: Self = Self(0);

    /// The latest time there is; saturating arithmetic stops here.
    pub const MAX: Self = Self(u64::MAX);

    /// The time `ms` milliseconds after the epoch.
    pub const fn from_ms(ms: u64) -> Self {
        Self(ms)
    }

    /// Milliseconds since the epoch.
    pub const fn as_ms(self) -> u64 {
        self.0
    }

    /// The time `ms` milliseconds later, or [`UnixMillis::MAX`] if that is past it.
    #[must_use]
    pub const fn saturating_add_ms(self, ms: u64) -> Self {
        Self(self.0.saturating_add(ms))
    }

    /// The time `ms` milliseconds earlier, or the epoch if that is before it.
    #[must_use]
    pub const fn saturating_sub_ms(self, ms: u64) -> Self {
        Self(self.0.saturating_sub(ms))
    }

    /// How many milliseconds `earlier` lies before `self`; 0 if it is not earlier.
    #[must_use]
    pub const fn saturating_sub(self, earlier: Self) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    /// The eight big-endian bytes binary records carry.
    pub const fn to_be_bytes(self) -> [u8; 8] {
        self.0.to_be_bytes()
    }

    /// The time eight big-endian bytes name.
    pub const fn from_be_bytes(bytes: [u8; 8]) -> Self {
        Self(u64::from_be_bytes(bytes))
    }
}

/// The bare number of milliseconds, as the JSON API writes it.
impl fmt::Display for UnixMillis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use std::format;

    use super::UnixMillis;

    const T: UnixMillis = UnixMillis::from_ms(1_800_000_000_000);

    #[test]
    fn arithmetic_saturates_at_both_ends_instead_of_wrapping() {
        assert_eq!(T.saturating_add_ms(5).as_ms(), 1_800_000_000_005);
        assert_eq!(UnixMillis::MAX.saturating_add_ms(1), UnixMillis::MAX);
        assert_eq!(T.saturating_sub_ms(5).as_ms(), 1_799_999_999_995);
        assert_eq!(
            UnixMillis::from_ms(3).saturating_sub_ms(5),
            UnixMillis::EPOCH
        );
    }

    #[test]
    fn the_difference_of_two_times_is_a_duration_and_never_negative() {
        assert_eq!(T.saturating_add_ms(250).saturating_sub(T), 250);
        assert_eq!(T.saturating_sub(T.saturating_add_ms(250)), 0);
        assert_eq!(UnixMillis::MAX.saturating_sub(UnixMillis::EPOCH), u64::MAX);
    }

    #[test]
    fn times_order_as_time_does() {
        assert!(UnixMillis::EPOCH < T);
        assert!(T < T.saturating_add_ms(1));
        assert_eq!(T.max(UnixMillis::EPOCH), T);
        assert_eq!(UnixMillis::default(), UnixMillis::EPOCH);
    }

    #[test]
    fn binary_records_carry_eight_big_endian_bytes() {
        let bytes = T.to_be_bytes();
        assert_eq!(bytes, 1_800_000_000_000_u64.to_be_bytes());
        assert_eq!(UnixMillis::from_be_bytes(bytes), T);
    }

    #[test]
    fn display_and_debug_show_the_milliseconds() {
        assert_eq!(format!("{T}"), "1800000000000");
        assert_eq!(format!("{T:?}"), "UnixMillis(1800000000000)");
    }

    #[cfg(feature = "serde")]
    #[test]
    fn json_carries_the_bare_number() {
        assert_eq!(serde_json::to_string(&T).unwrap(), "1800000000000");
        let back: UnixMillis = serde_json::from_str("1800000000000").unwrap();
        assert_eq!(back, T);
        assert!(serde_json::from_str::<UnixMillis>("-1").is_err());
        assert!(serde_json::from_str::<UnixMillis>("\"1800000000000\"").is_err());
    }
}
