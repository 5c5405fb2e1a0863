//! The relay's one clock read. Everything below the HTTP layer takes `now` as a parameter so
//! tests can drive time.

use std::time::{SystemTime, UNIX_EPOCH};

use sealpost_time::UnixMillis;

/// The current time (the epoch if the system clock reads earlier than it).
pub fn now_ms() -> UnixMillis {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    UnixMillis::from_ms(ms)
}
