//! What the person allows right now: whether AI access is on, which sources a session may
//! touch, which tools it may use. The executor reads the grants on every call (and again after an
//! async tool returns), so a change applies to the very next decision.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use serde::{Deserialize, Serialize};

/// Whether calls may run at all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// AI access is switched off (the default, and what a missing or unreadable setting means).
    #[default]
    Off,
    /// Calls may run, within the granted sources and tools.
    On,
    /// The app is locked or signed out: nothing runs until the person unlocks it.
    Locked,
}

/// The person's choices. Every field defaults to the safe value, so a stored setting written
/// before a field existed reads as "not allowed".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Grants {
    /// Off until the person turns AI access on.
    pub access: Access,
    /// Sources a session may read and propose changes to.
    pub sources: BTreeSet<String>,
    /// Tools a session may call, by name.
    pub tools: BTreeSet<String>,
    /// For each granted host tool, the digest of the tool as it was when granted
    /// (`ToolSpec::digest`): a tool registered again with other text, schema or hints is no
    /// longer granted. The executor fills these in when grants are set.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub pins: BTreeMap<String, String>,
}

impl Grants {
    /// Reads grants stored as JSON. Unreadable state reads as nothing granted: losing a setting
    /// costs re-choosing it, while guessing would enable something nobody agreed to.
    pub fn from_stored_json(bytes: &[u8]) -> Self {
        serde_json::from_slice(bytes).unwrap_or_default()
    }

    /// Whether calls may run now.
    pub fn is_on(&self) -> bool {
        self.access == Access::On
    }

    /// Whether a session may read and propose changes to `source` now.
    pub fn allows_source(&self, source: &str) -> bool {
        self.is_on() && self.sources.contains(source)
    }
}

/// A shared, live view of the grants. The host keeps a clone and changes grants through it
/// while calls are in flight; the executor reads the current value at each decision.
#[derive(Debug, Clone, Default)]
pub struct GrantsHandle(Rc<RefCell<Grants>>);

impl GrantsHandle {
    /// A handle starting at `grants`; clone it to share it.
    pub fn new(grants: Grants) -> Self {
        Self(Rc::new(RefCell::new(grants)))
    }

    /// Replaces the grants.
    pub fn set(&self, grants: Grants) {
        *self.0.borrow_mut() = grants;
    }

    /// Changes the grants in place.
    pub fn update(&self, change: impl FnOnce(&mut Grants)) {
        change(&mut self.0.borrow_mut());
    }

    /// Reads the current grants without copying them.
    pub fn read<T>(&self, read: impl FnOnce(&Grants) -> T) -> T {
        read(&self.0.borrow())
    }

    /// A copy of the current grants, for storing or showing.
    pub fn snapshot(&self) -> Grants {
        self.0.borrow().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setting_stored_before_a_field_existed_reads_as_off() {
        let grants = Grants::from_stored_json(br#"{"sources":["notes"]}"#);
        assert_eq!(grants.access, Access::Off);
        assert!(!grants.allows_source("notes"));
    }

    #[test]
    fn unreadable_settings_grant_nothing() {
        assert_eq!(Grants::from_stored_json(b"{not json"), Grants::default());
        assert_eq!(
            Grants::from_stored_json(br#"{"access":"sideways"}"#),
            Grants::default()
        );
    }

    #[test]
    fn locked_grants_allow_nothing() {
        let mut grants = Grants {
            access: Access::On,
            sources: ["notes".to_owned()].into(),
            tools: ["list_sources".to_owned()].into(),
            ..Grants::default()
        };
        assert!(grants.allows_source("notes") && grants.is_on());
        grants.access = Access::Locked;
        assert!(!grants.allows_source("notes") && !grants.is_on());
    }
}
