//! A hostile test guest for fuzzing: every answer is a WIT value decoded from bytes the host
//! sends it (hex, in a tool call's `bytes` argument, a prompt's text or the last assistant
//! message). Any variant, any string (invalid JSON where JSON is due, control characters,
//! huge texts), any list length: whatever a component could return, the host must handle —
//! bound it, refuse it as an invalid response, or honour it — and never panic or hang.

use palisade_sdk::{
    Ask, Config, ContentBlock, Deny, GuardDecision, Message, Plugin, PostTool, PostToolAction,
    PostToolDecision, PreStep, PreStepDecision, PreTool, PreToolDecision, PromptSubmit, Role,
    StopEvent, ToolCall, ToolExecute, ToolGuard, ToolOutcome, TurnStopping, export, next,
};

/// The bytes to decode, read in order; past their end every read gives zero.
struct Bytes {
    bytes: Vec<u8>,
    at: usize,
}

impl Bytes {
    fn from_hex(hex: &str) -> Bytes {
        let digits: Vec<u8> = hex
            .bytes()
            .filter_map(|c| (c as char).to_digit(16).map(|d| d as u8))
            .collect();
        Bytes {
            bytes: digits
                .chunks(2)
                .map(|p| p[0] << 4 | p.get(1).copied().unwrap_or(0))
                .collect(),
            at: 0,
        }
    }

    fn byte(&mut self) -> u8 {
        let b = self.bytes.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    fn choice(&mut self, n: u8) -> u8 {
        self.byte() % n
    }

    /// A string: raw bytes (lossily UTF-8), a JSON text, or a huge repetition.
    fn string(&mut self) -> String {
        match self.choice(8) {
            0 => String::new(),
            1 => {
                // Past any sane answer bound: 32 KiB to 8 MiB.
                let size = (usize::from(self.byte()) + 1) * 32 * 1024;
                "x".repeat(size)
            }
            2 => format!("{{\"k\": {}}}", self.byte()),
            3 => "[1, 2, {\"a\": null}]".into(),
            _ => {
                let len = usize::from(self.byte());
                let raw: Vec<u8> = (0..len).map(|_| self.byte()).collect();
                String::from_utf8_lossy(&raw).into_owned()
            }
        }
    }

    fn strings(&mut self) -> Vec<String> {
        let len = match self.choice(8) {
            // Many empty elements: a list that is large to the host, small to the guest.
            0 => usize::from(self.byte()) * 4096,
            n => usize::from(n) - 1,
        };
        (0..len)
            .map(|_| {
                if len > 64 {
                    String::new()
                } else {
                    self.string()
                }
            })
            .collect()
    }

    fn deny(&mut self) -> Deny {
        Deny {
            reason_code: self.string(),
            message: self.string(),
            payload: (self.choice(2) == 0).then(|| self.string()),
        }
    }

    fn blocks(&mut self) -> Vec<ContentBlock> {
        let len = usize::from(self.choice(6));
        (0..len)
            .map(|_| match self.choice(3) {
                0 => ContentBlock::Text(self.string()),
                1 => ContentBlock::Json(self.string()),
                _ => ContentBlock::Image(palisade_sdk::types::Image {
                    media_type: self.string(),
                    data: self.string().into_bytes(),
                }),
            })
            .collect()
    }

    fn outcome(&mut self) -> ToolOutcome {
        ToolOutcome {
            content_blocks: self.blocks(),
            is_error: self.choice(2) == 0,
            value: (self.choice(2) == 0).then(|| self.string()),
        }
    }
}

fn bytes_of(call: &ToolCall) -> Bytes {
    Bytes::from_hex(&call.arg_str("bytes").unwrap_or_default())
}

struct Arbitrary;

impl Plugin for Arbitrary {
    fn new(_config: &Config) -> Self {
        Arbitrary
    }
}

impl PreTool for Arbitrary {
    fn on_pre_tool(&mut self, call: ToolCall) -> PreToolDecision {
        let mut b = bytes_of(&call);
        match b.choice(3) {
            0 => PreToolDecision::Allow,
            1 => PreToolDecision::Deny(b.deny()),
            _ => PreToolDecision::Ask(Ask { reason: b.string() }),
        }
    }
}

impl ToolGuard for Arbitrary {
    fn on_tool_guard(&mut self, call: ToolCall) -> GuardDecision {
        let mut b = bytes_of(&call);
        b.at = 1;
        match b.choice(2) {
            0 => GuardDecision::Abstain,
            _ => GuardDecision::Deny(b.deny()),
        }
    }
}

impl PostTool for Arbitrary {
    fn on_post_tool(&mut self, call: ToolCall, _outcome: ToolOutcome) -> PostToolDecision {
        let mut b = bytes_of(&call);
        b.at = 2;
        let action = match b.choice(4) {
            0 => PostToolAction::Accept,
            1 => PostToolAction::Block(b.string()),
            2 => PostToolAction::ReplaceContent(b.blocks()),
            _ => PostToolAction::ReplaceValue(b.string()),
        };
        PostToolDecision {
            action,
            contexts: b.strings(),
        }
    }
}

impl ToolExecute for Arbitrary {
    fn on_tool_execute(&mut self, call: ToolCall) -> ToolOutcome {
        let mut b = bytes_of(&call);
        b.at = 3;
        match b.choice(3) {
            0 => next(None),
            1 => {
                let _ = next(None);
                b.outcome()
            }
            _ => b.outcome(),
        }
    }
}

impl PromptSubmit for Arbitrary {
    fn on_prompt_submit(&mut self, step: PreStep) -> PreStepDecision {
        let hex = step
            .messages
            .first()
            .map(|m| m.text.clone())
            .unwrap_or_default();
        let mut b = Bytes::from_hex(&hex);
        match b.choice(3) {
            0 => PreStepDecision::Enter(b.strings()),
            1 => PreStepDecision::EnterBatch(
                b.strings()
                    .into_iter()
                    .map(|text| Message {
                        // Any role: a reshaped batch of anything but the user's is invalid.
                        role: match text.len() % 3 {
                            0 => Role::User,
                            1 => Role::Assistant,
                            _ => Role::System,
                        },
                        text,
                    })
                    .collect(),
            ),
            _ => PreStepDecision::Reject(b.deny()),
        }
    }
}

impl TurnStopping for Arbitrary {
    fn on_turn_stopping(&mut self, event: StopEvent) -> Option<String> {
        let mut b = Bytes::from_hex(&event.last_assistant_message.unwrap_or_default());
        (b.choice(2) == 0).then(|| b.string())
    }
}

export!(Arbitrary: PreTool + ToolGuard + PostTool + ToolExecute + PromptSubmit + TurnStopping);
