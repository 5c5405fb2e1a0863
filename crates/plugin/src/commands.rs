//! `sealpost pair`, `unpair` and `status`: each prints plain sentences, never the code or the
//! token, and ends with an [`Exit`] code that says which state stopped it.

use std::io::{BufRead as _, IsTerminal as _, Write as _};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sealpost_seal::PairingCode;
use sealpost_time::UnixMillis;
use serde::Serialize;
use zeroize::Zeroizing;

use crate::Plugin;
use crate::config::ConfigError;
use crate::messages::Failure;
use crate::relay::{RelayClient, RelayError};

/// Environment variable that carries a pairing code (MCP Bundles pass `user_config` this way).
pub const PAIRING_CODE_ENV: &str = "SEALPOST_PAIRING_CODE";

/// Exit codes of `sealpost pair`, `unpair` and `status`; each unusable state has its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::EnumIter, strum::EnumMessage)]
#[serde(rename_all = "snake_case")]
pub enum Exit {
    /// everything needed works
    Ok = 0,
    /// unexpected failure (a file could not be written)
    Failed = 1,
    /// bad command-line usage (clap's own exit)
    Usage = 2,
    /// the pairing code is malformed
    BadCode = 3,
    /// the relay did not answer
    RelayUnreachable = 4,
    /// the relay refused the token (revoked or expired)
    TokenRefused = 5,
    /// another pairing is stored (use `sealpost pair --replace`)
    OtherPairing = 6,
    /// the pairing file is damaged or not sealpost's
    ConfigDamaged = 7,
    /// not paired
    NotPaired = 8,
    /// no session is live (start one in the Sealpost tab)
    NoSession = 9,
    /// the tab is not open (a session exists but the tab has not polled for 15 s)
    TabNotOpen = 10,
}

/// The exit code table for `--help`, from the codes' own doc comments.
pub fn exit_codes_help() -> String {
    use strum::{EnumMessage, IntoEnumIterator};
    let lines = Exit::iter().map(|exit| {
        let meaning = exit.get_documentation().unwrap_or_default();
        format!("  {:<2} {}", exit.code(), meaning.trim())
    });
    std::iter::once("Exit codes:".to_owned())
        .chain(lines)
        .collect::<Vec<_>>()
        .join("\n")
}

impl Exit {
    /// The process exit code.
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// What `sealpost status` (and the `sealpost_status` tool) found.
#[derive(Debug, Clone, Serialize)]
pub struct StatusReport {
    /// Whether a readable pairing is stored.
    pub paired: bool,
    /// The relay's host.
    pub relay_host: Option<String>,
    /// The relay's origin (the address the person opens).
    pub relay_origin: Option<String>,
    /// The pairing's 6-digit fingerprint, to compare with the tab.
    pub fingerprint: Option<String>,
    /// Whether the relay answered.
    pub relay_reachable: Option<bool>,
    /// Whether the relay accepted the MCP token.
    pub token_live: Option<bool>,
    /// When the MCP token expires, as the token says.
    pub token_expires_at: Option<UnixMillis>,
    /// Whether a session is live for the pairing.
    pub session_live: Option<bool>,
    /// When the live session ends.
    pub session_expires_at: Option<UnixMillis>,
    /// Seconds since the tab last polled, per the relay.
    pub tab_last_seen_secs_ago: Option<u64>,
    /// Tools the live session offers.
    pub tools: Option<usize>,
    /// What is wrong and what to do, when something is.
    pub problem: Option<String>,
    /// Why this process uses a pairing from its environment rather than the stored one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
    /// The state that decides the exit code.
    pub exit: Exit,
}

impl StatusReport {
    fn empty(exit: Exit, problem: String) -> Self {
        Self {
            paired: false,
            relay_host: None,
            relay_origin: None,
            fingerprint: None,
            relay_reachable: None,
            token_live: None,
            token_expires_at: None,
            session_live: None,
            session_expires_at: None,
            tab_last_seen_secs_ago: None,
            tools: None,
            problem: Some(problem),
            notice: None,
            exit,
        }
    }

    /// Lines for a person at a terminal.
    pub fn for_person(&self) -> String {
        let mut lines = Vec::new();
        let yes_no = |v: Option<bool>| match v {
            Some(true) => "yes",
            Some(false) => "no",
            None => "unknown",
        };
        lines.push(format!(
            "paired:          {}",
            if self.paired { "yes" } else { "no" }
        ));
        if let Some(host) = &self.relay_host {
            lines.push(format!("relay:           {host}"));
        }
        if let Some(fingerprint) = &self.fingerprint {
            lines.push(format!("fingerprint:     {fingerprint}"));
        }
        if self.paired {
            lines.push(format!("relay reachable: {}", yes_no(self.relay_reachable)));
            lines.push(format!("token live:      {}", yes_no(self.token_live)));
            if let Some(at) = self.token_expires_at {
                lines.push(format!("token expires:   {}", in_words(at)));
            }
            lines.push(format!("session live:    {}", yes_no(self.session_live)));
            if let Some(at) = self.session_expires_at {
                lines.push(format!("session ends:    {}", in_words(at)));
            }
            if let Some(secs) = self.tab_last_seen_secs_ago {
                lines.push(format!("tab last seen:   {secs} s ago"));
            }
            if let Some(tools) = self.tools {
                lines.push(format!("tools offered:   {tools}"));
            }
        }
        if let Some(problem) = &self.problem {
            lines.push(String::new());
            lines.push(problem.clone());
        }
        if let Some(notice) = &self.notice {
            lines.push(String::new());
            lines.push(notice.clone());
        }
        lines.join("\n")
    }

    /// The text the `sealpost_status` tool answers.
    pub fn for_model(&self) -> String {
        let summary = match self.exit {
            Exit::Ok => "Sealpost is paired and the tab is open and serving.".to_owned(),
            _ => self
                .problem
                .clone()
                .unwrap_or_else(|| "Sealpost cannot reach the tab.".into()),
        };
        format!("{summary}\n\n{}", self.for_person())
    }
}

fn in_words(at: UnixMillis) -> String {
    let now = crate::call::local_now_ms();
    if at <= now {
        return "already passed".into();
    }
    let secs = at.saturating_sub(now) / 1000;
    match secs {
        0..=119 => format!("in {secs} s"),
        120..=7199 => format!("in {} min", secs / 60),
        7200..=172_799 => format!("in {} h", secs / 3600),
        _ => format!("in {} days", secs / 86_400),
    }
}

/// The `exp` a JWT claims (read, not verified: for display only).
fn token_expiry_ms(token: &str) -> Option<UnixMillis> {
    let payload = token.split('.').nth(1)?;
    let bytes = Zeroizing::new(URL_SAFE_NO_PAD.decode(payload).ok()?);
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let exp_s = claims.get("exp")?.as_u64()?;
    exp_s.checked_mul(1000).map(UnixMillis::from_ms)
}

fn fingerprint(code: &PairingCode) -> String {
    let digits = code.secret().fingerprint(code.relay_origin());
    if digits.len() == 6 {
        format!("{} {}", &digits[..3], &digits[3..])
    } else {
        digits
    }
}

/// Checks the pairing, the relay, the token, the session and the tab, in that order.
pub async fn status_report(plugin: &Plugin) -> StatusReport {
    let mut report = status_of_pairing(plugin).await;
    report.notice = plugin.process_pairing_notice().map(str::to_owned);
    report
}

async fn status_of_pairing(plugin: &Plugin) -> StatusReport {
    let code = match plugin.pairing() {
        Ok(code) => code,
        Err(ConfigError::NotPaired) => {
            return StatusReport::empty(Exit::NotPaired, Failure::NotPaired.sentence());
        }
        Err(e @ ConfigError::Corrupt { .. }) => {
            return StatusReport::empty(Exit::ConfigDamaged, e.to_string());
        }
        Err(e) => return StatusReport::empty(Exit::Failed, e.to_string()),
    };
    let mut report = StatusReport {
        paired: true,
        relay_host: Some(code.relay_origin().host().to_owned()),
        relay_origin: Some(code.relay_origin().to_string()),
        fingerprint: Some(fingerprint(&code)),
        token_expires_at: token_expiry_ms(code.mcp_token()),
        problem: None,
        exit: Exit::Ok,
        ..StatusReport::empty(Exit::Ok, String::new())
    };
    let relay = RelayClient::new(plugin.http.clone(), code.relay_origin(), code.mcp_token());
    match plugin.trusted_session(&code, &relay).await {
        Ok(session) => {
            report.relay_reachable = Some(true);
            report.token_live = Some(true);
            report.session_live = Some(true);
            report.session_expires_at = Some(session.expires_at_ms);
            report.tab_last_seen_secs_ago = session
                .claimer_seen_at_ms
                .map(|seen| session.relay_now_ms.saturating_sub(seen) / 1000);
            report.tools = Some(crate::tools::accepted(&session.tools).len());
            if let Some(seen_secs_ago) = plugin.tab_absent(&session) {
                report.exit = Exit::TabNotOpen;
                report.problem = Some(
                    Failure::TabNotOpen {
                        origin: code.relay_origin().clone(),
                        seen_secs_ago,
                    }
                    .sentence(),
                );
            }
        }
        Err(failure) => {
            let exit = match &failure {
                Failure::RelayUnreachable { .. } | Failure::BadResponse { .. } => {
                    report.relay_reachable = Some(false);
                    Exit::RelayUnreachable
                }
                Failure::TokenRefused { .. } => {
                    report.relay_reachable = Some(true);
                    report.token_live = Some(false);
                    Exit::TokenRefused
                }
                Failure::NoSession { .. } => {
                    report.relay_reachable = Some(true);
                    report.token_live = Some(true);
                    report.session_live = Some(false);
                    Exit::NoSession
                }
                _ => {
                    report.relay_reachable = Some(true);
                    Exit::Failed
                }
            };
            report.exit = exit;
            report.problem = Some(failure.sentence());
        }
    }
    report
}

/// Reads the code: the argument (with a warning), else `SEALPOST_PAIRING_CODE`, else stdin.
fn read_code(argument: Option<String>) -> std::io::Result<Zeroizing<String>> {
    if let Some(code) = argument {
        eprintln!(
            "Note: a code given as an argument lands in your shell history and process list. \
             Next time run `sealpost pair` and paste it when asked."
        );
        return Ok(Zeroizing::new(code));
    }
    if let Some(code) = std::env::var_os(PAIRING_CODE_ENV).filter(|c| !c.is_empty()) {
        return Ok(Zeroizing::new(code.to_string_lossy().into_owned()));
    }
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprint!("Paste the pairing code from the Sealpost tab, then press Enter: ");
        let _ = std::io::stderr().flush();
    }
    let mut line = Zeroizing::new(String::new());
    stdin.lock().read_line(&mut line)?;
    Ok(line)
}

/// `sealpost pair [CODE] [--replace]`.
pub async fn pair(plugin: &Plugin, argument: Option<String>, replace: bool) -> Exit {
    let text = match read_code(argument) {
        Ok(text) => text,
        Err(error) => {
            eprintln!("Could not read the pairing code: {error}.");
            return Exit::Failed;
        }
    };
    let code = match PairingCode::parse(&text) {
        Ok(code) => code,
        Err(error) => {
            eprintln!(
                "That is not a valid Sealpost pairing code ({error}). Copy it again from the \
                 Sealpost tab: it is one line starting with sppair1_."
            );
            return Exit::BadCode;
        }
    };
    match plugin.config().load_pairing() {
        Ok(existing) if existing.encode() != code.encode() && !replace => {
            eprintln!(
                "This plugin is already paired with the relay at {} (fingerprint {}). Run \
                 `sealpost pair --replace` to replace that pairing.",
                existing.relay_origin().host(),
                fingerprint(&existing)
            );
            return Exit::OtherPairing;
        }
        Err(e @ ConfigError::Corrupt { .. }) if !replace => {
            eprintln!("{e}");
            return Exit::ConfigDamaged;
        }
        _ => {}
    }
    let host = code.relay_origin().host().to_owned();
    let relay = RelayClient::new(plugin.http.clone(), code.relay_origin(), code.mcp_token());
    let session = match relay.live_session(code.secret().pair_id()).await {
        Ok(session) => session,
        Err(RelayError::Unreachable { .. } | RelayError::BadResponse { .. }) => {
            eprintln!(
                "The relay at {host} did not answer, so the code was not saved. Check the \
                 network and that the relay is running, then run `sealpost pair` again."
            );
            return Exit::RelayUnreachable;
        }
        Err(RelayError::TokenRefused { .. }) => {
            eprintln!(
                "The relay at {host} refused the code's token: it was revoked or has expired. \
                 Make a new pairing in the Sealpost tab and pair with its code."
            );
            return Exit::TokenRefused;
        }
        Err(error) => {
            eprintln!("{error} The code was not saved.");
            return Exit::Failed;
        }
    };
    if let Err(error) = plugin.config().save_pairing(&code) {
        eprintln!("{error}");
        return Exit::Failed;
    }
    println!("Paired with the Sealpost relay at {host}.");
    println!(
        "Fingerprint: {}. Check that the Sealpost tab shows the same digits.",
        fingerprint(&code)
    );
    match session {
        Some(live) => match plugin
            .keys
            .trust(code.secret(), &live, crate::call::local_now_ms())
        {
            Ok(mut session) => {
                if let Err(error) = plugin.remember_catalog(code.secret().pair_id(), &mut session) {
                    println!("The live session could not be checked ({error}).");
                    return Exit::Ok;
                }
                println!(
                    "A session is live: {} tools offered.",
                    crate::tools::accepted(&session.tools).len()
                );
            }
            Err(error) => println!("The live session could not be checked ({error})."),
        },
        None => println!("No session is live yet: start one in the Sealpost tab."),
    }
    Exit::Ok
}

/// `sealpost unpair`: revokes the token at the relay when it can, then deletes the pairing.
pub async fn unpair(plugin: &Plugin) -> Exit {
    let code = match plugin.config().load_pairing() {
        Ok(code) => Some(code),
        Err(ConfigError::NotPaired) => {
            println!("This plugin is not paired; there is nothing to remove.");
            return Exit::NotPaired;
        }
        Err(error) => {
            eprintln!("{error}");
            None
        }
    };
    if let Some(code) = &code {
        let host = code.relay_origin().host();
        let relay = RelayClient::new(plugin.http.clone(), code.relay_origin(), code.mcp_token());
        match relay.sign_out().await {
            Ok(()) => println!("Revoked this plugin's token at the relay at {host}."),
            Err(RelayError::TokenRefused { .. }) => {
                println!("The token was already revoked or expired at the relay at {host}.")
            }
            Err(_) => println!(
                "Could not revoke the token: the relay at {host} did not answer. Revoke it in \
                 the Sealpost tab's Tokens page."
            ),
        }
    } else {
        println!(
            "The pairing file could not be read, so its token could not be revoked. Revoke it \
             in the Sealpost tab's Tokens page."
        );
    }
    match plugin.config().remove_pairing() {
        Ok(_) => {
            println!(
                "Removed the pairing from {}.",
                plugin.config().path().display()
            );
            Exit::Ok
        }
        Err(error) => {
            eprintln!("{error}");
            Exit::Failed
        }
    }
}

/// At `sealpost mcp` start: takes a code from `SEALPOST_PAIRING_CODE` (how MCP Bundles pass
/// the person's setting). It is stored only when no pairing is stored yet; a code naming
/// another pairing serves this process alone, never replaces the stored one (which every other
/// client uses: a project's MCP config must not redirect them), and the process says so on
/// stderr and in `sealpost_status`. No network.
pub fn pair_from_environment(plugin: &mut Plugin) {
    let Some(text) = std::env::var_os(PAIRING_CODE_ENV).filter(|c| !c.is_empty()) else {
        return;
    };
    let text = Zeroizing::new(text.to_string_lossy().into_owned());
    let code = match PairingCode::parse(&text) {
        Ok(code) => code,
        Err(error) => {
            tracing::warn!("{PAIRING_CODE_ENV} does not hold a valid pairing code ({error})");
            return;
        }
    };
    let stored = match plugin.config().load_pairing() {
        Ok(stored) if stored.encode() == code.encode() => return,
        Ok(stored) => format!(
            "the pairing stored for every client (relay {}, fingerprint {})",
            stored.relay_origin().host(),
            fingerprint(&stored)
        ),
        Err(ConfigError::NotPaired) => {
            match plugin.config().save_pairing(&code) {
                Ok(()) => tracing::info!(
                    relay = code.relay_origin().host(),
                    "paired from {PAIRING_CODE_ENV}"
                ),
                Err(error) => tracing::warn!(%error, "could not store the pairing"),
            }
            return;
        }
        Err(_) => "the stored pairing, which could not be read".to_owned(),
    };
    let notice = format!(
        "This process uses the pairing code in {PAIRING_CODE_ENV} (relay {}, fingerprint {}), \
         not {stored}, which stays as it is for other clients. To make the code from the \
         environment everyone's pairing, run `sealpost pair --replace` with it.",
        code.relay_origin().host(),
        fingerprint(&code)
    );
    eprintln!("sealpost: {notice}");
    plugin.use_for_this_process(code, notice);
}

#[cfg(test)]
mod tests {
    use super::*;
    use strum::IntoEnumIterator;

    #[test]
    fn the_help_lists_every_exit_code_once_with_its_meaning() {
        let help = exit_codes_help();
        let lines: Vec<&str> = help.lines().skip(1).collect();
        assert_eq!(lines.len(), Exit::iter().count(), "{help}");
        for (line, exit) in lines.iter().zip(Exit::iter()) {
            let (code, meaning) = line.trim().split_once(' ').unwrap();
            assert_eq!(code, exit.code().to_string());
            assert!(meaning.trim().len() > 5, "{line}");
        }
        assert!(help.contains("10 the tab is not open"), "{help}");
    }
}
