//! The scripted test guest's twin for the command and HTTP runtimes: the same `[config]`
//! keys give the same decisions (`pre_tool = "deny"`, `contexts`, `tag`, ...), answered in
//! Claude Code's hook protocol, or in Palisade's own when the input says it is of it. The
//! `scripted-hook` binary serves the command runtime; [`HookServer`] serves the HTTP runtime
//! on 127.0.0.1.
//!
//! External-only behaviours (`pre_tool` =): `exit-2` (blocking exit, reason on stderr),
//! `exit-1`, `invalid-json`, `patches` (a legacy rewrite), `rewrite` (`updatedInput`),
//! `unknown-field`, `projection` (the serialize-only `prompt` / `content` / `error` sent
//! back), `huge` (a 1 MiB answer), `status-500` (HTTP only).

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};

/// What the hook does with one input.
#[derive(Debug)]
pub struct Behaviour {
    /// The exit status (the HTTP runtime answers 200 for 0, 500 otherwise).
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
    /// Sleep this long before answering.
    pub sleep_ms: u64,
}

fn config<'a>(input: &'a Value, key: &str) -> Option<&'a str> {
    input["config"][key].as_str()
}

fn contexts(input: &Value) -> Option<String> {
    let list: Vec<&str> = input["config"]["contexts"]
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    (!list.is_empty()).then(|| list.join("\n\n"))
}

/// The behaviours every protocol shares: sleeping (then answering), and the ways of not
/// answering at all. `Err` is the whole behaviour.
fn common(chosen: &str, tool: &str, behaviour: &mut Behaviour) -> Result<(), ()> {
    match chosen {
        "sleep" => behaviour.sleep_ms = 30_000,
        "panic" => {
            behaviour.exit_code = 101;
            behaviour.stderr = "scripted panic".into();
            return Err(());
        }
        "exit-2" => {
            behaviour.exit_code = 2;
            behaviour.stderr = format!("blocked {tool} by exit status 2");
            return Err(());
        }
        "exit-1" => {
            behaviour.exit_code = 1;
            behaviour.stderr = "something broke".into();
            return Err(());
        }
        "status-500" => {
            behaviour.exit_code = 500;
            return Err(());
        }
        "invalid-json" => {
            behaviour.stdout = "{not json".into();
            return Err(());
        }
        "huge" => {
            behaviour.stdout = format!("{{\"systemMessage\": \"{}\"}}", "x".repeat(1 << 20));
            return Err(());
        }
        _ => {}
    }
    Ok(())
}

/// The scripted behaviour for `input` (the JSON a command reads on stdin), in the protocol
/// the input is of: Claude Code's, or Palisade's own (`"protocol": "palisade/0.1"`).
pub fn behave(input: &Value) -> Behaviour {
    if input["protocol"] == "palisade/0.1" {
        return behave_natively(input);
    }
    let point = input["point"].as_str().unwrap_or_default();
    let event = input["hook_event_name"].clone();
    let tool = input["tool_name"].as_str().unwrap_or_default();
    let mut answer = json!({});
    let mut behaviour = Behaviour {
        exit_code: 0,
        stdout: String::new(),
        stderr: String::new(),
        sleep_ms: 0,
    };
    let specific = |fields: Value| {
        let mut object = json!({ "hookEventName": event });
        for (k, v) in fields.as_object().unwrap() {
            object[k] = v.clone();
        }
        object
    };
    let key = point.replace('-', "_");
    let chosen = config(input, &key).unwrap_or("");
    if common(chosen, tool, &mut behaviour).is_err() {
        return behaviour;
    }
    match (point, chosen) {
        (_, "patches") => {
            answer["patches"] = json!([{ "op": "replace", "path": "/command", "value": "ls" }])
        }
        (_, "unknown-field") => answer["verdict"] = "allow".into(),
        // The serialize-only projections, sent back as if they were authority.
        (_, "projection") => {
            answer["prompt"] = "a rewritten prompt".into();
            answer["content"] = "a rewritten result".into();
            answer["error"] = "".into();
        }
        (_, "rewrite") => {
            answer["hookSpecificOutput"] = specific(json!({ "updatedInput": { "command": "ls" } }))
        }
        ("pre-tool", "deny") => {
            answer["hookSpecificOutput"] = specific(json!({
                "permissionDecision": "deny",
                "permissionDecisionReason": format!("denied {tool}"),
            }))
        }
        ("pre-tool", "ask") => {
            answer["hookSpecificOutput"] = specific(json!({
                "permissionDecision": "ask",
                "permissionDecisionReason": format!("may {tool} run?"),
            }))
        }
        ("tool-guard", "deny") => {
            answer["hookSpecificOutput"] = specific(json!({
                "permissionDecision": "deny",
                "permissionDecisionReason": format!("{tool} is never allowed"),
            }))
        }
        ("prompt-submit", "reject") => {
            answer["decision"] = "block".into();
            answer["reason"] = "rejected the step".into();
        }
        ("post-tool", "block") => {
            answer["decision"] = "block".into();
            answer["reason"] = format!(
                "blocked {tool}: {}",
                input["content"].as_str().unwrap_or_default()
            )
            .into();
        }
        ("turn-stopping", "steer") => {
            answer["decision"] = "block".into();
            answer["reason"] = format!("keep going (turn {})", input["turn"]).into();
        }
        _ => {}
    }
    match point {
        "session-start" => {
            if let Some(contexts) = contexts(input) {
                // As the scripted guest: each context tagged with the source.
                let source = input["source"].as_str().unwrap_or_default();
                let mut source = source.to_string();
                if let Some(first) = source.get_mut(..1) {
                    first.make_ascii_uppercase();
                }
                let tagged: Vec<String> = contexts
                    .split("\n\n")
                    .map(|c| format!("{c} (SessionSource::{source})"))
                    .collect();
                answer["hookSpecificOutput"] =
                    specific(json!({ "additionalContext": tagged.join("\n\n") }));
            }
        }
        "prompt-submit" | "post-tool" if answer.get("hookSpecificOutput").is_none() => {
            if let Some(contexts) = contexts(input) {
                answer["hookSpecificOutput"] = specific(json!({ "additionalContext": contexts }));
            }
        }
        _ => {}
    }
    if let Some(tag) = config(input, "tag") {
        answer["systemMessage"] = tag.into();
    }
    behaviour.stdout = answer.to_string();
    behaviour
}

/// [`behave`] in the palisade protocol: the same decisions, read from the typed input and
/// answered as `{"decision": …}`.
fn behave_natively(input: &Value) -> Behaviour {
    let point = input["point"].as_str().unwrap_or_default();
    let typed = &input["input"];
    let tool = typed["call"]["name"].as_str().unwrap_or_default();
    let mut behaviour = Behaviour {
        exit_code: 0,
        stdout: String::new(),
        stderr: String::new(),
        sleep_ms: 0,
    };
    let chosen = config(input, &point.replace('-', "_"))
        .unwrap_or("")
        .to_string();
    if common(&chosen, tool, &mut behaviour).is_err() {
        return behaviour;
    }
    let listed: Vec<String> = contexts(input)
        .map(|c| c.split("\n\n").map(str::to_string).collect())
        .unwrap_or_default();
    let deny = |message: String| json!({ "reason_code": "scripted", "message": message });
    let decision = match (point, chosen.as_str()) {
        (_, "patches") => {
            behaviour.stdout = json!({ "patches": [{ "op": "replace" }] }).to_string();
            return behaviour;
        }
        (_, "unknown-field") => {
            behaviour.stdout = json!({ "decision": null, "verdict": "allow" }).to_string();
            return behaviour;
        }
        (_, "projection") => {
            behaviour.stdout = json!({
                "decision": null,
                "prompt": "a rewritten prompt",
                "content": "a rewritten result",
            })
            .to_string();
            return behaviour;
        }
        // An allow that rewrites the input: no decision has that form.
        (_, "rewrite") => json!({ "allow": { "command": "ls" } }),
        ("pre-tool", "deny") => {
            let mut d = deny(format!("denied {tool}"));
            d["payload"] = json!({ "tool": tool });
            json!({ "deny": d })
        }
        ("pre-tool", "ask") => json!({ "ask": { "reason": format!("may {tool} run?") } }),
        ("tool-guard", "deny") => json!({ "deny": deny(format!("{tool} is never allowed")) }),
        ("prompt-submit", "reject") => json!({ "reject": deny("rejected the step".into()) }),
        ("prompt-submit", _) => json!({ "enter": listed }),
        ("post-tool", "block") => json!({
            "action": { "block": format!(
                "blocked {tool}: {}",
                typed["outcome"]["content"].as_str().unwrap_or_default()
            ) },
            "contexts": listed,
        }),
        ("post-tool", _) => json!({ "action": "accept", "contexts": listed }),
        ("turn-stopping", "steer") => {
            json!(format!("keep going (turn {})", typed["event"]["turn"]))
        }
        ("session-start", _) => {
            let mut source = typed["source"].as_str().unwrap_or_default().to_string();
            if let Some(first) = source.get_mut(..1) {
                first.make_ascii_uppercase();
            }
            json!(
                listed
                    .iter()
                    .map(|c| format!("{c} (SessionSource::{source})"))
                    .collect::<Vec<_>>()
            )
        }
        _ => Value::Null,
    };
    behaviour.stdout = json!({ "decision": decision }).to_string();
    behaviour
}

/// An HTTP hook endpoint on 127.0.0.1 answering with [`behave`]; runs until the process
/// exits.
#[derive(Debug)]
pub struct HookServer {
    /// The URL to put in a manifest.
    pub url: String,
}

impl HookServer {
    /// Starts a server.
    pub fn start() -> HookServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let _ = serve(stream);
                });
            }
        });
        HookServer { url }
    }
}

fn serve(stream: TcpStream) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut length = 0;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header)?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let input: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let behaviour = behave(&input);
    if behaviour.sleep_ms > 0 {
        std::thread::sleep(std::time::Duration::from_millis(behaviour.sleep_ms));
    }
    let (status, body) = match behaviour.exit_code {
        0 => ("200 OK", behaviour.stdout),
        _ => ("500 Internal Server Error", behaviour.stderr),
    };
    write!(
        out,
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )?;
    out.flush()
}
