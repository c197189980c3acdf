//! A reader that takes what other SDKs take, as they take it: the other side of the
//! differential. What the proxies forward must read, here too, as exactly the message they
//! judged.
//!
//! - Lines are split as a reader with universal newlines splits them (`\r`, `\n`, `\r\n`: the
//!   official Python MCP SDK reads stdin so) and, with [`Breaks::Unicode`], also where Python's
//!   `str.splitlines` splits (`\v`, `\f`, `\x1c`-`\x1e`, U+0085, U+2028, U+2029; Java's
//!   `Scanner` splits on the last three too). Each piece is read as a line of its own.
//! - Object keys are matched case-insensitively, as Go's `encoding/json` matches a key to a
//!   struct field: two keys equal under Unicode simple case folding are one key (`ſ` is `s`,
//!   `K` is `k`), and the last one wins.
//! - A string escape of a lone UTF-16 surrogate reads as U+FFFD (as Go and `JSON.parse`
//!   followed by a UTF-8 encoder take it).
//! - A number is an IEEE double, rounded correctly (Go's `float64`, JavaScript's `Number`).

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

/// A JSON value as the lenient reader holds it: keys folded, numbers as doubles.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Json>),
    /// Keys folded ([`fold`]); of keys that fold alike, the last one's value.
    Object(BTreeMap<String, Json>),
}

/// One line as the lenient reader reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// The value.
    pub value: Json,
    /// How many keys repeated a key of their object exactly (before folding).
    pub duplicate_keys: usize,
}

/// Where a reader splits lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Breaks {
    /// `\r`, `\n`, `\r\n`, and the ASCII separators `str.splitlines` adds (`\v`, `\f`,
    /// `\x1c`-`\x1e`).
    Ascii,
    /// [`Breaks::Ascii`], and U+0085, U+2028 and U+2029.
    Unicode,
}

/// The lines of `text` that are not blank, each read as JSON (`Err`: a line no reader takes
/// for a message, which a reader such as the Python SDK skips).
pub fn read_lines(text: &str, breaks: Breaks) -> Vec<Result<Reading, String>> {
    lines(text, breaks)
        .into_iter()
        .filter(|line| !line.bytes().all(|b| matches!(b, b' ' | b'\t')))
        .map(read)
        .collect()
}

/// `text` split into lines where `breaks` says (`\r\n` is one break).
pub fn lines(text: &str, breaks: Breaks) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let ascii = matches!(c, '\n' | '\r' | '\u{b}' | '\u{c}' | '\u{1c}'..='\u{1e}');
        let unicode = matches!(c, '\u{85}' | '\u{2028}' | '\u{2029}');
        if !(ascii || (unicode && breaks == Breaks::Unicode)) {
            continue;
        }
        lines.push(&text[start..at]);
        start = at + c.len_utf8();
        if c == '\r' && chars.peek().map(|(_, c)| *c) == Some('\n') {
            chars.next();
            start += 1;
        }
    }
    lines.push(&text[start..]);
    lines
}

/// `text` as one JSON value, with JSON's whitespace around it.
pub fn read(text: &str) -> Result<Reading, String> {
    let mut parser = Parser {
        text: text.as_bytes(),
        at: 0,
        depth: 0,
        duplicate_keys: 0,
    };
    parser.whitespace();
    let value = parser.value()?;
    parser.whitespace();
    if parser.at != parser.text.len() {
        return Err(format!("trailing characters at {}", parser.at));
    }
    Ok(Reading {
        value,
        duplicate_keys: parser.duplicate_keys,
    })
}

/// Keys a Go SDK declares as struct fields (mcp-go's JSON-RPC envelope and `tools/call`
/// parameters): Go takes a key in any case for the field, so `Method` *is* the method to it.
/// Written here, not taken from strict.rs's `PROTOCOL_KEYS`: the oracle keeps its own list.
pub const FIELDS: &[&str] = &[
    "jsonrpc",
    "id",
    "method",
    "params",
    "result",
    "error",
    "name",
    "arguments",
    "_meta",
];

/// A value the strict reader judged, as the lenient reader would hold it; `Err` if two keys
/// of one object are one key to the lenient reader, or if a key is a [`FIELDS`] key in
/// another case (the proxy reads it as another key than Go does).
pub fn lenient(value: &serde_json::Value) -> Result<Json, String> {
    use serde_json::Value;
    Ok(match value {
        Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Number(n) => Json::Number(n.as_f64().ok_or("a number that is no double")?),
        Value::String(s) => Json::String(s.clone()),
        Value::Array(items) => Json::Array(items.iter().map(lenient).collect::<Result<_, _>>()?),
        Value::Object(object) => {
            let mut folded = BTreeMap::new();
            for (key, value) in object {
                let field = FIELDS.iter().find(|field| fold(field) == fold(key));
                if let Some(field) = field.filter(|field| *field != key) {
                    return Err(format!(
                        "the key {key:?} is {field:?} to a case-insensitive reader"
                    ));
                }
                if folded.insert(fold(key), lenient(value)?).is_some() {
                    return Err(format!(
                        "the key {key:?} is another key of its object to a case-insensitive reader"
                    ));
                }
            }
            Json::Object(folded)
        }
    })
}

/// A key as Go's `encoding/json` compares it: each character replaced by the smallest of its
/// Unicode simple case folding orbit (`s`, `S` and `ſ` by `S`; `k`, `K` and `K` by `K`).
pub fn fold(key: &str) -> String {
    key.chars().map(fold_char).collect()
}

fn fold_char(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_uppercase();
    }
    orbits().get(&c).copied().unwrap_or(c)
}

/// The simple case folding orbits: every character in one, to the orbit's smallest.
fn orbits() -> &'static HashMap<char, char> {
    static ORBITS: OnceLock<HashMap<char, char>> = OnceLock::new();
    ORBITS.get_or_init(|| {
        // Union-find over the edges `c` - its simple folding, each root its orbit's smallest.
        let mut parent: HashMap<char, char> = HashMap::new();
        fn root(parent: &HashMap<char, char>, mut c: char) -> char {
            while let Some(&p) = parent.get(&c) {
                if p == c {
                    break;
                }
                c = p;
            }
            c
        }
        for c in (0..=0x10ffff).filter_map(char::from_u32) {
            let folded = simple_fold(c);
            if folded == c {
                continue;
            }
            let (a, b) = (root(&parent, c), root(&parent, folded));
            let (low, high) = if a < b { (a, b) } else { (b, a) };
            parent.entry(low).or_insert(low);
            parent.insert(high, low);
        }
        let chars: Vec<char> = parent.keys().copied().collect();
        chars.into_iter().map(|c| (c, root(&parent, c))).collect()
    })
}

/// `c`'s simple case folding (CaseFolding.txt, statuses C and S): its lower case, or the lower
/// case of its upper case (`ſ` to `s`, `ς` to `σ`, `ẞ` to `ß`), where each is one character.
/// `İ` and `ı` fold to themselves (their lower and upper case are Turkic mappings, status T).
fn simple_fold(c: char) -> char {
    fn single(mut chars: impl Iterator<Item = char>) -> Option<char> {
        let first = chars.next()?;
        chars.next().is_none().then_some(first)
    }
    if matches!(c, '\u{130}' | '\u{131}') {
        return c;
    }
    let upper = single(c.to_uppercase()).unwrap_or(c);
    single(upper.to_lowercase())
        .or_else(|| single(c.to_lowercase()))
        .unwrap_or(c)
}

/// The deepest nesting read (serde_json stops at 128).
const MAX_DEPTH: usize = 1000;

struct Parser<'a> {
    text: &'a [u8],
    at: usize,
    depth: usize,
    duplicate_keys: usize,
}

impl Parser<'_> {
    fn whitespace(&mut self) {
        while matches!(self.text.get(self.at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn next(&mut self) -> Option<u8> {
        let byte = self.text.get(self.at).copied();
        self.at += 1;
        byte
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        match self.next() {
            Some(b) if b == byte => Ok(()),
            _ => Err(format!("expected `{}` at {}", byte as char, self.at - 1)),
        }
    }

    fn literal(&mut self, word: &str, value: Json) -> Result<Json, String> {
        if self.text[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(value)
        } else {
            Err(format!("not a value at {}", self.at))
        }
    }

    fn value(&mut self) -> Result<Json, String> {
        match self.text.get(self.at) {
            Some(b'{') => self.nested(Self::object),
            Some(b'[') => self.nested(Self::array),
            Some(b'"') => self.string().map(Json::String),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'n') => self.literal("null", Json::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(format!("not a value at {}", self.at)),
        }
    }

    fn nested(&mut self, read: fn(&mut Self) -> Result<Json, String>) -> Result<Json, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err("nested too deep".into());
        }
        let value = read(self);
        self.depth -= 1;
        value
    }

    fn object(&mut self) -> Result<Json, String> {
        self.expect(b'{')?;
        let mut object = BTreeMap::new();
        let mut keys = std::collections::HashSet::new();
        self.whitespace();
        if self.text.get(self.at) == Some(&b'}') {
            self.at += 1;
            return Ok(Json::Object(object));
        }
        loop {
            self.whitespace();
            let key = self.string()?;
            self.whitespace();
            self.expect(b':')?;
            self.whitespace();
            let value = self.value()?;
            object.insert(fold(&key), value);
            if !keys.insert(key) {
                self.duplicate_keys += 1;
            }
            self.whitespace();
            match self.next() {
                Some(b',') => continue,
                Some(b'}') => return Ok(Json::Object(object)),
                _ => return Err(format!("expected `,` or `}}` at {}", self.at - 1)),
            }
        }
    }

    fn array(&mut self) -> Result<Json, String> {
        self.expect(b'[')?;
        let mut items = Vec::new();
        self.whitespace();
        if self.text.get(self.at) == Some(&b']') {
            self.at += 1;
            return Ok(Json::Array(items));
        }
        loop {
            self.whitespace();
            items.push(self.value()?);
            self.whitespace();
            match self.next() {
                Some(b',') => continue,
                Some(b']') => return Ok(Json::Array(items)),
                _ => return Err(format!("expected `,` or `]` at {}", self.at - 1)),
            }
        }
    }

    fn number(&mut self) -> Result<Json, String> {
        let start = self.at;
        let digits = |parser: &mut Self| {
            let from = parser.at;
            while matches!(parser.text.get(parser.at), Some(b'0'..=b'9')) {
                parser.at += 1;
            }
            parser.at - from
        };
        if self.text.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        let first = self.text.get(self.at).copied();
        let integer = digits(self);
        if integer == 0 || (first == Some(b'0') && integer > 1) {
            return Err(format!("a malformed number at {start}"));
        }
        if self.text.get(self.at) == Some(&b'.') {
            self.at += 1;
            if digits(self) == 0 {
                return Err(format!("a malformed number at {start}"));
            }
        }
        if matches!(self.text.get(self.at), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.text.get(self.at), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if digits(self) == 0 {
                return Err(format!("a malformed number at {start}"));
            }
        }
        let text = std::str::from_utf8(&self.text[start..self.at]).map_err(|e| e.to_string())?;
        match text.parse::<f64>() {
            Ok(n) if n.is_finite() => Ok(Json::Number(n)),
            _ => Err(format!("a number out of range at {start}")),
        }
    }

    /// Four hex digits after `\u`, at `at`.
    fn hex(&self, at: usize) -> Option<u16> {
        let hex = self.text.get(at..at + 4)?;
        if !hex.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        u16::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
    }

    fn string(&mut self) -> Result<String, String> {
        self.expect(b'"')?;
        let mut out = Vec::new();
        loop {
            let Some(byte) = self.next() else {
                return Err("an unterminated string".into());
            };
            match byte {
                b'"' => break,
                0..0x20 => {
                    return Err(format!("a raw control byte in a string at {}", self.at - 1));
                }
                b'\\' => {
                    let escaped = match self.next() {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            let unit = self
                                .hex(self.at)
                                .ok_or_else(|| format!("a malformed escape at {}", self.at))?;
                            self.at += 4;
                            match unit {
                                0xd800..=0xdbff => {
                                    let low = (self.text.get(self.at..self.at + 2) == Some(b"\\u"))
                                        .then(|| self.hex(self.at + 2))
                                        .flatten()
                                        .filter(|low| (0xdc00..=0xdfff).contains(low));
                                    match low {
                                        Some(low) => {
                                            self.at += 6;
                                            let code = 0x10000
                                                + ((u32::from(unit) - 0xd800) << 10)
                                                + (u32::from(low) - 0xdc00);
                                            char::from_u32(code).unwrap_or('\u{fffd}')
                                        }
                                        None => '\u{fffd}',
                                    }
                                }
                                0xdc00..=0xdfff => '\u{fffd}',
                                unit => char::from_u32(u32::from(unit)).unwrap_or('\u{fffd}'),
                            }
                        }
                        _ => return Err(format!("a malformed escape at {}", self.at - 1)),
                    };
                    out.extend_from_slice(escaped.encode_utf8(&mut [0; 4]).as_bytes());
                }
                byte => out.push(byte),
            }
        }
        // The text is UTF-8, and a string ends on a `"`: its bytes are UTF-8 too.
        String::from_utf8(out).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_fold_as_go_folds_them() {
        assert_eq!(fold("method"), fold("METHOD"));
        assert_eq!(fold("ſ"), fold("s"));
        assert_eq!(fold("\u{212a}"), fold("k"));
        assert_eq!(fold("ß"), fold("ẞ"));
        assert_eq!(fold("ς"), fold("Σ"));
        assert_ne!(fold("ı"), fold("i"));
        assert_ne!(fold("İ"), fold("i"));
        assert_ne!(fold("ß"), fold("ss"));
    }

    #[test]
    fn the_last_of_keys_equal_under_folding_wins() {
        let read = read(r#"{"method":"ping","Method":"tools/call","x":"\ud800"}"#).unwrap();
        let Json::Object(object) = read.value else {
            panic!()
        };
        assert_eq!(object[&fold("method")], Json::String("tools/call".into()));
        assert_eq!(object[&fold("x")], Json::String("\u{fffd}".into()));
        assert_eq!(read.duplicate_keys, 0);
    }

    #[test]
    fn lines_split_where_readers_split_them() {
        assert_eq!(lines("a\rb\r\nc\nd", Breaks::Ascii), ["a", "b", "c", "d"]);
        assert_eq!(lines("a\u{2028}b", Breaks::Ascii), ["a\u{2028}b"]);
        assert_eq!(lines("a\u{2028}b\u{85}c", Breaks::Unicode), ["a", "b", "c"]);
        let hidden = "{\"method\":\"n\",\"params\":{\"x\":\r{\"id\":5}\r}}";
        assert_eq!(read_lines(hidden, Breaks::Ascii).len(), 3);
    }
}
