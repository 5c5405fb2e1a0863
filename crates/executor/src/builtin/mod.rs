//! The built-in workspace tools: their names, descriptions and schemas, and how each runs.
//!
//! Every document and source a call names is checked against the grants, and an ungranted one
//! answers exactly like one that does not exist, so a session cannot learn what it may not read.

mod propose;
mod read;

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use sealpost_protocol::content::{ToolKind, ToolResult};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::grants::Grants;
use crate::proposals::ProposedChange;
use crate::registry::ToolSpec;
use crate::workspace::{DocId, Document, Workspace};

/// One of the executor's own tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum BuiltinTool {
    /// Ranked full-text search with snippets.
    SearchWorkspace,
    /// Reads part of one document's body from a character offset.
    GetSourceExcerpt,
    /// Lists the documents of the readable sources.
    GetWorkspaceOutline,
    /// Lists the readable sources with their document counts.
    ListSources,
    /// Saves a new note for review.
    ProposeCreateNote,
    /// Saves text to append to a document for review.
    ProposeAppendNote,
    /// Saves a replacement of one passage for review.
    ProposeEditNote,
}

/// What a built-in produced: an answer, or a change to save for review.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum BuiltinAnswer {
    Answer(ToolResult),
    /// The same answer as for something missing, for something that exists but is not granted:
    /// the agent cannot tell the two apart, and the person's Activity records a refusal.
    Withheld(ToolResult),
    Propose {
        change: ProposedChange,
        base_digest: Option<String>,
    },
}

impl BuiltinTool {
    /// Every built-in, in the order the catalog lists them.
    pub const ALL: &'static [Self] = <Self as strum::VariantArray>::VARIANTS;

    /// The name a call uses and the catalog lists.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// A short name for people, as clients show it.
    pub fn title(self) -> &'static str {
        match self {
            Self::SearchWorkspace => "Search the workspace",
            Self::GetSourceExcerpt => "Read part of a document",
            Self::GetWorkspaceOutline => "Outline the workspace",
            Self::ListSources => "List the sources",
            Self::ProposeCreateNote => "Propose a new note",
            Self::ProposeAppendNote => "Propose an addition to a note",
            Self::ProposeEditNote => "Propose an edit to a note",
        }
    }

    /// The JSON Schema of a read tool's structured answer (a proposal's answer has none).
    pub fn output_schema(self) -> Option<Value> {
        match self {
            Self::SearchWorkspace => Some(schema_of::<read::SearchAnswer<'_>>()),
            Self::GetSourceExcerpt => Some(schema_of::<read::Excerpt<'_>>()),
            Self::GetWorkspaceOutline => Some(schema_of::<read::Outline<'_>>()),
            Self::ListSources => Some(schema_of::<read::Sources<'_>>()),
            Self::ProposeCreateNote | Self::ProposeAppendNote | Self::ProposeEditNote => None,
        }
    }

    /// Whether it only reads or saves a proposal.
    pub fn kind(self) -> ToolKind {
        match self {
            Self::SearchWorkspace
            | Self::GetSourceExcerpt
            | Self::GetWorkspaceOutline
            | Self::ListSources => ToolKind::Read,
            Self::ProposeCreateNote | Self::ProposeAppendNote | Self::ProposeEditNote => {
                ToolKind::Proposal
            }
        }
    }

    /// The tool's catalog entry. Its description and input schema both come from the tool's
    /// argument type (see [`derived`]), so what a client is told and what `run` parses are one
    /// definition.
    pub fn spec(self) -> ToolSpec {
        let (description, input_schema) = match self {
            Self::SearchWorkspace => derived::<read::SearchArgs>(),
            Self::GetSourceExcerpt => derived::<read::ExcerptArgs>(),
            Self::GetWorkspaceOutline => derived::<read::OutlineArgs>(),
            Self::ListSources => derived::<read::NoArgs>(),
            Self::ProposeCreateNote => derived::<propose::CreateArgs>(),
            Self::ProposeAppendNote => derived::<propose::AppendArgs>(),
            Self::ProposeEditNote => derived::<propose::EditArgs>(),
        };
        ToolSpec::new(self.name(), description, input_schema, self.kind())
    }

    /// Runs the tool on arguments that passed its schema. `Err` carries a bad-arguments message
    /// for the rare argument the schema cannot express.
    pub(crate) fn run(
        self,
        arguments: &Value,
        workspace: &Workspace,
        grants: &Grants,
    ) -> Result<BuiltinAnswer, String> {
        let view = View { workspace, grants };
        match self {
            Self::SearchWorkspace => read::search(&view, parse(arguments)?),
            Self::GetSourceExcerpt => read::excerpt(&view, parse(arguments)?),
            Self::GetWorkspaceOutline => read::outline(&view, parse(arguments)?),
            Self::ListSources => read::list_sources(&view, parse(arguments)?),
            Self::ProposeCreateNote => propose::create(&view, parse(arguments)?),
            Self::ProposeAppendNote => propose::append(&view, parse(arguments)?),
            Self::ProposeEditNote => propose::edit(&view, parse(arguments)?),
        }
    }
}

/// A tool's description (the argument type's doc comment) and input schema (its JSON Schema).
///
/// The schema is schemars' draft 2020-12 output with three changes, so that it accepts exactly
/// what `parse` accepts and reads like a hand-written one:
/// - `null` is removed from every `type` list: schemars lets an `Option` field be `null`, which
///   the executor has never accepted (an optional argument is left out, not null);
/// - `format` (`uint64`, …) is removed: an annotation validators may ignore or reject;
/// - `$schema`, `title` (the Rust type's name) and the root `description` (it becomes the tool's
///   description) are taken out.
fn derived<T: JsonSchema>() -> (String, Value) {
    let mut schema = generated::<T>();
    let root = schema
        .as_object_mut()
        .expect("an argument type is an object");
    root.remove("title");
    let description = match root.remove("description") {
        Some(Value::String(description)) => description,
        _ => panic!("a tool's argument type needs a doc comment: it is the tool's description"),
    };
    strip_null_and_format(&mut schema);
    (description, schema)
}

/// `T`'s schema, self-contained (no `$defs`, no meta-schema), without its own title.
fn generated<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.meta_schema = None;
            settings.inline_subschemas = true;
        })
        .into_generator();
    generator.into_root_schema_for::<T>().to_value()
}

/// The schema of an answer type, as a client validates the structured answer against it.
fn schema_of<T: JsonSchema>() -> Value {
    let mut schema = generated::<T>();
    if let Some(root) = schema.as_object_mut() {
        root.remove("title");
    }
    strip_null_and_format(&mut schema);
    schema
}

fn strip_null_and_format(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            map.remove("format");
            if let Some(Value::Array(types)) = map.get_mut("type") {
                types.retain(|t| t != "null");
                if let [only] = types.as_slice() {
                    let only = only.clone();
                    map.insert("type".to_owned(), only);
                }
            }
            map.values_mut().for_each(strip_null_and_format);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_null_and_format),
        _ => {}
    }
}

fn parse<T: DeserializeOwned>(arguments: &Value) -> Result<T, String> {
    T::deserialize(arguments).map_err(|error| error.to_string())
}

/// The workspace as one session may see it: only granted sources exist.
pub(crate) struct View<'a> {
    workspace: &'a Workspace,
    grants: &'a Grants,
}

impl View<'_> {
    fn source(&self, name: &str) -> bool {
        self.workspace.has_source(name) && self.grants.allows_source(name)
    }

    fn document(&self, id: &str) -> Option<&Document> {
        let id = DocId::new(id).ok()?;
        self.workspace
            .get(&id)
            .filter(|doc| self.grants.allows_source(&doc.source))
    }
}

/// The one answer for a document that is missing or not granted: the agent cannot tell them
/// apart; the person's Activity records an ungranted one as refused.
fn no_such_document(view: &View<'_>, id: &str) -> BuiltinAnswer {
    let answer = error_answer(format!(
        "No document with id {id:?} in the sources this session may read. Use search_workspace \
         or get_workspace_outline to find document ids."
    ));
    let exists = DocId::new(id)
        .ok()
        .is_some_and(|id| view.workspace.get(&id).is_some());
    if exists { withheld(answer) } else { answer }
}

/// The one answer for a source that is missing or not granted (as for documents).
fn no_such_source(view: &View<'_>, name: &str) -> BuiltinAnswer {
    let answer = error_answer(format!(
        "No source named {name:?} among the sources this session may read. Use list_sources to \
         see them."
    ));
    if view.workspace.has_source(name) {
        withheld(answer)
    } else {
        answer
    }
}

/// `answer`, recorded as a refusal: what was asked for exists but is not granted.
fn withheld(answer: BuiltinAnswer) -> BuiltinAnswer {
    match answer {
        BuiltinAnswer::Answer(result) => BuiltinAnswer::Withheld(result),
        other => other,
    }
}

fn error_answer(message: String) -> BuiltinAnswer {
    BuiltinAnswer::Answer(ToolResult {
        is_error: true,
        ..ToolResult::text(message)
    })
}

/// A structured answer, sealed once: the plugin renders it as text for the model, so it does
/// not cross the relay twice.
fn structured_answer(value: &impl Serialize) -> BuiltinAnswer {
    let structured = serde_json::to_value(value).expect("answers serialise");
    BuiltinAnswer::Answer(ToolResult {
        structured: Some(structured),
        ..ToolResult::default()
    })
}
