//! A host app's tool: a JavaScript function the executor calls like any tool. It gets the
//! arguments (already checked against its schema and the grants) and returns, or resolves to,
//! a string or `{text?, structured?, isError?}`. A handler that throws gives `tool_failed`; one
//! that does not settle within [`HOST_TOOL_TIMEOUT_MS`] (below the claim's lease, after which
//! a reply would be refused) gives `tool_failed` too: a sealed refusal, never a stuck call.

use futures_util::future::{Either, select};
use sealpost_executor::{HostTool, ToolFailure, ToolFuture};
use sealpost_protocol::content::{ContentBlock, ToolResult};
use serde::Serialize as _;
use serde_json::Value;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

/// Longest a host tool's handler may take.
pub const HOST_TOOL_TIMEOUT_MS: u32 = 25_000;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(handler: &js_sys::Function, ms: i32) -> JsValue;
}

/// Resolves after `ms` milliseconds (the global `setTimeout`, in a window or a worker).
pub async fn sleep(ms: u32) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        set_timeout(&resolve, ms.min(i32::MAX as u32) as i32);
    });
    let _ = JsFuture::from(promise).await;
}

/// A registered JavaScript handler.
pub struct JsTool {
    handler: js_sys::Function,
}

impl JsTool {
    pub fn new(handler: js_sys::Function) -> Self {
        Self { handler }
    }
}

fn failure(message: impl Into<String>) -> ToolFailure {
    ToolFailure::new(message)
}

/// What a handler's rejection says. The module's confirmation rejects with `code: "declined"`
/// when the person declines, and `code: "not_confirmed"` when the call lapses or they cannot
/// be asked: sealed back as that refusal.
fn failure_from(value: &JsValue) -> ToolFailure {
    let code = js_sys::Reflect::get(value, &JsValue::from_str("code"))
        .ok()
        .and_then(|code| code.as_string());
    match code.as_deref() {
        Some("declined") => ToolFailure::declined(error_text(value)),
        Some("not_confirmed") => ToolFailure::not_confirmed(error_text(value)),
        _ => failure(error_text(value)),
    }
}

fn error_text(value: &JsValue) -> String {
    value
        .dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| value.as_string())
        .unwrap_or_else(|| "the tool failed".into())
}

/// Reads what a handler returned.
fn result_from(value: JsValue) -> Result<ToolResult, ToolFailure> {
    if let Some(text) = value.as_string() {
        return Ok(ToolResult::text(text));
    }
    let value: Value = serde_wasm_bindgen::from_value(value)
        .map_err(|_| failure("the tool returned something that is not JSON"))?;
    let text = value.get("text").and_then(Value::as_str).map(str::to_owned);
    let structured = value.get("structured").cloned().filter(|v| !v.is_null());
    let is_error = value
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let text = match (text, &structured) {
        (Some(text), _) => text,
        (None, Some(structured)) => structured.to_string(),
        (None, None) => {
            return Err(failure(
                "the tool returned neither text nor structured output",
            ));
        }
    };
    Ok(ToolResult {
        content: vec![ContentBlock::Text { text }],
        structured,
        is_error,
    })
}

impl HostTool for JsTool {
    fn call(&self, arguments: Value) -> ToolFuture {
        let handler = self.handler.clone();
        Box::pin(async move {
            // Plain objects, as a handler expects: the default serializer makes `Map`s.
            let arguments = arguments
                .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
                .map_err(|_| failure("the arguments could not be passed to the tool"))?;
            let returned = handler
                .call1(&JsValue::NULL, &arguments)
                .map_err(|e| failure_from(&e))?;
            let settled = JsFuture::from(js_sys::Promise::resolve(&returned));
            let timeout = sleep(HOST_TOOL_TIMEOUT_MS);
            match select(Box::pin(settled), Box::pin(timeout)).await {
                Either::Left((Ok(value), _)) => result_from(value),
                Either::Left((Err(error), _)) => Err(failure_from(&error)),
                Either::Right(((), _)) => Err(failure(format!(
                    "the tool did not answer within {} s",
                    HOST_TOOL_TIMEOUT_MS / 1000
                ))),
            }
        })
    }
}
