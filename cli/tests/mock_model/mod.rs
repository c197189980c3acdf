//! A scripted stand-in for a model API on 127.0.0.1, enough for the real Claude Code, Codex and
//! Gemini CLIs to run one tool call offline: the first request is answered with a tool call,
//! the request that carries its result with a short text, and every request is recorded.
//!
//! Plain blocking HTTP/1.1, one thread per connection, `Connection: close` on every answer.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// The command that makes the model's API refuse every request the agent makes in its turn
/// (Anthropic: `400 invalid_request_error`): the turn ends in an API error.
pub const API_ERROR: &str = "@api-error";

/// Which API to imitate.
#[derive(Clone, Copy)]
pub enum Api {
    /// Anthropic Messages (`POST /v1/messages`, streamed), for Claude Code.
    Anthropic,
    /// OpenAI Responses (`POST /v1/responses`, streamed), for Codex.
    Responses,
    /// The Gemini API (`POST /v1beta/models/M:streamGenerateContent`), for Gemini CLI. Its
    /// "command" is the function call, as JSON: `{"name": "replace", "args": {…}}`.
    Gemini,
}

/// One request the mock received.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub body: Value,
}

pub struct MockModel {
    pub port: u16,
    api: Api,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl MockModel {
    /// Starts the mock; the model asks to run `command` in the shell (for the Anthropic API, a
    /// `command` that is a JSON object `{"name": …, "input": …}` is the tool call to make).
    pub fn start(api: Api, command: &str) -> MockModel {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().unwrap().port();
        let requests: Arc<Mutex<Vec<Recorded>>> = Arc::default();
        let recorded = requests.clone();
        let command = command.to_string();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let recorded = recorded.clone();
                let command = command.clone();
                std::thread::spawn(move || {
                    let _ = serve(stream, api, &command, &recorded);
                });
            }
        });
        MockModel {
            port,
            api,
            requests,
        }
    }

    /// The environment that points the agent of this API at the mock, offline and quiet.
    pub fn agent_env(&self) -> Vec<(&'static str, String)> {
        let url = format!("http://127.0.0.1:{}", self.port);
        let fixed = |pairs: &[(&'static str, &str)]| -> Vec<(&'static str, String)> {
            pairs.iter().map(|(k, v)| (*k, v.to_string())).collect()
        };
        match self.api {
            Api::Anthropic => {
                let mut env = fixed(&[
                    ("ANTHROPIC_API_KEY", "dummy"),
                    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
                    ("DISABLE_TELEMETRY", "1"),
                    ("DISABLE_AUTOUPDATER", "1"),
                    ("DISABLE_ERROR_REPORTING", "1"),
                ]);
                env.push(("ANTHROPIC_BASE_URL", url));
                env
            }
            Api::Gemini => {
                // One process: no relaunched child outliving the run.
                let mut env = fixed(&[
                    ("GEMINI_API_KEY", "mock-key"),
                    ("GEMINI_CLI_NO_RELAUNCH", "true"),
                    ("TERM", "dumb"),
                ]);
                env.push(("GOOGLE_GEMINI_BASE_URL", url));
                env
            }
            // Codex reads its provider's URL from its config.
            Api::Responses => fixed(&[("MOCK_API_KEY", "dummy")]),
        }
    }

    /// The model requests received (those that offered tools), in order.
    pub fn model_requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve(
    stream: TcpStream,
    api: Api,
    command: &str,
    recorded: &Mutex<Vec<Recorded>>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let mut length = 0usize;
    let mut chunked = false;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header)?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':').unwrap_or((header, ""));
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().unwrap_or(0),
            "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
            _ => {}
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
                .unwrap_or(0);
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);

    if method == "HEAD" || method == "GET" {
        return respond(&mut out, 200, "application/json", "{}");
    }
    let offers_tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
    match api {
        Api::Anthropic
            if path.starts_with("/v1/messages") && offers_tools && command == API_ERROR =>
        {
            recorded
                .lock()
                .unwrap()
                .push(Recorded { body: body.clone() });
            let error = json!({"type": "error", "error": {
                "type": "invalid_request_error", "message": "mock: this request is refused"}});
            respond(&mut out, 400, "application/json", &error.to_string())
        }
        Api::Anthropic if path.starts_with("/v1/messages") && !path.contains("count_tokens") => {
            if offers_tools {
                recorded
                    .lock()
                    .unwrap()
                    .push(Recorded { body: body.clone() });
            }
            // A tool result since the model's last turn (Claude Code may put a `system`
            // message after it).
            let messages = body["messages"].as_array().cloned().unwrap_or_default();
            let since = messages
                .iter()
                .rposition(|m| m["role"] == "assistant")
                .map_or(0, |at| at + 1);
            let tool_ran = messages[since..].iter().any(|m| {
                m["content"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"))
            });
            if body["stream"] != true {
                let message = json!({
                    "id": "msg_mock", "type": "message", "role": "assistant",
                    "model": body["model"], "content": [{"type": "text", "text": "ok"}],
                    "stop_reason": "end_turn", "stop_sequence": null,
                    "usage": {"input_tokens": 1, "output_tokens": 1},
                });
                return respond(&mut out, 200, "application/json", &message.to_string());
            }
            let events = if offers_tools && !tool_ran {
                anthropic_stream(&body, Some(&scripted(command, &body)))
            } else {
                anthropic_stream(&body, None)
            };
            respond(&mut out, 200, "text/event-stream", &events)
        }
        Api::Anthropic if path.contains("count_tokens") => {
            respond(&mut out, 200, "application/json", r#"{"input_tokens": 10}"#)
        }
        Api::Responses if path.ends_with("/responses") => {
            recorded
                .lock()
                .unwrap()
                .push(Recorded { body: body.clone() });
            let tool_ran = body["input"].as_array().is_some_and(|items| {
                items.iter().any(|i| {
                    i["type"] == "function_call_output" || i["type"] == "custom_tool_call_output"
                })
            });
            let item = if tool_ran {
                json!({"type": "message", "role": "assistant", "id": "msg_done",
                       "content": [{"type": "output_text", "text": "done"}]})
            } else if command.starts_with("*** Begin Patch") {
                // A patch: Codex's freeform `apply_patch` tool, its input the patch itself.
                json!({"type": "custom_tool_call", "call_id": "call_mock_1", "name": "apply_patch",
                       "input": command})
            } else {
                json!({"type": "function_call", "call_id": "call_mock_1", "name": "exec_command",
                       "arguments": json!({"cmd": command}).to_string()})
            };
            let events = [
                json!({"type": "response.created", "response": {"id": "resp_mock"}}),
                json!({"type": "response.output_item.done", "item": item}),
                json!({"type": "response.completed", "response": {"id": "resp_mock", "usage": {
                    "input_tokens": 10, "input_tokens_details": null, "output_tokens": 5,
                    "output_tokens_details": null, "total_tokens": 15}}}),
            ];
            respond(&mut out, 200, "text/event-stream", &sse(&events))
        }
        Api::Gemini if path.contains(":countTokens") => {
            respond(&mut out, 200, "application/json", r#"{"totalTokens": 100}"#)
        }
        Api::Gemini if path.contains("enerateContent") => {
            recorded
                .lock()
                .unwrap()
                .push(Recorded { body: body.clone() });
            let answer = gemini_answer(&body, command);
            if path.contains(":streamGenerateContent") {
                respond(
                    &mut out,
                    200,
                    "text/event-stream",
                    &format!("data: {answer}\r\n\r\n"),
                )
            } else {
                respond(&mut out, 200, "application/json", &answer.to_string())
            }
        }
        _ => respond(
            &mut out,
            404,
            "application/json",
            r#"{"error":"not mocked"}"#,
        ),
    }
}

/// A Gemini answer: a JSON-mode utility call (a router, an edit fixer) gets an instance of its
/// schema; a turn whose last content answers a function call gets "done"; else `call`.
fn gemini_answer(request: &Value, call: &str) -> Value {
    let config = &request["generationConfig"];
    let schema = config
        .get("responseJsonSchema")
        .or_else(|| config.get("responseSchema"));
    let part = if schema.is_some() || config["responseMimeType"] == "application/json" {
        json!({ "text": schema.map(|s| instance(s, "")).unwrap_or(json!({})).to_string() })
    } else {
        let answered = request["contents"]
            .as_array()
            .and_then(|c| c.last())
            .and_then(|c| c["parts"].as_array())
            .is_some_and(|parts| parts.iter().any(|p| p.get("functionResponse").is_some()));
        if answered {
            json!({ "text": "done" })
        } else {
            json!({ "functionCall": serde_json::from_str::<Value>(call).expect("the call is JSON") })
        }
    };
    json!({
        "candidates": [{ "content": { "role": "model", "parts": [part] }, "finishReason": "STOP", "index": 0 }],
        "usageMetadata": { "promptTokenCount": 100, "candidatesTokenCount": 5, "totalTokenCount": 105 },
    })
}

/// A small valid instance of a JSON schema.
fn instance(schema: &Value, key: &str) -> Value {
    if key == "next_speaker" {
        return json!("user");
    }
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    let kind = match &schema["type"] {
        Value::Array(kinds) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|k| *k != "null")
            .unwrap_or("object")
            .to_ascii_lowercase(),
        Value::String(kind) => kind.to_ascii_lowercase(),
        _ => "object".into(),
    };
    match kind.as_str() {
        "object" => Value::Object(
            schema["properties"]
                .as_object()
                .map(|p| p.iter().map(|(k, v)| (k.clone(), instance(v, k))).collect())
                .unwrap_or_default(),
        ),
        "array" => json!([]),
        "number" | "integer" => schema.get("minimum").cloned().unwrap_or(json!(1)),
        "boolean" => json!(false),
        _ => json!("mock"),
    }
}

fn sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect()
}

/// The call to answer `request` with: `command` itself, unless it is a JSON array of calls,
/// each `{"when": TEXT, "name": …, "input": …}`: then the first whose `when` is in the
/// conversation's first message (a call without one matches any). A sub-agent's
/// conversation is told from its parent's so: its prompt is its first message.
fn scripted(command: &str, request: &Value) -> String {
    let Ok(Value::Array(calls)) = serde_json::from_str::<Value>(command) else {
        return command.to_string();
    };
    let messages = request["messages"][0].to_string();
    calls
        .iter()
        .find(|call| {
            call["when"]
                .as_str()
                .is_none_or(|when| messages.contains(when))
        })
        .map(|call| json!({"name": call["name"], "input": call["input"]}).to_string())
        .unwrap_or_else(|| panic!("no scripted call answers {messages}"))
}

/// A streamed Messages answer: a `Bash` tool call running `command`, or the text "done".
fn anthropic_stream(request: &Value, command: Option<&str>) -> String {
    let start = json!({"type": "message_start", "message": {
        "id": "msg_mock", "type": "message", "role": "assistant", "model": request["model"],
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 10, "output_tokens": 1}}});
    // A "command" that is a JSON object is the tool call itself: `{"name": …, "input": …}`.
    let call = command.map(|command| match serde_json::from_str::<Value>(command) {
        Ok(call) if call.is_object() => (call["name"].clone(), call["input"].clone()),
        _ => (
            json!("Bash"),
            json!({"command": command, "description": "write marker"}),
        ),
    });
    let (block, delta, stop_reason) = match call {
        Some((name, input)) => (
            json!({"type": "tool_use", "id": "toolu_mock_1", "name": name, "input": {}}),
            json!({"type": "input_json_delta", "partial_json": input.to_string()}),
            "tool_use",
        ),
        None => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": "done"}),
            "end_turn",
        ),
    };
    sse(&[
        start,
        json!({"type": "content_block_start", "index": 0, "content_block": block}),
        json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
               "usage": {"output_tokens": 5}}),
        json!({"type": "message_stop"}),
    ])
}

fn respond(
    out: &mut TcpStream,
    status: u16,
    content_type: &str,
    body: &str,
) -> std::io::Result<()> {
    let reason = if status == 200 { "OK" } else { "Not Found" };
    write!(
        out,
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )?;
    out.flush()
}
