//! Time as a parameter. The executor never reads a clock; the host passes one in, and the
//! executor asks it again after an async tool returns, because time passes while a tool runs.

use std::cell::Cell;

/// Tells the current Unix time in milliseconds.
pub trait Clock {
    /// Milliseconds since the Unix epoch, asked afresh at each decision.
    fn now_ms(&self) -> u64;
}

/// A fixed instant: for calls whose tools answer at once, and for tests.
impl Clock for u64 {
    fn now_ms(&self) -> u64 {
        *self
    }
}

/// A time the host moves forward by hand (tests, benchmarks, simulations).
impl Clock for Cell<u64> {
    fn now_ms(&self) -> u64 {
        self.get()
    }
}

/// Any closure, such as one that reads `Date.now()` in the browser.
impl<F: Fn() -> u64> Clock for F {
    fn now_ms(&self) -> u64 {
        self()
    }
}
