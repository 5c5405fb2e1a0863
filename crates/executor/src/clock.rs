//! Time as a parameter. The executor never reads a clock; the host passes one in, and the
//! executor asks it again after an async tool returns, because time passes while a tool runs.

use std::cell::Cell;

use sealpost_time::UnixMillis;

/// Tells the current time.
pub trait Clock {
    /// The current time, asked afresh at each decision.
    fn now_ms(&self) -> UnixMillis;
}

/// A fixed instant: for calls whose tools answer at once, and for tests.
impl Clock for UnixMillis {
    fn now_ms(&self) -> UnixMillis {
        *self
    }
}

/// A time the host moves forward by hand (tests, benchmarks, simulations).
impl Clock for Cell<UnixMillis> {
    fn now_ms(&self) -> UnixMillis {
        self.get()
    }
}

/// Any closure, such as one that reads `Date.now()` in the browser.
impl<F: Fn() -> UnixMillis> Clock for F {
    fn now_ms(&self) -> UnixMillis {
        self()
    }
}
