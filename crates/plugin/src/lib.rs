//! `sealpost`, the local plugin: an MCP stdio server that seals every tool call to the browser
//! tab it is paired with, through the team's relay, and opens and fences the reply.
//!
//! - [`config`]: the pairing file and the cached catalog (0600, validated on every load).
//! - `relay`: the relay's API with the MCP token; bodies read under a running cap.
//! - `session`: the live session, trusted only after its hello verifies.
//! - `call`: one tool call from seal to fenced answer.
//! - `fence`: third-party text made safe to show a model.
//! - `tools`: what `tools/list` shows.
//! - [`server`] and [`stdio`]: MCP over stdio (rmcp), with a line cap; `stdio_streams`: stdin
//!   and stdout on the runtime's poller when they are pipes or sockets.
//! - [`commands`]: `pair`, `unpair`, `status`.
//! - `messages`: every failure as a sentence a person can act on.

#![warn(missing_docs)]

pub(crate) mod call;
pub mod commands;
pub mod config;
pub(crate) mod fence;
pub(crate) mod follow;
pub(crate) mod messages;
pub(crate) mod relay;
pub mod server;
pub(crate) mod session;
pub mod stdio;
pub(crate) mod stdio_streams;
pub(crate) mod tools;

use std::time::Duration;

use sealpost_protocol::content::CatalogEntry;
use sealpost_protocol::ids::PairId;
use sealpost_seal::PairingCode;

use crate::config::{CachedCatalog, ConfigDir, ConfigError};
use crate::session::{SessionError, SessionKeysCache, TrustedSession};

/// How the plugin waits. Defaults suit every client checked (docs/PLUGIN.md, "A call").
#[derive(Debug, Clone)]
pub struct Options {
    /// The whole wait for one call; below the 60 s that Codex and Claude Desktop allow.
    pub call_timeout: Duration,
    /// A tab that has not polled for this long is reported as not open, at once.
    pub tab_absent_after: Duration,
    /// How often a waiting call sends a progress notification (and re-checks the tab).
    pub progress_every: Duration,
    /// Bound on a result's fenced text, in characters.
    pub max_result_chars: usize,
}

/// Default [`Options::call_timeout`].
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(55);
/// Default [`Options::tab_absent_after`].
pub const DEFAULT_TAB_ABSENT_AFTER: Duration = Duration::from_secs(15);
/// Default [`Options::progress_every`].
pub const DEFAULT_PROGRESS_EVERY: Duration = Duration::from_secs(5);

impl Default for Options {
    fn default() -> Self {
        Self {
            call_timeout: DEFAULT_CALL_TIMEOUT,
            tab_absent_after: DEFAULT_TAB_ABSENT_AFTER,
            progress_every: DEFAULT_PROGRESS_EVERY,
            max_result_chars: fence::DEFAULT_MAX_RESULT_CHARS,
        }
    }
}

/// The plugin's state for one process: where its files are, one HTTP client, session keys.
#[derive(Debug)]
pub struct Plugin {
    config: ConfigDir,
    http: relay::Connections,
    options: Options,
    keys: SessionKeysCache,
    /// Bumped whenever the cached catalog changes, so the MCP layer can send `list_changed`.
    catalog_changed: tokio::sync::watch::Sender<u64>,
    /// The session this process last trusted: what its watch of the pairing names as known.
    followed: tokio::sync::watch::Sender<Option<follow::Followed>>,
    /// The catalog this process last settled (for a pairing of this process alone, the one
    /// it lists).
    known_catalog: std::sync::Mutex<Option<CachedCatalog>>,
    /// A pairing this process alone uses instead of the stored one (`SEALPOST_PAIRING_CODE`
    /// naming another pairing): never stored, and its catalog is kept in memory only, so other
    /// clients sharing the folder go on with the stored pairing.
    process_pairing: Option<ProcessPairing>,
}

/// A pairing from the environment that differs from the stored one, and what was stored.
#[derive(Debug)]
pub struct ProcessPairing {
    code: PairingCode,
    /// The sentence that tells the person about it (stderr at start, `sealpost_status`).
    pub notice: String,
}

impl Plugin {
    /// A plugin keeping its files in `config`.
    pub fn new(config: ConfigDir, options: Options) -> Self {
        Self {
            config,
            http: relay::http_client(),
            options,
            keys: SessionKeysCache::default(),
            catalog_changed: tokio::sync::watch::Sender::new(0),
            followed: tokio::sync::watch::Sender::new(None),
            known_catalog: std::sync::Mutex::new(None),
            process_pairing: None,
        }
    }

    /// Makes this process use `code` instead of the stored pairing, saying `notice`.
    pub fn use_for_this_process(&mut self, code: PairingCode, notice: String) {
        self.process_pairing = Some(ProcessPairing { code, notice });
    }

    /// The pairing this process uses: its own from the environment, else the stored one.
    pub(crate) fn pairing(&self) -> Result<PairingCode, ConfigError> {
        match &self.process_pairing {
            Some(own) => Ok(own.code.clone()),
            None => self.config.load_pairing(),
        }
    }

    /// Why this process does not use the stored pairing, when it does not.
    pub fn process_pairing_notice(&self) -> Option<&str> {
        self.process_pairing.as_ref().map(|p| p.notice.as_str())
    }

    /// The catalog to list for `pair_id`: the cached file's, or, for a pairing of this process
    /// alone, the one it keeps in memory.
    pub(crate) fn listed_catalog(&self, pair_id: PairId) -> Vec<CatalogEntry> {
        let catalog = if self.process_pairing.is_some() {
            self.known_catalog.lock().expect("not poisoned").clone()
        } else {
            self.config.load_catalog(pair_id)
        };
        catalog
            .filter(|c| c.pair_id == pair_id)
            .map(|c| c.tools)
            .unwrap_or_default()
    }

    /// The config folder.
    pub fn config(&self) -> &ConfigDir {
        &self.config
    }

    /// Notified when the cached catalog changes.
    pub fn catalog_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.catalog_changed.subscribe()
    }

    /// Settles the catalog of a session just trusted with the one the pairing keeps
    /// (`session::settle`): a newer list is cached, an older one than any process of the
    /// pairing opened for the session is replaced by the newest (or refused when that is not at
    /// hand). A pairing of this process alone keeps its catalog in memory only. Sends
    /// `list_changed` when the list this process knows changes.
    fn remember_catalog(
        &self,
        pair_id: PairId,
        session: &mut TrustedSession,
    ) -> Result<(), SessionError> {
        let mut known = self.known_catalog.lock().expect("not poisoned");
        if self.process_pairing.is_none() {
            if known.is_none() {
                // What `tools/list` listed so far: no `list_changed` when it stays the same.
                *known = self.config.load_catalog(pair_id);
            }
            let now = call::local_now_ms();
            let settled = self.config.update_catalog(pair_id, |cached| {
                let settled = session::settle(cached, pair_id, session, now);
                (settled.write, settled.tools)
            });
            match settled {
                Ok(Ok((seq, tools))) if seq > session.catalog_seq => {
                    tracing::warn!(
                        seq = session.catalog_seq,
                        kept = seq,
                        "the relay handed back an older catalog than this pairing has opened: the newer list is kept"
                    );
                    self.keys.raise(session.session_id, seq, &tools);
                    session.catalog_seq = seq;
                    session.tools = tools;
                }
                Ok(Ok(_)) => {}
                Ok(Err(error)) => return Err(error),
                Err(error) => tracing::warn!(%error, "could not cache the catalog"),
            }
        }
        if known
            .as_ref()
            .is_some_and(|c| c.pair_id == pair_id && c.tools == session.tools)
        {
            return Ok(());
        }
        *known = Some(CachedCatalog::new(pair_id, session.tools.clone()));
        self.catalog_changed
            .send_modify(|generation| *generation += 1);
        Ok(())
    }
}
