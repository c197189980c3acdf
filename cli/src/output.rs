//! Plain-text tables for the terminal.

/// Renders rows as columns separated by two spaces, the first row a header. Every cell is
/// made [`printable`](palisade::events::printable): a cell can hold text a plugin chose.
pub fn table(rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|cell| palisade::events::printable(cell).into_owned())
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
/// [`printable`](palisade::events::printable) first.
pub fn clip(text: &str, max: usize) -> String {
    let text = palisade::events::printable(text);
    let text = text.as_ref();
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// Multi-line text for a line-oriented log: each line made
/// [`printable`](palisade::events::printable), continuation lines indented, so text from a
/// plugin or a client (a session id, a problem naming a file) cannot start a line that passes
/// for one of ours.
pub fn indented(text: &str) -> String {
    let lines: Vec<String> = text
        .lines()
        .map(|line| palisade::events::printable(line).into_owned())
        .collect();
    lines.join("\n    ")
}
