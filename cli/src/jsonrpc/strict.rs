//! Reading a peer's message so that every parser reads it alike, and writing the message that
//! was judged (docs/bridges.md, "What each front door judges and forwards").
//!
//! A proxy that judges a parsed message must forward that message, never the peer's bytes:
//! another parser may read those bytes differently. So a line is refused when parsers in use
//! disagree on it:
//!
//! - a raw control byte (a bare carriage return splits the line for a reader with universal
//!   newlines, as the official Python MCP SDK reads stdin);
//! - two keys of one object that are equal, or equal under case folding (Go's
//!   `encoding/json` matches keys case-insensitively, and the last one wins);
//! - a key written as a protocol key in another case (`Method`), or holding `ſ` or `K`,
//!   which case folding turns into ASCII letters;
//! - a batch, a method or id of the wrong type, a message that is neither a request, a
//!   notification nor a response.
//!
//! What passes is forwarded as [`encode`] writes it: one line, with every line separator that
//! a reader could split on escaped.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// JSON-RPC's code for a message that is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's code for a message that is not a valid request.
pub const INVALID_REQUEST: i64 = -32600;

/// Keys that a judged message's meaning depends on: the envelope's, and those of the
/// parameters the proxies judge. One of them spelled in another case is refused wherever it
/// appears, since a case-insensitive reader takes it for the key itself.
const PROTOCOL_KEYS: &[&str] = &[
    // JSON-RPC.
    "jsonrpc",
    "id",
    "method",
    "params",
    "result",
    "error",
    // MCP `tools/call`, its cancellation and its answer.
    "name",
    "arguments",
    "_meta",
    "requestId",
    "content",
    "structuredContent",
    "isError",
    // ACP prompts, permission requests and client-side tools.
    "sessionId",
    "prompt",
    "toolCall",
    "toolCallId",
    "options",
    "path",
    "command",
    "args",
    "env",
    "cwd",
    "terminalId",
    // What the shipped guards read of a tool's arguments.
    "file_path",
    "url",
];

/// Why a line is not passed on: the JSON-RPC error to answer its sender with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The JSON-RPC error code.
    pub code: i64,
    /// What is wrong, for the sender.
    pub why: String,
}

impl Refusal {
    fn invalid(why: impl Into<String>) -> Refusal {
        Refusal {
            code: INVALID_REQUEST,
            why: why.into(),
        }
    }
}

/// What a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A request: a method and an id.
    Request,
    /// A notification: a method, no id.
    Notification,
    /// A response: an id and a result or an error, no method.
    Response,
}

/// A peer's message, read strictly.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// The message as judged and as it is forwarded.
    pub value: Value,
    /// What it is.
    pub kind: Kind,
}

impl Message {
    /// Its method (empty for a response).
    pub fn method(&self) -> &str {
        self.value["method"].as_str().unwrap_or_default()
    }

    /// Its id (`Null` for a notification).
    pub fn id(&self) -> &Value {
        &self.value["id"]
    }
}

/// Reads `line` as one JSON-RPC message, or refuses it (see the module's rules).
pub fn read(line: &str) -> Result<Message, Refusal> {
    read_with(line, b"\t")
}

/// Reads an HTTP body as one JSON-RPC message: as [`read`], but a body may hold line breaks
/// as JSON's whitespace (nobody splits a body into lines, and what is forwarded has none).
pub fn read_body(body: &str) -> Result<Message, Refusal> {
    read_with(body, b"\t\n\r")
}

fn read_with(line: &str, whitespace: &[u8]) -> Result<Message, Refusal> {
    if let Some(byte) = line.bytes().find(|b| *b < 0x20 && !whitespace.contains(b)) {
        return Err(Refusal::invalid(format!(
            "the line holds the raw control byte 0x{byte:02x} (a reader may split the line \
             there): escape it inside a string, or leave it out"
        )));
    }
    let value = parse(line).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => Refusal::invalid(e.to_string()),
        _ => Refusal {
            code: PARSE_ERROR,
            why: format!("not JSON: {e}"),
        },
    })?;
    let object = match &value {
        Value::Object(object) => object,
        Value::Array(_) => {
            return Err(Refusal::invalid(
                "one JSON-RPC message per line, not a batch: a batch could hide a call from \
                 the hooks",
            ));
        }
        _ => return Err(Refusal::invalid("a JSON-RPC message is a JSON object")),
    };
    let kind = kind_of(object)?;
    Ok(Message { value, kind })
}

/// The message as one line for the other side: what was judged, with U+2028, U+2029 and
/// U+0085 escaped (readers that split lines on them exist; JSON allows them raw only inside
/// strings, where the escape means the same).
pub fn encode(value: &Value) -> String {
    // Straight into a buffer (`Display` goes through a formatter, a third slower).
    let text = serde_json::to_string(value).expect("a JSON value serializes");
    // U+0085 is C2 85 in UTF-8, U+2028 and U+2029 are E2 80 A8 and E2 80 A9: a text without
    // those lead bytes has none of them.
    if !text.bytes().any(|b| b == 0xc2 || b == 0xe2)
        || !text.contains(['\u{2028}', '\u{2029}', '\u{85}'])
    {
        return text;
    }
    text.replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
        .replace('\u{85}', "\\u0085")
}

fn kind_of(object: &Map<String, Value>) -> Result<Kind, Refusal> {
    let id = match object.get("id") {
        None => None,
        Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => Some(id),
        Some(_) => return Err(Refusal::invalid("an id is a string or a number")),
    };
    let answer = object.contains_key("result") || object.contains_key("error");
    match object.get("method") {
        Some(Value::String(_)) if answer => Err(Refusal::invalid(
            "a message with a method carries no result or error",
        )),
        Some(Value::String(_)) => Ok(match id {
            Some(Value::Null) => return Err(Refusal::invalid("a request's id is not null")),
            Some(_) => Kind::Request,
            None => Kind::Notification,
        }),
        Some(_) => Err(Refusal::invalid("a method is a string")),
        None if object.contains_key("result") == object.contains_key("error") => Err(
            Refusal::invalid("a response carries exactly one of result and error"),
        ),
        None if id.is_none() => Err(Refusal::invalid("a response carries the request's id")),
        None => Ok(Kind::Response),
    }
}

/// `line` as JSON, with every object's keys checked. A string escape of a lone UTF-16
/// surrogate, which JSON.parse takes and serde_json refuses, is read as U+FFFD (see
/// [`super::parse`]).
fn parse(line: &str) -> serde_json::Result<Value> {
    serde_json::from_str::<Strict>(line)
        .or_else(|e| match without_lone_surrogates(line) {
            Some(fixed) => serde_json::from_str(&fixed),
            None => Err(e),
        })
        .map(|strict| strict.0)
}

/// `line` with every escape of a lone surrogate replaced by `\\ufffd`; `None` if it has none.
pub fn without_lone_surrogates(line: &str) -> Option<String> {
    let escape = |at: usize| -> Option<u16> {
        let hex = line.get(at + 2..at + 6)?;
        (line.as_bytes().get(at + 1) == Some(&b'u'))
            .then(|| u16::from_str_radix(hex, 16).ok())
            .flatten()
    };
    let bytes = line.as_bytes();
    let mut fixed = String::with_capacity(line.len());
    let (mut copied, mut i, mut changed) = (0, 0, false);
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        match escape(i) {
            Some(high @ 0xD800..=0xDBFF) => {
                let paired = escape(i + 6).is_some_and(|low| (0xDC00..=0xDFFF).contains(&low))
                    && bytes.get(i + 6) == Some(&b'\\');
                if !paired {
                    let _ = high;
                    fixed.push_str(&line[copied..i]);
                    fixed.push_str("\\ufffd");
                    copied = i + 6;
                    changed = true;
                }
                i += if paired { 12 } else { 6 };
            }
            Some(0xDC00..=0xDFFF) => {
                fixed.push_str(&line[copied..i]);
                fixed.push_str("\\ufffd");
                copied = i + 6;
                changed = true;
                i += 6;
            }
            Some(_) => i += 6,
            // Any other escape (`\\\\` included): its two characters.
            None => i += 2,
        }
    }
    fixed.push_str(&line[copied.min(line.len())..]);
    changed.then_some(fixed)
}

/// The start of a line, for an error message about it.
pub fn truncate(line: &str) -> String {
    let mut end = line.len().min(200);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    line[..end].to_string()
}

/// A key as a case-insensitive reader compares it: each character lower-cased, upper-cased,
/// then lower-cased (so `ſ` is `s`, `K` is `k`, `ς` is `σ`, and `ẞ` is `ss` as `ß` is: its
/// upper case is itself).
pub fn fold(key: &str) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    if key.is_ascii() {
        return match key.bytes().any(|b| b.is_ascii_uppercase()) {
            true => Cow::Owned(key.to_ascii_lowercase()),
            false => Cow::Borrowed(key),
        };
    }
    Cow::Owned(
        key.chars()
            .flat_map(char::to_lowercase)
            .flat_map(char::to_uppercase)
            .flat_map(char::to_lowercase)
            .collect(),
    )
}

/// Why `key`, folded `folded`, may not stand in `object` (the keys before it; those that fold
/// to something other than themselves are also in `seen`, folded), if it may not.
fn ambiguous(
    key: &str,
    folded: &str,
    object: &Map<String, Value>,
    seen: &[String],
) -> Option<String> {
    let shown = || crate::output::printable(&truncate(key)).into_owned();
    if key.contains(['\u{17f}', '\u{212a}']) {
        return Some(format!(
            "the key `{}` holds `ſ` or `K`, which case-insensitive readers take for an ASCII \
             letter",
            shown()
        ));
    }
    if object.contains_key(folded) || seen.iter().any(|s| s == folded) {
        return Some(format!(
            "the key `{}` appears twice in one object (or twice in different cases): readers \
             disagree on which one counts",
            shown()
        ));
    }
    if key != folded
        && let Some(protocol) = PROTOCOL_KEYS.iter().find(|p| **p == folded)
    {
        return Some(format!(
            "the key `{}` is `{protocol}` in another case: case-insensitive readers take it \
             for `{protocol}`",
            shown()
        ));
    }
    None
}

/// A JSON value whose objects have no ambiguous keys.
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Strict, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Strict(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        // The folds of the keys that are not their own fold; the others are `object`'s keys.
        let mut seen: Vec<String> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let folded = fold(&key);
            if let Some(why) = ambiguous(&key, &folded, &object, &seen) {
                return Err(de::Error::custom(why));
            }
            if let std::borrow::Cow::Owned(folded) = folded {
                seen.push(folded);
            }
            let Strict(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(line: &str) -> Refusal {
        read(line).expect_err(line)
    }

    #[test]
    fn a_key_in_another_case_or_twice_is_refused_at_any_depth() {
        let hidden =
            r#"{"jsonrpc":"2.0","id":4,"method":"ping","Method":"tools/call","params":{}}"#;
        assert!(
            refused(hidden).why.contains("`Method`"),
            "{:?}",
            refused(hidden)
        );
        let twice = r#"{"jsonrpc":"2.0","id":4,"method":"ping","method":"tools/call"}"#;
        assert!(refused(twice).why.contains("twice"));
        let alone = r#"{"jsonrpc":"2.0","id":4,"Method":"tools/call","params":{}}"#;
        assert!(refused(alone).why.contains("another case"));
        let deep = r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"w","arguments":{"path":"a","PATH":"/etc/shadow"}}}"#;
        assert!(refused(deep).why.contains("twice"));
        let kelvin = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"w\",\"argumentſ\":{}}}";
        assert!(refused(kelvin).why.contains("ſ"));
        // `ẞ` folds to `ß`, which folds to `ss`: Go's `encoding/json` takes one for the other.
        let sharp = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"w\",\"arguments\":{\"straße\":\"a\",\"straẞe\":\"b\"}}}";
        assert!(refused(sharp).why.contains("twice"), "{:?}", read(sharp));
        // Keys that merely look alike in other ways are fine.
        let fine = r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"w","arguments":{"Note":1,"note_":2}}}"#;
        assert_eq!(read(fine).unwrap().kind, Kind::Request);
    }

    #[test]
    fn a_bare_carriage_return_or_another_control_byte_is_refused() {
        let hidden = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"x\":\r{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\"}\r}}";
        assert_eq!(refused(hidden).code, INVALID_REQUEST);
        assert!(refused(hidden).why.contains("0x0d"));
        assert!(
            refused("{\"jsonrpc\":\"2.0\",\u{c}\"method\":\"ping\"}")
                .why
                .contains("0x0c")
        );
        // A tab is JSON's whitespace and no reader's line break.
        assert!(read("{\"jsonrpc\":\"2.0\",\t\"method\":\"ping\"}").is_ok());
    }

    #[test]
    fn a_message_is_a_request_a_notification_or_a_response() {
        let kind = |line: &str| read(line).map(|m| m.kind);
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":"a","method":"x"}"#),
            Ok(Kind::Request)
        );
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","method":"x"}"#),
            Ok(Kind::Notification)
        );
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Ok(Kind::Response)
        );
        for bad in [
            r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call"}]"#,
            r#"{"jsonrpc":"2.0","id":1,"method":5}"#,
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0","result":{}}"#,
            r#""x""#,
        ] {
            assert_eq!(refused(bad).code, INVALID_REQUEST, "{bad}");
        }
        assert_eq!(refused("{not json").code, PARSE_ERROR);
    }

    #[test]
    fn a_number_is_read_as_the_double_it_names_and_forwarded_so() {
        // Rounded "best effort" (serde_json without `float_roundtrip`), the first was judged
        // as -1.2345678901334567e19, and its forwarded text read back as -1.2345678901334569e19.
        for number in [
            "-12345678901334567890",
            "0.943156380636856200160260252e-64",
            "8.1194671313252416128509955403715296436359990663924688044181e183",
        ] {
            let line = format!(r#"{{"jsonrpc":"2.0","method":"m","params":{{"n":{number}}}}}"#);
            let message = read(&line).unwrap();
            let judged = message.value["params"]["n"].as_f64();
            assert_eq!(judged, number.parse().ok(), "{number}");
            let sent = encode(&message.value);
            assert_eq!(read(&sent).unwrap(), message, "{sent}");
        }
    }

    #[test]
    fn what_is_forwarded_reads_back_as_what_was_judged() {
        let line = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"t\":\"a\u{2028}b\u{85}c\",\"s\":\"\\ud800\"}}";
        let message = read(line).unwrap();
        let sent = encode(&message.value);
        assert!(!sent.contains(['\u{2028}', '\u{85}']), "{sent}");
        assert_eq!(serde_json::from_str::<Value>(&sent).unwrap(), message.value);
        assert_eq!(message.value["params"]["s"], "\u{fffd}");
    }
}
