//! The tab's clock, and the performance marks `cargo xtask bench web` reads to say where a
//! call's time goes in the tab. Marks are made in benchmark builds only (feature `bench`): the
//! timeline keeps every mark until it is cleared, which a tab that serves for days must not do.

use sealpost_executor::{Clock, Stage};
use sealpost_time::UnixMillis;

use crate::tab::now_ms;

#[cfg(feature = "bench")]
#[wasm_bindgen::prelude::wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = performance, js_name = mark)]
    fn performance_mark(name: &str);
}

/// Marks `sealpost:{name}` on this Worker's performance timeline (benchmark builds only).
pub(crate) fn mark(name: &str) {
    #[cfg(feature = "bench")]
    performance_mark(&format!("sealpost:{name}"));
    #[cfg(not(feature = "bench"))]
    let _ = name;
}

/// `Date.now()`, and a mark at each stage of the executor's handling of a call.
pub(crate) struct TabClock;

impl Clock for TabClock {
    fn now_ms(&self) -> UnixMillis {
        now_ms()
    }

    fn mark(&self, stage: Stage) {
        mark(stage.as_str());
    }
}
