//! Every way a tool call can fail, as one plain sentence for the model and the person: what
//! happened and what to do. Text that the tab or the relay wrote is never spliced in bare; it
//! goes through the fence like a result.

use sealpost_protocol::content::{CancelReason, RefusalCode};
use sealpost_seal::RelayOrigin;

use crate::config::ConfigError;
use crate::relay::RelayError;
use crate::session::SessionError;

/// Why a call did not produce a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// No pairing file.
    NotPaired,
    /// The pairing file is damaged or foreign (the message names the file and the fix).
    Config(String),
    /// The relay did not answer.
    RelayUnreachable { host: String },
    /// The MCP token was refused.
    TokenRefused { host: String },
    /// The relay refused the request in a way the plugin did not expect.
    RelayRefused { host: String, code: String },
    /// The relay refused a new call for a rate: the account makes calls faster than it allows.
    RateLimited {
        host: String,
        retry_after_s: Option<u64>,
    },
    /// The relay's answer was too large or malformed.
    BadResponse { host: String },
    /// No session is live for the pairing.
    NoSession { origin: RelayOrigin },
    /// A session is live but its tab has not polled recently.
    TabNotOpen {
        origin: RelayOrigin,
        seen_secs_ago: Option<u64>,
    },
    /// The session's hello or the relay's account of it did not check out.
    UntrustedSession { host: String, why: String },
    /// The tool is not in the session's catalog.
    UnknownTool { name: String },
    /// The call's arguments would not fit in an envelope.
    ArgumentsTooLarge,
    /// No answer before the deadline.
    TimedOut { secs: u64 },
    /// The relay cancelled the call.
    Cancelled { reason: CancelReason },
    /// The call expired on the relay before an answer.
    Expired,
    /// The answer did not open under this call's keys.
    ReplyDoesNotOpen,
}

impl From<RelayError> for Failure {
    fn from(error: RelayError) -> Self {
        match error {
            RelayError::Unreachable { host } => Self::RelayUnreachable { host },
            RelayError::TokenRefused { host } => Self::TokenRefused { host },
            RelayError::Refused {
                host,
                status: 429,
                code,
                retry_after,
                ..
            } if matches!(code.as_str(), "rate_limited" | "owner_rate_limited") => {
                Self::RateLimited {
                    host,
                    retry_after_s: retry_after.map(|d| d.as_secs()),
                }
            }
            RelayError::Refused { host, code, .. } => Self::RelayRefused { host, code },
            RelayError::BadResponse { host } => Self::BadResponse { host },
            RelayError::NotFound | RelayError::Duplicate => Self::RelayRefused {
                host: "the relay".into(),
                code: "not_found".into(),
            },
        }
    }
}

impl From<ConfigError> for Failure {
    fn from(error: ConfigError) -> Self {
        match error {
            ConfigError::NotPaired => Self::NotPaired,
            other => Self::Config(other.to_string()),
        }
    }
}

impl Failure {
    /// A session problem found while trusting the relay's answer.
    pub fn untrusted(host: &str, error: &SessionError) -> Self {
        Self::UntrustedSession {
            host: host.to_owned(),
            why: error.to_string(),
        }
    }

    /// Whether the relay may well take the same request a moment later (no answer, a rate).
    pub fn is_transient(&self) -> bool {
        match self {
            Self::RelayUnreachable { .. } | Self::RateLimited { .. } => true,
            Self::RelayRefused { code, .. } => matches!(
                code.as_str(),
                "too_many_long_polls" | "busy" | "unavailable" | "body_timeout"
            ),
            _ => false,
        }
    }

    /// The sentence shown to the model. Relay-supplied codes are stable identifiers checked
    /// against `[a-z_]`, never free text.
    pub fn sentence(&self) -> String {
        match self {
            Self::NotPaired => {
                "Sealpost is not paired with a browser tab yet. Ask the person to open the \
                 Sealpost web app, turn on AI access, start a session, and run `sealpost pair` \
                 with the pairing code it shows."
                    .into()
            }
            Self::Config(message) => message.clone(),
            Self::RelayUnreachable { host } => format!(
                "The Sealpost relay at {host} did not answer. Check the network connection, or \
                 ask whoever runs the relay whether it is up, then try again."
            ),
            Self::TokenRefused { host } => format!(
                "The relay at {host} no longer accepts this plugin's token: it was revoked or \
                 has expired. Ask the person to pair again: in the Sealpost tab, start a session \
                 and run `sealpost pair --replace` with the new code."
            ),
            Self::RelayRefused { host, code } => format!(
                "The relay at {host} refused the request ({}). Try again; if it keeps failing, \
                 run `sealpost status`.",
                safe_code(code)
            ),
            Self::RateLimited {
                host,
                retry_after_s,
            } => {
                let when = match retry_after_s {
                    Some(secs) if *secs > 1 => format!("in {secs} s"),
                    _ => "in a second".into(),
                };
                format!(
                    "This Sealpost account is making calls faster than the relay at {host} \
                     allows, so this call was not sent. Try again {when}, or make fewer calls \
                     at once."
                )
            }
            Self::BadResponse { host } => format!(
                "The relay at {host} sent an answer that is too large or malformed, so it was \
                 not read. Try again; if it keeps happening, the relay may be misbehaving."
            ),
            Self::NoSession { origin } => format!(
                "The Sealpost tab is not open: no session is live for this pairing. Ask the \
                 person to open {origin}, turn on AI access and start a session, then try again."
            ),
            Self::TabNotOpen {
                origin,
                seen_secs_ago,
            } => {
                let seen = match seen_secs_ago {
                    Some(secs) => format!(" (last seen {secs} s ago)"),
                    None => " (it has not connected yet)".into(),
                };
                format!(
                    "The Sealpost tab is not open{seen}, so nothing can answer. Ask the person \
                     to open {origin} in their browser and keep the session running, then try \
                     again."
                )
            }
            Self::UntrustedSession { host, why } => format!(
                "The session the relay at {host} returned could not be trusted ({why}), so \
                 nothing was sent. Ask the person to end the session in the Sealpost tab and \
                 start a new one; if it persists, pair again."
            ),
            Self::UnknownTool { name } => format!(
                "The Sealpost tab does not offer a tool named {}. Call sealpost_status or list \
                 the tools again to see what it offers now.",
                crate::fence::one_line(name, 64)
            ),
            Self::ArgumentsTooLarge => {
                "The arguments are too large to send to the tab. Send less at once.".into()
            }
            Self::TimedOut { secs } => format!(
                "The Sealpost tab did not answer within {secs} s. The tab may be busy or asleep; \
                 ask the person to check it, then try again."
            ),
            Self::Cancelled { reason } => cancel_sentence(*reason).into(),
            Self::Expired => "The call expired before the Sealpost tab answered it. Try again; if \
                 it keeps happening, ask the person to check the tab."
                .into(),
            Self::ReplyDoesNotOpen => "The answer that came back did not open under this call's \
                 keys (it was damaged or is not this call's answer), so it was discarded. Try \
                 again."
                .into(),
        }
    }
}

/// A relay-supplied code, shown only when it looks like one.
fn safe_code(code: &str) -> &str {
    if !code.is_empty()
        && code.len() <= 40
        && code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
    {
        code
    } else {
        "unexpected answer"
    }
}

/// What each refusal code means for the person.
pub fn refusal_sentence(code: RefusalCode) -> &'static str {
    match code {
        RefusalCode::UnknownTool => {
            "The Sealpost tab does not offer this tool any more. List the tools again."
        }
        RefusalCode::BadArguments => {
            "The Sealpost tab refused the call: its arguments do not match the tool's schema. \
             Fix the arguments and try again."
        }
        RefusalCode::NotGranted => {
            "The person has not granted this tool or source to AI access in the Sealpost tab. \
             Ask them to grant it if they want to, then try again."
        }
        RefusalCode::Locked => {
            "The Sealpost tab is not serving calls now; the tab's explanation below says why."
        }
        RefusalCode::ToolFailed => "The tool failed in the Sealpost tab.",
        RefusalCode::TooLarge => {
            "The result was too large to send back. Ask for less (a narrower query or a \
             shorter excerpt)."
        }
        RefusalCode::Declined => {
            "The person declined this call in the Sealpost tab, so it did not run. Do not \
             repeat it unless they ask you to."
        }
        RefusalCode::NotConfirmed => {
            "The call did not get the person's confirmation in the Sealpost tab, so it did not \
             run; the tab's explanation below says why."
        }
        // A code from a newer tab: say what we can rather than fail the call.
        _ => {
            "The Sealpost tab refused the call for a reason this plugin does not know. \
              Updating sealpost may explain it."
        }
    }
}

/// What each cancel reason means for the person.
pub fn cancel_sentence(reason: CancelReason) -> &'static str {
    match reason {
        CancelReason::ClientCancelled => "The call was cancelled.",
        CancelReason::Undecryptable => {
            "The Sealpost tab could not open the call (it does not match the tab's session). \
             Try again; if it keeps happening, pair again."
        }
        CancelReason::Replayed => {
            "The Sealpost tab had already seen this call and refused the repeat. Try again."
        }
        CancelReason::Expired => {
            "The call expired before the Sealpost tab ran it. Try again; check that the \
             computer's clock is right."
        }
        CancelReason::SessionEnded => {
            "The Sealpost session ended before the call was answered. Ask the person to start a \
             new session in the Sealpost tab, then try again."
        }
        _ => {
            "The call ended without an answer, for a reason this plugin does not know. \
              Try again; updating sealpost may explain it."
        }
    }
}
