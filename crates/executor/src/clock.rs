//! Time as a parameter. The executor never reads a clock; the host passes one in, and the
//! executor asks it again after an async tool returns, because time passes while a tool runs.

use std::cell::Cell;

use sealpost_time::UnixMillis;

/// Tells the current time.
pub trait Clock {
    /// The current time, asked afresh at each decision.
    fn now_ms(&self) -> UnixMillis;

    /// Called as a call passes each [`Stage`], for hosts that time the stages (the browser's
    /// benchmark build marks them on the performance timeline); nothing by default.
    fn mark(&self, _stage: Stage) {}
}

/// The stages of [`crate::Executor::handle`], in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The envelope opened and passed the replay and expiry checks.
    Opened,
    /// The tool is known, its arguments match its schema and it is granted.
    Granted,
    /// The tool ran (or the call was refused before it could).
    Ran,
    /// The reply is sealed.
    Sealed,
}

impl Stage {
    /// A short name for the stage.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Opened => "opened",
            Self::Granted => "granted",
            Self::Ran => "ran",
            Self::Sealed => "sealed",
        }
    }
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
