//! The external runtime families (docs/semantics.md, "Runtime families"): `command` hooks (a process per invocation) and
//! `http` hooks (a POST per invocation). Both speak Claude Code's hook protocol ([`wire`],
//! the default) or Palisade's own ([`native`], `protocol = "palisade"`), and obey the same decisions, capabilities, ordering and lifecycle events as
//! wasm hooks; what differs is how they are bounded: a payload bound (`payload_max_bytes`,
//! 128 KiB by default) on what goes out and what comes back, and a wall-clock deadline
//! (`timeout_ms`, 5000 ms by default) that kills the process group or drops the connection.

mod command;
#[cfg(feature = "http")]
mod http;
pub(crate) mod native;
pub(crate) mod wire;

use crate::failure::{Failure, FailureReason};
use crate::hook::{Answer, Request};
use crate::manifest::{Limits, Protocol};
use std::path::PathBuf;
pub(crate) use wire::{Caller, Raw};

/// A loaded external hook: where it runs, and the protocol it speaks.
#[derive(Debug)]
pub(crate) struct External {
    pub target: Target,
    pub protocol: Protocol,
}

/// Where an external hook runs.
#[derive(Debug)]
pub(crate) enum Target {
    /// A program, run in `dir` (the plugin folder), with the host's values of `env` (and
    /// `PATH`, `HOME`, `LANG`) as its only inherited environment.
    Command {
        argv: Vec<String>,
        dir: PathBuf,
        env: Vec<String>,
    },
    /// An endpoint.
    Http { url: String },
}

/// One invocation's result, and the lines it logged (stderr of a successful command, a
/// `systemMessage`).
pub(crate) struct Called {
    pub result: Result<Answer, Failure>,
    pub logs: Vec<(&'static str, String)>,
}

impl External {
    /// Sends `request` to the hook and reads its answer.
    pub async fn call(
        &self,
        caller: &Caller<'_>,
        request: &Request<'_>,
        limits: &Limits,
    ) -> Called {
        let mut logs = Vec::new();
        let result = self.exchange(caller, request, limits, &mut logs).await;
        Called { result, logs }
    }

    async fn exchange(
        &self,
        caller: &Caller<'_>,
        request: &Request<'_>,
        limits: &Limits,
        logs: &mut Vec<(&'static str, String)>,
    ) -> Result<Answer, Failure> {
        let request_json = match self.protocol {
            Protocol::ClaudeCode => wire::encode(caller, request),
            Protocol::Palisade => native::encode(caller, request),
        };
        let input = serde_json::to_vec(&request_json).expect("a JSON value always serializes");
        if input.len() > limits.payload_max_bytes {
            return Err(Failure::new(
                FailureReason::PayloadTooLarge,
                format!(
                    "the input is {} bytes, over payload_max_bytes ({})",
                    input.len(),
                    limits.payload_max_bytes
                ),
            ));
        }
        let raw = self.send(caller, input, limits).await?;
        let exit = self.exit(&raw)?;
        if matches!(exit, wire::Exit::Success) {
            for line in String::from_utf8_lossy(&raw.stderr).lines() {
                if !line.trim().is_empty() {
                    logs.push(("stderr", line.to_string()));
                }
            }
        }
        if self.protocol == Protocol::Palisade {
            return native::decode(caller.point, request, &raw.output);
        }
        let (response, notes) = wire::decode(
            caller.point,
            request,
            caller.hook_id,
            exit,
            &raw.output,
            &raw.stderr,
            caller.guarding,
        )?;
        if let Some(message) = notes.system_message {
            logs.push(("system-message", message));
        }
        Ok(response)
    }

    /// Runs the command, or POSTs to the endpoint, with `input`.
    async fn send(
        &self,
        caller: &Caller<'_>,
        input: Vec<u8>,
        limits: &Limits,
    ) -> Result<Raw, Failure> {
        Ok(match &self.target {
            Target::Command {
                argv,
                dir,
                env: inherit,
            } => {
                let env = [
                    ("PALISADE_HOOK_ID", caller.hook_id),
                    ("PALISADE_SESSION_ID", caller.session_id),
                    ("PALISADE_POINT", caller.point.as_str()),
                ];
                command::run(
                    argv,
                    dir,
                    &env,
                    inherit,
                    &input,
                    limits.timeout,
                    limits.payload_max_bytes,
                )
                .await?
            }
            #[cfg(not(feature = "http"))]
            Target::Http { .. } => {
                return Err(Failure::new(
                    FailureReason::Unavailable,
                    "this build of palisade has no `http` feature: it cannot call HTTP hooks",
                ));
            }
            #[cfg(feature = "http")]
            Target::Http { url } => {
                let headers = [
                    ("x-palisade-hook-id", caller.hook_id),
                    ("x-palisade-session-id", caller.session_id),
                ];
                http::post(
                    url,
                    &headers,
                    input,
                    limits.timeout,
                    limits.payload_max_bytes,
                )
                .await?
            }
        })
    }

    /// How the exchange ended: an answer (exit 0, or Claude Code's blocking exit 2), or a
    /// `hook-error` naming the status and stderr.
    fn exit(&self, raw: &Raw) -> Result<wire::Exit, Failure> {
        let stderr_text = || String::from_utf8_lossy(&raw.stderr).trim().to_string();
        Ok(match &raw.status {
            Ok(0) => wire::Exit::Success,
            // Claude Code's blocking exit; in the palisade protocol only 0 is an answer.
            Ok(2)
                if matches!(self.target, Target::Command { .. })
                    && self.protocol == Protocol::ClaudeCode =>
            {
                wire::Exit::Block
            }
            Ok(code) => {
                let stderr = stderr_text();
                return Err(Failure::new(
                    FailureReason::HookError,
                    if stderr.is_empty() {
                        format!("exited with status {code}")
                    } else {
                        format!(
                            "exited with status {code}: {}",
                            crate::failure::clip(&stderr)
                        )
                    },
                ));
            }
            Err(why) => {
                let stderr = stderr_text();
                return Err(Failure::new(
                    FailureReason::HookError,
                    if stderr.is_empty() {
                        why.clone()
                    } else {
                        format!("{why}: {}", crate::failure::clip(&stderr))
                    },
                ));
            }
        })
    }
}
