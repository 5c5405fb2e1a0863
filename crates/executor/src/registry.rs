//! The tools a session offers: the built-ins plus the host app's own, each with a compiled JSON
//! Schema validator. The session's catalog is generated from here, so what the plugin lists and
//! what the executor dispatches cannot disagree.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use sealpost_protocol::content::{
    BadToolName, Catalog, CatalogEntry, ToolKind, ToolResult, validate_tool_name,
};
use sealpost_protocol::limits::{
    MAX_TOOL_DESCRIPTION_CHARS, MAX_TOOL_TITLE_CHARS, MAX_TOOLS, RESERVED_TOOL_PREFIX,
};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::builtin::BuiltinTool;

/// What a host tool's handler resolves to. Not `Send`: in the browser it wraps a JS promise.
pub type ToolFuture = Pin<Box<dyn Future<Output = Result<ToolResult, ToolFailure>>>>;

/// A tool the host app registers; the browser implements it with a JavaScript callback.
///
/// The executor calls it only after the arguments passed the tool's schema and the grants
/// allow the tool, and re-checks the grants when the future resolves.
pub trait HostTool {
    /// Runs a read tool, or applies an approved proposal of a proposal tool.
    fn call(&self, arguments: Value) -> ToolFuture;
}

/// A host tool that could not do its work. Its message is sealed back to the plugin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ToolFailure {
    /// What went wrong, in words the model can act on.
    pub message: String,
    /// What the person answered when the tab asked them to confirm the call, when that is why
    /// it did not run rather than the tool failing: sealed back as that refusal, message as it is.
    pub person: Option<PersonsAnswer>,
}

/// Why a call that waited for the person's confirmation did not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PersonsAnswer {
    /// They declined it.
    Declined,
    /// They did not confirm it: it lapsed, or they could not be asked.
    NotConfirmed,
}

impl ToolFailure {
    /// A failure saying `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            person: None,
        }
    }

    /// The person declined the call.
    pub fn declined(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            person: Some(PersonsAnswer::Declined),
        }
    }

    /// The person did not confirm the call: it lapsed, or they could not be asked.
    pub fn not_confirmed(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            person: Some(PersonsAnswer::NotConfirmed),
        }
    }
}

/// How a host describes a tool it registers.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// What calls use and the catalog lists; checked by `validate_tool_name`.
    pub name: String,
    /// What the model is told the tool does.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub input_schema: Value,
    /// Whether a call runs it or saves a proposal for review.
    pub kind: ToolKind,
    /// What the tool says of itself beyond the catalog (WebMCP's `readOnlyHint`, `title`):
    /// never believed to lower scrutiny, but part of what a grant is bound to.
    pub annotations: Option<Value>,
    /// Registered by script in the page through the WebMCP API, not by the host app's code:
    /// listed as coming from the page, and each call waits for the person's confirmation.
    pub from_page: bool,
}

impl ToolSpec {
    /// A host app's tool with no annotations.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        kind: ToolKind,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            input_schema,
            kind,
            annotations: None,
            from_page: false,
        }
    }

    /// The digest a grant of this tool is bound to: SHA-256 over its name, description, schema,
    /// kind and annotations, so a tool registered again under the same name with other text,
    /// another schema or other hints does not inherit the grant.
    pub fn digest(&self) -> String {
        let bound = serde_json::json!([
            "sealpost/v1 tool grant",
            self.name,
            self.description,
            self.input_schema,
            self.kind,
            self.annotations,
        ]);
        let digest = Sha256::digest(bound.to_string().as_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Why a tool could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// The name breaks the protocol's naming rule.
    #[error("tool name {name:?} is not acceptable: {reason}")]
    BadName {
        /// The name as the host gave it.
        name: String,
        /// Which naming rule it breaks.
        reason: BadToolName,
    },
    /// A built-in or an earlier host tool has that name as it reads (`look_alike_keys`).
    #[error(
        "a tool named {taken:?} is already registered, and {name:?} reads as the same name (names are compared as they look: ignoring case, '-', '.', '_' and look-alike characters such as 0 for o)"
    )]
    Duplicate {
        /// The name as the host gave it.
        name: String,
        /// The registered name it collides with.
        taken: String,
    },
    /// The name reads as one starting with the plugin's reserved prefix (`look_alike_keys`).
    #[error(
        "tool name {name:?} reads as one starting with '{RESERVED_TOOL_PREFIX}', which is reserved for the plugin (names are compared as they look: ignoring case, '-', '.', '_' and look-alike characters such as 1 for l)"
    )]
    LooksReserved {
        /// The name as the host gave it.
        name: String,
    },
    /// The catalog is full.
    #[error("a session may offer at most {MAX_TOOLS} tools")]
    TooMany,
    /// Arguments are always an object, so the schema must describe one.
    #[error("the input schema of {name:?} must describe an object (\"type\": \"object\")")]
    SchemaNotObject {
        /// The tool being registered.
        name: String,
    },
    /// A tool is a read or a proposal; a kind this build does not know is not guessed at.
    #[error("the kind of {name:?} must be \"read\" or \"proposal\"")]
    UnknownKind {
        /// The tool being registered.
        name: String,
    },
    /// The schema could not be compiled into a validator.
    #[error("the input schema of {name:?} is not valid JSON Schema: {reason}")]
    BadSchema {
        /// The tool being registered.
        name: String,
        /// What the schema compiler objected to.
        reason: String,
    },
}

pub(crate) enum Action {
    Builtin(BuiltinTool),
    Host(Rc<dyn HostTool>),
}

pub(crate) struct RegisteredTool {
    pub entry: CatalogEntry,
    pub validator: crate::schema::Schema,
    pub action: Action,
    /// What a grant of a host tool is bound to ([`ToolSpec::digest`]).
    pub digest: String,
    pub from_page: bool,
}

impl RegisteredTool {
    pub fn is_builtin(&self) -> bool {
        matches!(self.action, Action::Builtin(_))
    }
}

impl fmt::Debug for RegisteredTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegisteredTool")
            .field("name", &self.entry.name)
            .field("kind", &self.entry.kind)
            .finish_non_exhaustive()
    }
}

/// Built-ins first in their fixed order, then host tools in name order.
#[derive(Debug)]
pub struct Registry {
    tools: Vec<RegisteredTool>,
    by_name: HashMap<String, usize>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// A registry holding the built-in workspace tools.
    pub fn new() -> Self {
        let mut registry = Self {
            tools: Vec::new(),
            by_name: HashMap::new(),
        };
        for &tool in BuiltinTool::ALL {
            let spec = tool.spec();
            registry
                .insert(spec, true, Action::Builtin(tool))
                .expect("built-in tools are valid");
        }
        registry
    }

    /// Registers a host tool.
    pub fn register(
        &mut self,
        spec: ToolSpec,
        handler: Rc<dyn HostTool>,
    ) -> Result<(), RegistryError> {
        self.insert(spec, false, Action::Host(handler))?;
        // Keep host tools in name order after the built-ins, so the catalog is stable whatever
        // order the host registered them in.
        let builtins = BuiltinTool::ALL.len();
        self.tools[builtins..].sort_by(|a, b| a.entry.name.cmp(&b.entry.name));
        self.by_name = self
            .tools
            .iter()
            .enumerate()
            .map(|(index, tool)| (tool.entry.name.clone(), index))
            .collect();
        Ok(())
    }

    /// Removes a host tool. Built-ins cannot be removed (the grants switch them off instead).
    pub fn unregister(&mut self, name: &str) -> bool {
        let Some(&index) = self.by_name.get(name) else {
            return false;
        };
        if matches!(self.tools[index].action, Action::Builtin(_)) {
            return false;
        }
        self.tools.remove(index);
        self.by_name = self
            .tools
            .iter()
            .enumerate()
            .map(|(index, tool)| (tool.entry.name.clone(), index))
            .collect();
        true
    }

    pub(crate) fn get(&self, name: &str) -> Option<&RegisteredTool> {
        self.by_name.get(name).map(|&index| &self.tools[index])
    }

    /// The catalog of the tools `offer` accepts (normally: the tools the grants allow), in the
    /// registry's stable order.
    pub(crate) fn catalog(&self, offer: impl Fn(&RegisteredTool) -> bool) -> Catalog {
        Catalog {
            tools: self
                .tools
                .iter()
                .filter(|tool| offer(tool))
                .map(|tool| tool.entry.clone())
                .collect(),
        }
    }

    pub(crate) fn tools(&self) -> impl Iterator<Item = &RegisteredTool> {
        self.tools.iter()
    }

    fn insert(
        &mut self,
        spec: ToolSpec,
        builtin: bool,
        action: Action,
    ) -> Result<(), RegistryError> {
        validate_tool_name(&spec.name).map_err(|reason| RegistryError::BadName {
            name: spec.name.clone(),
            reason,
        })?;
        // Names that read alike would read as one tool to a person and to a model.
        let keys = look_alike_keys(&spec.name);
        let reserved = look_alike_keys(RESERVED_TOOL_PREFIX);
        if keys
            .iter()
            .any(|key| reserved.iter().any(|r| key.starts_with(r)))
        {
            return Err(RegistryError::LooksReserved { name: spec.name });
        }
        if let Some(taken) = self.tools.iter().find(|tool| {
            let taken = look_alike_keys(&tool.entry.name);
            keys.iter().any(|key| taken.contains(key))
        }) {
            return Err(RegistryError::Duplicate {
                taken: taken.entry.name.clone(),
                name: spec.name,
            });
        }
        if self.tools.len() == MAX_TOOLS {
            return Err(RegistryError::TooMany);
        }
        if spec.input_schema.get("type") != Some(&Value::from("object")) {
            return Err(RegistryError::SchemaNotObject { name: spec.name });
        }
        if !matches!(spec.kind, ToolKind::Read | ToolKind::Proposal) {
            return Err(RegistryError::UnknownKind { name: spec.name });
        }
        let validator = crate::schema::Schema::compile(&spec.input_schema).map_err(|error| {
            RegistryError::BadSchema {
                name: spec.name.clone(),
                reason: error.to_string(),
            }
        })?;
        let digest = spec.digest();
        let hint = |key: &str| spec.annotations.as_ref().and_then(|a| a.get(key));
        let output_schema = match &action {
            Action::Builtin(tool) => tool.output_schema(),
            _ => None,
        };
        let title = match &action {
            Action::Builtin(tool) => Some(tool.title().to_owned()),
            _ => hint("title")
                .and_then(Value::as_str)
                .map(|title| bounded_line(title, MAX_TOOL_TITLE_CHARS))
                .filter(|title| !title.is_empty()),
        };
        // Believed because it raises scrutiny; `readOnlyHint`, which would lower it, is not.
        let destructive = hint("destructiveHint") == Some(&Value::Bool(true));
        self.by_name.insert(spec.name.clone(), self.tools.len());
        self.tools.push(RegisteredTool {
            digest,
            from_page: spec.from_page,
            entry: CatalogEntry {
                name: spec.name,
                description: flatten_description(&spec.description),
                input_schema: spec.input_schema,
                kind: spec.kind,
                // Only the executor's own tools are marked (read and proposal alike): a host
                // tool cannot claim to be one. The plugin marks read-only only a built-in read.
                builtin,
                title,
                destructive,
                output_schema,
            },
            validator,
            action,
        });
        Ok(())
    }
}

/// A tool name as a person reads it, two ways: the Unicode TR39 confusable skeleton of the name
/// as written and of the name in lower case, each then folded to lower case and skeletonised
/// again, without the separators `-`, `.` and `_`. Both are needed: `I` reads as `l` (the
/// skeleton of `Iist` is `list`), yet `LIST` is `list` in capitals (its skeleton is `LlST`).
/// Two names sharing a key read as one tool.
pub(crate) fn look_alike_keys(name: &str) -> [String; 2] {
    let key = |name: &str| {
        let folded = unicode_security::skeleton(name)
            .collect::<String>()
            .to_lowercase();
        unicode_security::skeleton(&folded)
            .filter(|c| !matches!(c, '-' | '.' | '_'))
            .collect()
    };
    [key(name), key(&name.to_lowercase())]
}

/// One line, control characters and runs of whitespace collapsed to one space, bounded.
fn flatten_description(text: &str) -> String {
    bounded_line(text, MAX_TOOL_DESCRIPTION_CHARS)
}

/// `text` on one line (runs of whitespace and control characters as one space), at most
/// `max_chars` characters.
fn bounded_line(text: &str, max_chars: usize) -> String {
    let mut flat = String::with_capacity(text.len().min(max_chars));
    for word in text.split(|c: char| c.is_whitespace() || c.is_control()) {
        if word.is_empty() {
            continue;
        }
        if !flat.is_empty() {
            flat.push(' ');
        }
        flat.push_str(word);
    }
    match flat.char_indices().nth(max_chars) {
        Some((cut, _)) => flat[..cut].to_owned(),
        None => flat,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_alike_through_case_separators_and_look_alike_characters() {
        let alike = |a: &str, b: &str| {
            let b = look_alike_keys(b);
            look_alike_keys(a).iter().any(|key| b.contains(key))
        };
        for (a, b) in [
            ("search_workspace", "Search-W0rk.space_"),
            ("list_sources", "1ist_s0urces"),
            ("list_sources", "Iist_sources"),
            ("list_sources", "LIST.S0URCES"),
            ("sealpost", "SEA1P0ST"),
        ] {
            assert!(alike(a, b), "{a} {b}");
        }
        assert!(!alike("search_notes", "search_workspace"));
    }

    #[test]
    fn descriptions_are_flattened_and_bounded() {
        assert_eq!(flatten_description(" a\n\tb\u{7}c  d "), "a b c d");
        let long = "é".repeat(MAX_TOOL_DESCRIPTION_CHARS + 10);
        assert_eq!(
            flatten_description(&long).chars().count(),
            MAX_TOOL_DESCRIPTION_CHARS
        );
    }
}
