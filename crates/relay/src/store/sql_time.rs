//! Times at the SQL boundary. Both backends store a time as a signed 64-bit integer of Unix
//! milliseconds (SQLite's INTEGER, PostgreSQL's BIGINT); everywhere else it is a
//! [`UnixMillis`]. Every bind and every read of a time column goes through these two.

use sealpost_time::UnixMillis;

/// The integer a time is stored as. A time past `i64::MAX` ms (some 292 million years) is
/// stored as `i64::MAX`: later than anything, so it never expires early.
pub(crate) fn time_to_sql(time: UnixMillis) -> i64 {
    i64::try_from(time.as_ms()).unwrap_or(i64::MAX)
}

/// The time a stored integer names. A negative value, which the relay never writes, reads as
/// the epoch: earlier than any `now`, so whatever it bounds has expired.
pub(crate) fn time_from_sql(stored: i64) -> UnixMillis {
    UnixMillis::from_ms(u64::try_from(stored).unwrap_or(0))
}

/// The integer a duration in milliseconds is bound as, for statements that add it to a time
/// (such as a claim's lease): at most `i64::MAX`.
pub(crate) fn duration_to_sql(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_through_their_stored_integer() {
        for ms in [0, 1, 1_800_000_000_000, i64::MAX as u64] {
            let time = UnixMillis::from_ms(ms);
            assert_eq!(time_from_sql(time_to_sql(time)), time);
        }
    }

    #[test]
    fn a_negative_stored_time_reads_as_the_epoch() {
        assert_eq!(time_from_sql(-1), UnixMillis::EPOCH);
        assert_eq!(time_from_sql(i64::MIN), UnixMillis::EPOCH);
    }

    #[test]
    fn a_time_past_the_stored_range_is_stored_as_the_latest() {
        assert_eq!(time_to_sql(UnixMillis::MAX), i64::MAX);
    }
}
