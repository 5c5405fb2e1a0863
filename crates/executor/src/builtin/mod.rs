//! The built-in workspace tools: their names, descriptions and schemas, and how each runs.
//!
//! Every document and source a call names is checked against the grants, and an ungranted one
//! answers exactly like one that does not exist, so a session cannot learn what it may not read.

mod propose;
mod read;

use sealpost_protocol::content::{ToolKind, ToolResult};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::grants::Grants;
use crate::limits::*;
use crate::proposals::ProposedChange;
use crate::registry::ToolSpec;
use crate::workspace::{DocId, Document, Workspace};

/// One of the executor's own tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BuiltinTool {
    SearchWorkspace,
    GetSourceExcerpt,
    GetWorkspaceOutline,
    ListSources,
    ProposeCreateNote,
    ProposeAppendNote,
    ProposeEditNote,
}

/// What a built-in produced: an answer, or a change to save for review.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum BuiltinAnswer {
    Answer(ToolResult),
    Propose {
        change: ProposedChange,
        base_digest: Option<String>,
    },
}

impl BuiltinTool {
    pub const ALL: [BuiltinTool; 7] = [
        Self::SearchWorkspace,
        Self::GetSourceExcerpt,
        Self::GetWorkspaceOutline,
        Self::ListSources,
        Self::ProposeCreateNote,
        Self::ProposeAppendNote,
        Self::ProposeEditNote,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::SearchWorkspace => "search_workspace",
            Self::GetSourceExcerpt => "get_source_excerpt",
            Self::GetWorkspaceOutline => "get_workspace_outline",
            Self::ListSources => "list_sources",
            Self::ProposeCreateNote => "propose_create_note",
            Self::ProposeAppendNote => "propose_append_note",
            Self::ProposeEditNote => "propose_edit_note",
        }
    }

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

    pub fn spec(self) -> ToolSpec {
        let (description, input_schema) = match self {
            Self::SearchWorkspace => (
                "Search the person's workspace documents, best match first. Words match \
                 regardless of case, accents and word endings; \"quoted words\" must appear in \
                 that order; word* matches by prefix. Each result has a snippet whose `start` and \
                 `matches` are character offsets into the document body (pass `start` to \
                 get_source_excerpt to read on).",
                json!({
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS},
                        "source": {"type": "string", "minLength": 1, "maxLength": MAX_SOURCE_NAME_BYTES,
                                   "description": "Search only this source."},
                        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_LIMIT,
                                  "default": DEFAULT_SEARCH_LIMIT}
                    },
                    "required": ["query"],
                    "additionalProperties": false
                }),
            ),
            Self::GetSourceExcerpt => (
                "Read part of one document's body, from character offset `start` (default 0), \
                 at most `max_chars` characters.",
                json!({
                    "type": "object",
                    "properties": {
                        "doc_id": {"type": "string", "minLength": 1, "maxLength": MAX_DOC_ID_BYTES},
                        "start": {"type": "integer", "minimum": 0},
                        "max_chars": {"type": "integer", "minimum": 1, "maximum": MAX_EXCERPT_CHARS,
                                      "default": DEFAULT_EXCERPT_CHARS}
                    },
                    "required": ["doc_id"],
                    "additionalProperties": false
                }),
            ),
            Self::GetWorkspaceOutline => (
                "List the documents (id, title, length, last change) of every source this \
                 session may read, or of one source.",
                json!({
                    "type": "object",
                    "properties": {
                        "source": {"type": "string", "minLength": 1, "maxLength": MAX_SOURCE_NAME_BYTES}
                    },
                    "additionalProperties": false
                }),
            ),
            Self::ListSources => (
                "List the sources this session may read, with their document counts.",
                json!({"type": "object", "properties": {}, "additionalProperties": false}),
            ),
            Self::ProposeCreateNote => (
                "Propose a new note in a source. Nothing is written: the proposal is saved and a \
                 person approves or rejects it in the Sealpost app.",
                json!({
                    "type": "object",
                    "properties": {
                        "source": {"type": "string", "minLength": 1, "maxLength": MAX_SOURCE_NAME_BYTES},
                        "title": {"type": "string", "minLength": 1, "maxLength": 300},
                        "body": {"type": "string", "maxLength": MAX_PROPOSAL_TEXT_CHARS}
                    },
                    "required": ["source", "title", "body"],
                    "additionalProperties": false
                }),
            ),
            Self::ProposeAppendNote => (
                "Propose appending text to the end of a document (on a new line). Nothing is \
                 written until a person approves it in the Sealpost app.",
                json!({
                    "type": "object",
                    "properties": {
                        "doc_id": {"type": "string", "minLength": 1, "maxLength": MAX_DOC_ID_BYTES},
                        "text": {"type": "string", "minLength": 1, "maxLength": MAX_PROPOSAL_TEXT_CHARS}
                    },
                    "required": ["doc_id", "text"],
                    "additionalProperties": false
                }),
            ),
            Self::ProposeEditNote => (
                "Propose replacing one passage of a document. `find` must occur exactly once in \
                 the body. Nothing is written until a person approves it in the Sealpost app.",
                json!({
                    "type": "object",
                    "properties": {
                        "doc_id": {"type": "string", "minLength": 1, "maxLength": MAX_DOC_ID_BYTES},
                        "find": {"type": "string", "minLength": 1, "maxLength": MAX_EDIT_TEXT_CHARS},
                        "replace": {"type": "string", "maxLength": MAX_EDIT_TEXT_CHARS}
                    },
                    "required": ["doc_id", "find", "replace"],
                    "additionalProperties": false
                }),
            ),
        };
        ToolSpec {
            name: self.name().to_owned(),
            description: description.to_owned(),
            input_schema,
            kind: self.kind(),
        }
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

/// The one answer for a document that is missing or not granted.
fn no_such_document(id: &str) -> BuiltinAnswer {
    error_answer(format!(
        "No document with id {id:?} in the sources this session may read. Use search_workspace \
         or get_workspace_outline to find document ids."
    ))
}

/// The one answer for a source that is missing or not granted.
fn no_such_source(name: &str) -> BuiltinAnswer {
    error_answer(format!(
        "No source named {name:?} among the sources this session may read. Use list_sources to \
         see them."
    ))
}

fn error_answer(message: String) -> BuiltinAnswer {
    BuiltinAnswer::Answer(ToolResult {
        is_error: true,
        ..ToolResult::text(message)
    })
}

/// A structured answer, also rendered as JSON text for clients that ignore structured output.
fn structured_answer(value: &impl Serialize) -> BuiltinAnswer {
    let structured = serde_json::to_value(value).expect("answers serialise");
    BuiltinAnswer::Answer(ToolResult {
        structured: Some(structured.clone()),
        ..ToolResult::text(structured.to_string())
    })
}
