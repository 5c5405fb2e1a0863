//! The live session's tool list, kept current: when a grant or a registered tool changes what
//! the session offers, the executor seals the next catalog update and the tab publishes it to
//! the relay (`PUT /v1/sessions/{id}/catalog`), so the paired plugin lists the change without
//! a new session and calls in flight go on. An update the relay did not take for a passing
//! reason is published again before the claim loop's next claim.

use wasm_bindgen_futures::spawn_local;

use crate::relay::RelayError;
use crate::tab::{TabCore, emit, now_ms};

impl TabCore {
    /// What the live session offers may have changed: publish an update if it did.
    pub(crate) fn catalog_may_have_changed(&self) {
        let core = self.clone_handle();
        spawn_local(async move { core.publish_catalog().await });
    }

    /// Seals an update when the session's catalog changed, then publishes the newest one not
    /// yet taken by the relay.
    pub(crate) async fn publish_catalog(&self) {
        let Some((session_id, _)) = self.inner.session.get() else {
            return;
        };
        match self
            .inner
            .executor
            .catalog_update(now_ms(), &mut rand::rng())
        {
            Ok(Some(update)) => *self.inner.catalog_unpublished.borrow_mut() = Some(update),
            Ok(None) => {}
            Err(error) => self.warn(&format!("the tool list could not be sealed: {error}")),
        }
        let Some(update) = self.inner.catalog_unpublished.borrow().clone() else {
            return;
        };
        let relay = self.inner.relay.borrow().clone();
        match relay.put_catalog(session_id, update.clone()).await {
            // Taken; or the relay holds a newer one, or the session is gone: nothing to redo.
            Ok(())
            | Err(RelayError::Status {
                status: 400 | 404 | 409 | 410 | 413,
                ..
            }) => {
                let mut unpublished = self.inner.catalog_unpublished.borrow_mut();
                if unpublished.as_ref() == Some(&update) {
                    *unpublished = None;
                }
            }
            Err(error) => self.warn(&format!(
                "publishing the tool list: {} (it is sent again shortly)",
                error.describe()
            )),
        }
    }

    /// Whether an update waits to be published again.
    pub(crate) fn catalog_unpublished(&self) -> bool {
        self.inner.catalog_unpublished.borrow().is_some()
    }

    fn warn(&self, message: &str) {
        emit(
            &self.inner.listener,
            &serde_json::json!({"type": "warning", "message": message}),
        );
    }
}
