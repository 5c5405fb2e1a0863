//! The proposal tools. They check the request against the workspace as the session sees it and
//! describe the change; they never write. The executor saves the change for review.

use schemars::JsonSchema;
use serde::Deserialize;

use super::{BuiltinAnswer, View, error_answer, no_such_document, no_such_source};
use crate::limits::{
    MAX_DOC_ID_BYTES, MAX_EDIT_TEXT_CHARS, MAX_PROPOSAL_TEXT_CHARS, MAX_SOURCE_NAME_BYTES,
};
use crate::proposals::{ProposedChange, document_digest};
use crate::workspace::DocId;

/// Propose a new note in a source. Nothing is written: the proposal is saved and a person
/// approves or rejects it in the Sealpost app.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CreateArgs {
    #[schemars(length(min = 1, max = MAX_SOURCE_NAME_BYTES))]
    source: String,
    #[schemars(length(min = 1, max = 300))]
    title: String,
    #[schemars(length(max = MAX_PROPOSAL_TEXT_CHARS))]
    body: String,
}

pub(super) fn create(view: &View<'_>, args: CreateArgs) -> Result<BuiltinAnswer, String> {
    if !view.source(&args.source) {
        return Ok(no_such_source(view, &args.source));
    }
    Ok(BuiltinAnswer::Propose {
        change: ProposedChange::CreateNote {
            source: args.source,
            title: args.title,
            body: args.body,
        },
        base_digest: None,
    })
}

/// Propose appending text to the end of a document (on a new line). Nothing is written until a
/// person approves it in the Sealpost app.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AppendArgs {
    #[schemars(length(min = 1, max = MAX_DOC_ID_BYTES))]
    doc_id: String,
    #[schemars(length(min = 1, max = MAX_PROPOSAL_TEXT_CHARS))]
    text: String,
}

pub(super) fn append(view: &View<'_>, args: AppendArgs) -> Result<BuiltinAnswer, String> {
    let Some(doc) = view.document(&args.doc_id) else {
        return Ok(no_such_document(view, &args.doc_id));
    };
    Ok(BuiltinAnswer::Propose {
        change: ProposedChange::AppendNote {
            doc_id: doc.id.clone(),
            text: args.text,
        },
        base_digest: Some(document_digest(doc)),
    })
}

/// Propose replacing one passage of a document. `find` must occur exactly once in the body.
/// Nothing is written until a person approves it in the Sealpost app.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct EditArgs {
    #[schemars(length(min = 1, max = MAX_DOC_ID_BYTES))]
    doc_id: String,
    #[schemars(length(min = 1, max = MAX_EDIT_TEXT_CHARS))]
    find: String,
    #[schemars(length(max = MAX_EDIT_TEXT_CHARS))]
    replace: String,
}

pub(super) fn edit(view: &View<'_>, args: EditArgs) -> Result<BuiltinAnswer, String> {
    let Some(doc) = view.document(&args.doc_id) else {
        return Ok(no_such_document(view, &args.doc_id));
    };
    // One occurrence only: a reviewer must see exactly which passage changes.
    match doc.body.matches(args.find.as_str()).take(2).count() {
        0 => Ok(error_answer(format!(
            "The text to find does not occur in document {:?}. Read it with get_source_excerpt \
             and copy the passage exactly.",
            args.doc_id
        ))),
        1 => Ok(BuiltinAnswer::Propose {
            change: ProposedChange::EditNote {
                doc_id: DocId::clone(&doc.id),
                find: args.find,
                replace: args.replace,
            },
            base_digest: Some(document_digest(doc)),
        }),
        _ => Ok(error_answer(format!(
            "The text to find occurs more than once in document {:?}. Include more of the \
             surrounding text so it occurs exactly once.",
            args.doc_id
        ))),
    }
}
