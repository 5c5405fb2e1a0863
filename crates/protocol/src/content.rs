//! The plaintext inside sealed envelopes. The relay never sees these types; the plugin
//! seals a [`ToolCall`], the browser answers with a [`Reply`], and the browser's hello
//! carries a sealed [`Catalog`].
//!
//! Every message is JSON inside the envelope (the envelope's own header is binary; see
//! docs/PROTOCOL.md). Unknown fields are refused so a peer cannot smuggle meaning past an
//! older reader.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use strum::{IntoStaticStr, VariantArray};

use crate::limits::{MAX_TOOL_NAME_BYTES, RESERVED_TOOL_PREFIX};

/// A tool call as the plugin seals it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// The tool, by the name the catalog lists.
    pub name: String,
    /// The call's arguments; a JSON object (an absent argument list is `{}`).
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// What the browser seals back for a call: a result or a refusal. The relay cannot tell the two
/// apart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Reply {
    /// The tool ran (it may still report a failure of its own).
    Result(ToolResult),
    /// The browser declined to run the call.
    Refusal(Refusal),
}

/// A tool's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ToolResult {
    /// What the tool says, as blocks of content.
    pub content: Vec<ContentBlock>,
    /// Structured output, when the tool has some. Also rendered into `content` as text so clients
    /// that ignore structured output miss nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<Value>,
    /// The tool ran and reports a failure of its own (bad query, no such note, ...).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
}

impl ToolResult {
    /// A result of one text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: vec![ContentBlock::Text { text: text.into() }],
            ..Self::default()
        }
    }
}

/// One block of a result's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
}

/// The browser declined to run a call. Sealed like a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Refusal {
    /// Why the call was refused.
    pub code: RefusalCode,
    /// The browser's explanation: third-party text, which the plugin fences.
    pub message: String,
}

/// Why the browser refused a call it could open. New codes may be added: an older reader
/// parses one it does not know as [`RefusalCode::Unknown`].
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, IntoStaticStr, VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[strum(serialize_all = "snake_case")]
pub enum RefusalCode {
    /// The session's catalog has no tool of that name.
    UnknownTool,
    /// The arguments do not match the tool's schema (or the call is not a tool call).
    BadArguments,
    /// The person has not granted the tool, or the source or document it names.
    NotGranted,
    /// The app is locked.
    Locked,
    /// The tool threw, or ran past the call's expiry.
    ToolFailed,
    /// The result would not fit in a reply.
    TooLarge,
    /// The person declined the call when the tab asked them to confirm it.
    Declined,
    /// The call waited for the person's confirmation and did not get it: it lapsed, the
    /// session ended while it waited, or the tab could not ask them (a framed page, arguments
    /// too long to show).
    NotConfirmed,
    /// A code this build does not know (a newer browser sent it). Only ever read, never sent.
    #[serde(other)]
    Unknown,
}

impl RefusalCode {
    /// Every code the browser sends ([`RefusalCode::Unknown`] is not one).
    pub const ALL: &'static [Self] = crate::wire::known(<Self as strum::VariantArray>::VARIANTS);

    /// The snake_case name, as it is serialised.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Why a call ended without a reply. Set in the clear on the relay, so the plugin treats the
/// accompanying text as relay-supplied. New reasons may be added: an older reader parses one it
/// does not know as [`CancelReason::Unknown`]; the relay accepts only [`CancelReason::ALL`].
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, IntoStaticStr, VariantArray,
)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[strum(serialize_all = "snake_case")]
pub enum CancelReason {
    /// The plugin gave up on the call (the MCP client cancelled it, or it timed out).
    ClientCancelled,
    /// The browser could not open the call (not for its session, or tampered with).
    Undecryptable,
    /// The browser has already seen this call id in the session.
    Replayed,
    /// The call expired, or would outlive its session.
    Expired,
    /// The session ended before the call was answered.
    SessionEnded,
    /// A reason this build does not know (a newer peer sent it). Only ever read, never sent.
    #[serde(other)]
    Unknown,
}

impl CancelReason {
    /// Every reason a peer may send ([`CancelReason::Unknown`] is not one).
    pub const ALL: &'static [Self] = crate::wire::known(<Self as strum::VariantArray>::VARIANTS);

    /// The snake_case name, as it is serialised.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What a tool may do. `Read` tools answer at once; `Proposal` tools only save a proposal that a
/// person reviews in the app.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolKind {
    /// Answers at once and changes nothing.
    Read,
    /// Only saves a proposal, which the person reviews in the app.
    Proposal,
    /// A kind this build does not know (a newer peer's). Only ever read, never sent: a reader
    /// gives such a tool the most scrutiny (not read-only), and a registry refuses it.
    #[serde(other)]
    Unknown,
}

/// One tool offered by the browser. Fields this build does not know are ignored: a newer tab
/// may describe its tools with more than this reader lists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CatalogEntry {
    /// The tool's name; see [`validate_tool_name`].
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub input_schema: Value,
    /// Whether the tool reads or only proposes.
    pub kind: ToolKind,
    /// True only for the executor's built-in read tools. A host-registered tool's own claim to
    /// be harmless is never carried here (claims that reduce scrutiny are ignored).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub builtin: bool,
    /// A short name for people (a built-in's own, or what a host or page tool gave as its
    /// `title`), one line. Third-party text: the plugin cleans it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The tool says it may destroy or overwrite what it touches (a page's `destructiveHint`):
    /// a claim that raises scrutiny, so it is believed and passed on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub destructive: bool,
    /// The JSON Schema of a built-in read tool's structured answer; the plugin lists it and
    /// passes that answer on as structured content. Never set for a host or page tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}

/// The tool list a session offers, sealed into its hello.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    /// The tools, in the order offered.
    pub tools: Vec<CatalogEntry>,
}

/// Why a tool name is not acceptable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadToolName {
    /// Empty, or longer than [`MAX_TOOL_NAME_BYTES`].
    #[error("a tool name must be 1 to {MAX_TOOL_NAME_BYTES} characters")]
    Length,
    /// A character outside `[A-Za-z0-9_.-]`.
    #[error("a tool name may use only A-Z, a-z, 0-9, '_', '.' and '-'")]
    Characters,
    /// Starts with [`RESERVED_TOOL_PREFIX`] in any case, which the plugin keeps for its own
    /// tools.
    #[error(
        "tool names starting with '{RESERVED_TOOL_PREFIX}' (in any case) are reserved for the plugin"
    )]
    Reserved,
}

/// Checks a tool name against `[A-Za-z0-9_.-]{1,48}` and the reserved prefix (any case, so
/// every spelling of `sealpost_…`, with `-` or `.` for `_`, is refused too).
pub fn validate_tool_name(name: &str) -> Result<(), BadToolName> {
    if name.is_empty() || name.len() > MAX_TOOL_NAME_BYTES {
        return Err(BadToolName::Length);
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
    {
        return Err(BadToolName::Characters);
    }
    // ASCII only (checked above), so a byte-wise case-insensitive compare is exact.
    let prefix = RESERVED_TOOL_PREFIX.as_bytes();
    if name.len() >= prefix.len() && name.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix) {
        return Err(BadToolName::Reserved);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_refusal_and_a_result_share_one_reply_type() {
        let refusal = Reply::Refusal(Refusal {
            code: RefusalCode::NotGranted,
            message: "no".into(),
        });
        let text = serde_json::to_string(&refusal).unwrap();
        assert_eq!(
            text,
            r#"{"type":"refusal","code":"not_granted","message":"no"}"#
        );
        assert_eq!(serde_json::from_str::<Reply>(&text).unwrap(), refusal);

        let result = Reply::Result(ToolResult::text("hi"));
        let text = serde_json::to_string(&result).unwrap();
        assert_eq!(
            text,
            r#"{"type":"result","content":[{"type":"text","text":"hi"}]}"#
        );
        assert_eq!(serde_json::from_str::<Reply>(&text).unwrap(), result);
    }

    #[test]
    fn an_old_reader_parses_a_refusal_code_added_later() {
        let reply: Reply =
            serde_json::from_str(r#"{"type":"refusal","code":"over_budget","message":"no"}"#)
                .unwrap();
        let Reply::Refusal(refusal) = reply else {
            panic!("a refusal")
        };
        assert_eq!(refusal.code, RefusalCode::Unknown);
        assert_eq!(refusal.message, "no");
        assert!(!RefusalCode::ALL.contains(&RefusalCode::Unknown));
    }

    #[test]
    fn a_call_without_arguments_reads_as_an_empty_object() {
        let call: ToolCall = serde_json::from_str(r#"{"name":"list_sources"}"#).unwrap();
        assert_eq!(call.arguments, json!({}));
    }

    #[test]
    fn unknown_fields_are_refused() {
        assert!(serde_json::from_str::<ToolCall>(r#"{"name":"a","arguments":{},"x":1}"#).is_err());
    }

    #[test]
    fn codes_spell_as_their_serde_names() {
        for &code in RefusalCode::ALL {
            assert_eq!(serde_json::to_value(code).unwrap(), json!(code.as_str()));
        }
        for &reason in CancelReason::ALL {
            assert_eq!(
                serde_json::to_value(reason).unwrap(),
                json!(reason.as_str())
            );
        }
    }

    #[test]
    fn tool_names_are_checked() {
        assert_eq!(validate_tool_name("search_workspace"), Ok(()));
        assert_eq!(validate_tool_name("a.b-c_1"), Ok(()));
        assert_eq!(validate_tool_name(""), Err(BadToolName::Length));
        assert_eq!(
            validate_tool_name(&"a".repeat(MAX_TOOL_NAME_BYTES + 1)),
            Err(BadToolName::Length)
        );
        assert_eq!(validate_tool_name("rm -rf"), Err(BadToolName::Characters));
        assert_eq!(validate_tool_name("é"), Err(BadToolName::Characters));
        for reserved in [
            "sealpost_status",
            "Sealpost_status",
            "SEALPOST_STATUS",
            "sealpost-status",
            "sealpost.status",
            "SealPost",
        ] {
            assert_eq!(
                validate_tool_name(reserved),
                Err(BadToolName::Reserved),
                "{reserved}"
            );
        }
        assert_eq!(validate_tool_name("my_sealpost"), Ok(()));
    }
}
