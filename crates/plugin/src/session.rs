//! The live session as the plugin trusts it: the relay's answer checked against the pairing.
//!
//! The relay returns the hello byte for byte; the plugin checks its tag, pairing and expiry
//! (seal's `verify_hello`, by the relay's clock), that it has not expired by the plugin's own
//! clock either (a relay's `now_ms` is not trusted to make an old hello live again), that the
//! `session_id` the relay names in JSON is the one inside the hello, and only then derives keys. Keys are kept per session id, so calls in one
//! session share one ephemeral key and the executor's key cache stays small.

use std::sync::{Arc, Mutex};

use sealpost_protocol::api::LiveSessionResponse;
use sealpost_protocol::content::{Catalog, CatalogEntry};
use sealpost_protocol::ids::Id16;
use sealpost_protocol::limits::CLOCK_SKEW_MS;
use sealpost_seal::{PairingSecret, PluginSession, SealError, verify_hello};
use sealpost_time::UnixMillis;

/// A session the plugin may seal calls to.
#[derive(Debug, Clone)]
pub struct TrustedSession {
    /// The session's id (from the verified hello).
    pub session_id: Id16,
    /// When the session ends (from the verified hello).
    pub expires_at_ms: UnixMillis,
    /// The relay's clock when it answered.
    pub relay_now_ms: UnixMillis,
    /// When the tab last polled, per the relay (advisory).
    pub claimer_seen_at_ms: Option<UnixMillis>,
    /// The tools the hello's sealed catalog offers.
    pub tools: Vec<CatalogEntry>,
    /// Keys for this session.
    pub keys: Arc<PluginSession>,
}

/// Why a session the relay returned cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// The hello did not verify under this pairing (wrong tag, pairing, layout or expired).
    #[error("the session's hello does not verify ({0})")]
    Hello(&'static str),
    /// The hello ended more than the clock skew ago by this computer's clock, whatever time
    /// the relay says it is.
    #[error("the session's hello expired by this computer's clock")]
    ExpiredLocally,
    /// The relay named one session in JSON and returned another's hello.
    #[error("the relay named a session that its hello does not carry")]
    SessionMismatch,
    /// The hello's catalog is not a catalog.
    #[error("the session's catalog is malformed")]
    Catalog,
}

/// Keys per session id, so each session draws one ephemeral key per process.
#[derive(Debug, Default)]
pub struct SessionKeysCache(Mutex<Option<(Id16, Arc<PluginSession>)>>);

impl SessionKeysCache {
    /// Checks `live` against the pairing and returns the session to seal to. `local_now` is
    /// this computer's clock.
    pub fn trust(
        &self,
        secret: &PairingSecret,
        live: &LiveSessionResponse,
        local_now: UnixMillis,
    ) -> Result<TrustedSession, SessionError> {
        let relay_now_ms = live.now_ms;
        let hello = verify_hello(secret, &live.hello.0, relay_now_ms)
            .map_err(|e: SealError| SessionError::Hello(e.code()))?;
        if hello.expires_at_ms().saturating_add_ms(CLOCK_SKEW_MS) < local_now {
            return Err(SessionError::ExpiredLocally);
        }
        let session_id = Id16(*hello.session_id());
        if session_id != live.session_id {
            return Err(SessionError::SessionMismatch);
        }
        let catalog: Catalog =
            serde_json::from_slice(hello.catalog()).map_err(|_| SessionError::Catalog)?;
        let mut cached = self.0.lock().expect("not poisoned");
        let keys = match cached.as_ref() {
            Some((id, keys)) if *id == session_id => keys.clone(),
            _ => {
                let keys = Arc::new(
                    PluginSession::start(secret, &hello, &mut rand::rng())
                        .map_err(|e| SessionError::Hello(e.code()))?,
                );
                *cached = Some((session_id, keys.clone()));
                keys
            }
        };
        Ok(TrustedSession {
            session_id,
            expires_at_ms: hello.expires_at_ms(),
            relay_now_ms,
            claimer_seen_at_ms: live.claimer_seen_at,
            tools: catalog.tools,
            keys,
        })
    }
}
