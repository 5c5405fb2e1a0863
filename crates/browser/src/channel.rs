//! The session channel as the tab uses it: one WebSocket to the relay on which the claim loop
//! claims, replies and cancels (`sealpost_protocol::api::channel`), because in a browser a
//! message on an open socket costs a fraction of a `fetch` round trip. The channel is an
//! accelerator, not a dependency: when it cannot be opened (a relay that offers none, a proxy
//! that does not pass WebSockets) or it closes, the loop carries on over [`Relay`]'s `fetch`.
//!
//! Answers are matched to requests by id: each request waits on a promise that the message
//! handler resolves once the answer is stashed, and that a close resolves with none.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use futures_util::future::{Either, select};
use js_sys::{Function, Promise};
use sealpost_protocol::api::ClaimResponse;
use sealpost_protocol::api::channel::{
    CHANNEL_BEARER_PREFIX, CHANNEL_PATH, CHANNEL_PROTOCOL, ChannelAnswer, ChannelOp, ChannelRequest,
};
use sealpost_protocol::content::CancelReason;
use sealpost_protocol::ids::{Base64Bytes, CallId, SessionId};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{MessageEvent, WebSocket};

use crate::host_tool::sleep;
use crate::relay::{RelayError, refused};

/// How long opening may take before the loop uses HTTP instead.
const OPEN_TIMEOUT_MS: u32 = 5_000;
/// How often an opening channel looks whether the loop was stopped.
const STOP_CHECK_MS: u32 = 100;

/// How much longer than the relay's own wait a request may go unanswered before the channel
/// counts as dead (a connection can die without a close reaching the tab).
const ANSWER_GRACE_MS: u64 = 15_000;

/// The close code a tab uses when it is done with a channel.
const NORMAL_CLOSURE: u16 = 1000;

#[derive(Default)]
struct Shared {
    /// Each waiting request's resolve function, by id.
    waiting: RefCell<HashMap<u32, Function>>,
    /// Answers that arrived and are not yet taken, by id.
    answers: RefCell<HashMap<u32, ChannelAnswer>>,
    closed: Cell<bool>,
}

impl Shared {
    /// Marks the channel closed and wakes every request still waiting (each finds no answer).
    fn close(&self) {
        self.closed.set(true);
        for (_, resolve) in self.waiting.borrow_mut().drain() {
            let _ = resolve.call0(&JsValue::NULL);
        }
    }
}

/// An open session channel.
pub struct Channel {
    socket: WebSocket,
    shared: Rc<Shared>,
    next_id: Cell<u32>,
    _on_message: Closure<dyn FnMut(MessageEvent)>,
    _on_close: Closure<dyn FnMut()>,
}

/// `ws://…/v1/channel` (or `wss://`) for the relay at `origin` (`""`: this global's own).
fn channel_url(origin: &str) -> Option<String> {
    let origin = if origin.is_empty() {
        let location = js_sys::Reflect::get(&js_sys::global(), &"location".into()).ok()?;
        js_sys::Reflect::get(&location, &"origin".into())
            .ok()?
            .as_string()?
    } else {
        origin.to_owned()
    };
    let rest = origin
        .strip_prefix("https://")
        .map(|host| format!("wss://{host}"))
        .or_else(|| {
            origin
                .strip_prefix("http://")
                .map(|host| format!("ws://{host}"))
        })?;
    Some(format!("{rest}{CHANNEL_PATH}"))
}

impl Channel {
    /// Opens the channel to the relay at `origin` with the owner `token`; `None` when it does
    /// not open within [`OPEN_TIMEOUT_MS`] (the loop then uses HTTP), or when `stopped` says
    /// the loop is stopping.
    pub async fn open(origin: &str, token: &str, stopped: &dyn Fn() -> bool) -> Option<Channel> {
        let url = channel_url(origin)?;
        let protocols = js_sys::Array::of2(
            &CHANNEL_PROTOCOL.into(),
            &format!("{CHANNEL_BEARER_PREFIX}{token}").into(),
        );
        let socket = WebSocket::new_with_str_sequence(&url, &protocols).ok()?;
        let mut settle = None;
        let opened = Promise::new(&mut |resolve, _| settle = Some(resolve));
        let settle = settle.expect("the executor ran");
        let on_open = {
            let settle = settle.clone();
            Closure::<dyn FnMut()>::new(move || {
                let _ = settle.call1(&JsValue::NULL, &JsValue::TRUE);
            })
        };
        let on_fail = Closure::<dyn FnMut()>::new(move || {
            let _ = settle.call1(&JsValue::NULL, &JsValue::FALSE);
        });
        socket.set_onopen(Some(on_open.as_ref().unchecked_ref()));
        socket.set_onerror(Some(on_fail.as_ref().unchecked_ref()));
        socket.set_onclose(Some(on_fail.as_ref().unchecked_ref()));
        let give_up = async {
            let mut waited = 0;
            while waited < OPEN_TIMEOUT_MS && !stopped() {
                sleep(STOP_CHECK_MS).await;
                waited += STOP_CHECK_MS;
            }
        };
        let opened = match select(JsFuture::from(opened), Box::pin(give_up)).await {
            Either::Left((Ok(value), _)) => value.as_bool() == Some(true),
            _ => false,
        };
        socket.set_onopen(None);
        socket.set_onerror(None);
        socket.set_onclose(None);
        if !opened || socket.protocol() != CHANNEL_PROTOCOL {
            let _ = socket.close_with_code(NORMAL_CLOSURE);
            return None;
        }

        let shared = Rc::new(Shared::default());
        let on_message = {
            let shared = shared.clone();
            Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
                let Some(text) = event.data().as_string() else {
                    return;
                };
                let Ok(answer) = serde_json::from_str::<ChannelAnswer>(&text) else {
                    return;
                };
                let Some(resolve) = shared.waiting.borrow_mut().remove(&answer.id) else {
                    return;
                };
                shared.answers.borrow_mut().insert(answer.id, answer);
                let _ = resolve.call0(&JsValue::NULL);
            })
        };
        let on_close = {
            let shared = shared.clone();
            Closure::<dyn FnMut()>::new(move || shared.close())
        };
        socket.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        socket.set_onclose(Some(on_close.as_ref().unchecked_ref()));
        Some(Channel {
            socket,
            shared,
            next_id: Cell::new(1),
            _on_message: on_message,
            _on_close: on_close,
        })
    }

    /// Whether the channel can still carry requests.
    pub fn is_open(&self) -> bool {
        !self.shared.closed.get()
    }

    /// Closes the channel: requests still waiting end with [`RelayError::Unreachable`], and
    /// the relay drops what they asked for (a waiting claim claims nothing).
    pub fn close(&self) {
        let _ = self.socket.close_with_code(NORMAL_CLOSURE);
        self.shared.close();
    }

    /// Sends one request and waits for its answer: the body of a 2xx, or the refusal HTTP
    /// would have given. [`RelayError::Unreachable`] when the channel closed first.
    async fn request(&self, op: ChannelOp) -> Result<serde_json::Value, RelayError> {
        let relay_waits = match op {
            ChannelOp::Claim { wait_ms, .. } => wait_ms,
            _ => 0,
        };
        let closed = || RelayError::Unreachable("the channel closed".into());
        if !self.is_open() {
            return Err(closed());
        }
        let id = self.next_id.get();
        self.next_id.set(id.wrapping_add(1).max(1));
        let text = serde_json::to_string(&ChannelRequest { id, op }).expect("requests serialise");
        let answered = Promise::new(&mut |resolve, _| {
            self.shared.waiting.borrow_mut().insert(id, resolve);
        });
        if self.socket.send_with_str(&text).is_err() {
            self.shared.waiting.borrow_mut().remove(&id);
            return Err(closed());
        }
        let patience = relay_waits
            .saturating_add(ANSWER_GRACE_MS)
            .min(u32::MAX.into()) as u32;
        if let Either::Right(_) = select(JsFuture::from(answered), Box::pin(sleep(patience))).await
        {
            self.close();
        }
        let answer = self
            .shared
            .answers
            .borrow_mut()
            .remove(&id)
            .ok_or_else(closed)?;
        if (200..300).contains(&answer.status) {
            return Ok(answer.body);
        }
        Err(refused(
            answer.status,
            serde_json::from_value(answer.body).ok(),
            answer.retry_after_s,
        ))
    }

    /// Claims up to `max` calls, waiting up to `wait_ms` for the first.
    pub async fn claim(
        &self,
        session_id: SessionId,
        wait_ms: u64,
        max: u32,
    ) -> Result<ClaimResponse, RelayError> {
        let body = self
            .request(ChannelOp::Claim {
                session_id,
                wait_ms,
                max,
            })
            .await?;
        serde_json::from_value(body)
            .map_err(|_| RelayError::Unreachable("an answer that is not the relay's".into()))
    }

    /// Stores a sealed reply.
    pub async fn reply(&self, call_id: CallId, envelope: Vec<u8>) -> Result<(), RelayError> {
        self.request(ChannelOp::Reply {
            call_id,
            envelope: Base64Bytes(envelope),
        })
        .await
        .map(drop)
    }

    /// Cancels a call the tab cannot answer.
    pub async fn cancel(&self, call_id: CallId, reason: CancelReason) -> Result<(), RelayError> {
        self.request(ChannelOp::Cancel { call_id, reason })
            .await
            .map(drop)
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        self.socket.set_onmessage(None);
        self.socket.set_onclose(None);
        self.close();
    }
}
