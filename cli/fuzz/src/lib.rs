//! Differential fuzzing of what the MCP and ACP proxies read from a peer and forward
//! (docs/bridges.md, "Fuzzing the front doors"). The CLI's strict reader is compiled here from
//! its own file; the other side is [`lenient`], a reader that takes lines and keys as other
//! SDKs take them.
//!
//! Two checks, for a raw line (stdio) and a raw body (HTTP):
//!
//! - What the proxy forwards, `strict::encode` of the message it judged, reads back as that
//!   message: under serde_json, under the strict reader itself (no duplicate or case-folded
//!   keys, one line), and under the lenient reader, as exactly one line holding the judged
//!   message (keys compared folded).
//! - The differential: a line (or body) the strict reader accepts reads, under the lenient
//!   reader, as one message equal to the one judged. Any input the proxy accepts that another
//!   parser would read differently fails here.

#[path = "../../src/jsonrpc/strict.rs"]
pub mod strict;

pub mod lenient;

use lenient::{Breaks, Reading};

/// What strict.rs uses of the CLI (`crate::output`): this crate stands in for it.
pub mod output {
    /// The CLI's escapes a key for a log line; here only a refusal's wording would change.
    pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(text)
    }
}

/// A line a peer sends `palisade mcp` or `palisade acp` over stdio, as `Lines` passes it to
/// `strict::read` (UTF-8, without its `\n`).
pub fn proxy_line(data: &[u8]) {
    // `Lines` refuses a line that is not UTF-8 before it is read.
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(message) = strict::read(line) else {
        return;
    };
    forwarded_reads_as_judged(line, &message);
    // U+2028, U+2029 and U+0085 are allowed raw inside a string (JSON allows them, and
    // `JSON.stringify` writes them so): `encode` escapes them in what is forwarded, which the
    // check above splits on. Every other break a reader splits on must have been refused.
    accepted_reads_alike(line, &message, lenient::read_lines(line, Breaks::Ascii));
}

/// A body a client POSTs to `palisade mcp --listen`, as `strict::read_body` reads it: line
/// breaks are JSON's whitespace (nobody splits a body), but what is forwarded is one line.
pub fn proxy_body(data: &[u8]) {
    let Ok(body) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(message) = strict::read_body(body) else {
        return;
    };
    forwarded_reads_as_judged(body, &message);
    accepted_reads_alike(body, &message, vec![lenient::read(body)]);
}

/// The judged message as the lenient reader must read it: its keys folded, none repeated.
fn expected(input: &str, message: &strict::Message) -> Reading {
    let value = lenient::lenient(&message.value).unwrap_or_else(|why| {
        panic!("the proxy accepted {input:?}, whose message a case-insensitive reader reads otherwise: {why}")
    });
    Reading {
        value,
        duplicate_keys: 0,
    }
}

fn forwarded_reads_as_judged(input: &str, message: &strict::Message) {
    let sent = strict::encode(&message.value);
    let plain: serde_json::Value = serde_json::from_str(&sent)
        .unwrap_or_else(|e| panic!("forwarded {sent:?} (from {input:?}) is not JSON: {e}"));
    assert_eq!(plain, message.value, "forwarded {sent:?}, from {input:?}");
    let again = strict::read(&sent).unwrap_or_else(|refusal| {
        panic!("forwarded {sent:?} (from {input:?}), which the proxy refuses: {refusal:?}")
    });
    assert_eq!(again, *message, "forwarded {sent:?}, from {input:?}");
    let lenient = lenient::read_lines(&sent, Breaks::Unicode);
    assert_eq!(
        lenient,
        [Ok(expected(input, message))],
        "forwarded {sent:?}, from {input:?}: a lenient reader reads another message"
    );
}

fn accepted_reads_alike(
    input: &str,
    message: &strict::Message,
    read: Vec<Result<Reading, String>>,
) {
    let expected = expected(input, message);
    assert_eq!(
        read,
        [Ok(expected)],
        "the proxy accepted {input:?} as {}, which a lenient reader reads otherwise",
        message.value
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every character a case-insensitive reader takes for another (they share a simple case
    /// folding orbit) is one to the strict reader too: a key holding one stands for a key
    /// holding the other, and the strict reader must see them as one.
    #[test]
    fn keys_one_to_go_are_one_to_the_strict_reader() {
        let mut missed = Vec::new();
        for c in (0x80..=0x10ffff).filter_map(char::from_u32) {
            let folded = lenient::fold(&c.to_string());
            let folded = folded.chars().next().unwrap();
            if folded == c {
                continue;
            }
            let (a, b) = (format!("x{c}"), format!("x{folded}"));
            let line = format!(r#"{{"jsonrpc":"2.0","method":"m","params":{{"{a}":1,"{b}":2}}}}"#);
            if strict::read(&line).is_ok() {
                missed.push(format!(
                    "{c} (U+{:04X}) ~ {folded} (U+{:04X})",
                    c as u32, folded as u32
                ));
            }
        }
        assert!(missed.is_empty(), "{}", missed.join("\n"));
    }

    #[test]
    fn the_attacks_are_refused_and_messages_pass() {
        for seed in ["proxy_line", "proxy_body"] {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("seeds")
                .join(seed);
            for entry in std::fs::read_dir(dir).unwrap() {
                let data = std::fs::read(entry.unwrap().path()).unwrap();
                proxy_line(&data);
                proxy_body(&data);
            }
        }
    }
}
