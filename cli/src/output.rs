//! Plain-text tables for the terminal.

use std::borrow::Cow;

/// Renders rows as columns separated by two spaces, the first row a header. Every cell is
/// made [`printable`]: a cell can hold text a plugin chose.
pub fn table(rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|cell| printable(cell).into_owned())
                .collect()
        })
        .collect();
    let rows = rows.as_slice();
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.push_str(&" ".repeat(widths[c] - cell.chars().count() + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
        if i == 0 {
            let total = widths.iter().sum::<usize>() + 2 * columns.saturating_sub(1);
            out.push_str(&"-".repeat(total.min(120)));
            out.push('\n');
        }
    }
    out
}

/// Cuts `text` to `max` characters, marking the cut; made
/// [`printable`] first.
pub fn clip(text: &str, max: usize) -> String {
    let text = printable(text);
    let text = text.as_ref();
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// JSON text safe to print to a terminal, the same JSON value: the characters
/// [`printable`] escapes that JSON leaves raw (DEL, the C1
/// controls, the bidirectional overrides) are written as `\uXXXX` escapes. Only a string can
/// hold them (the serializer escapes the other controls), and there the escape stands for the
/// character.
pub fn json_printable(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let mut utf8 = [0u8; 4];
    for c in json.chars() {
        let raw = c.encode_utf8(&mut utf8);
        if c > '\u{7e}' && matches!(printable(raw), Cow::Owned(_)) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// Multi-line text for a line-oriented log: each line made
/// [`printable`], continuation lines indented, so text from a
/// plugin or a client (a session id, a problem naming a file) cannot start a line that passes
/// for one of ours.
pub fn indented(text: &str) -> String {
    let lines: Vec<String> = text
        .lines()
        .map(|line| printable(line).into_owned())
        .collect();
    lines.join("\n    ")
}

/// What a hook (or a plugin) did over many invocations: the table `palisade replay` and
/// `palisade logs --summary` print.
#[derive(Default)]
pub struct Tally {
    /// Each invocation's wall time, in µs.
    pub durations: Vec<u64>,
    pub fuel: u64,
    pub denied: usize,
    pub failed: usize,
    pub shadowed: usize,
}

impl Tally {
    /// The `q` quantile (0 to 1) of the durations, nearest rank; 0 with none.
    pub fn quantile(&self, q: f64) -> u64 {
        let mut sorted = self.durations.clone();
        sorted.sort_unstable();
        if sorted.is_empty() {
            return 0;
        }
        let rank = (q * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1]
    }
}

/// The tallies as a table, one row per name (`first`: the first column's title): calls,
/// p50, p95, p99 and max in µs, fuel, denials, failures, shadowed.
pub fn tally_table(first: &str, tallies: &std::collections::BTreeMap<String, Tally>) -> String {
    let mut rows = vec![
        [
            first, "CALLS", "P50 µs", "P95 µs", "P99 µs", "MAX µs", "FUEL", "DENIED", "FAILED",
            "SHADOWED",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for (name, t) in tallies {
        rows.push(vec![
            name.clone(),
            t.durations.len().to_string(),
            t.quantile(0.5).to_string(),
            t.quantile(0.95).to_string(),
            t.quantile(0.99).to_string(),
            t.durations.iter().max().copied().unwrap_or(0).to_string(),
            t.fuel.to_string(),
            t.denied.to_string(),
            t.failed.to_string(),
            t.shadowed.to_string(),
        ]);
    }
    table(&rows)
}

/// `text` made safe to print as one line of a terminal or of a line-oriented text stream:
/// control characters (newlines, carriage returns, escape sequences, ...) and the Unicode
/// bidirectional overrides are written as escapes (`\n`, `\u{1b}`), so that nothing a plugin
/// says — a log line, a deny message, a reason — can start a line of its own, pass for the
/// host's output, or restyle the terminal. Text with none of them is returned as it is.
pub fn printable(text: &str) -> Cow<'_, str> {
    fn unsafe_char(c: char) -> bool {
        c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    }
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if unsafe_char(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn printable_escapes_what_could_forge_a_line_or_restyle_a_terminal() {
        assert_eq!(printable("plain text, ünïcode"), "plain text, ünïcode");
        assert_eq!(
            printable("ok\nhook_completed other/pre-tool allow"),
            "ok\\nhook_completed other/pre-tool allow"
        );
        assert_eq!(printable("\u{1b}[2Jcleared\r"), "\\u{1b}[2Jcleared\\r");
        assert_eq!(printable("a\u{202e}b"), "a\\u{202e}b");
    }
}
