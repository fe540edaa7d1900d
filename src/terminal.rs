//! Text from the corpus (titles, paragraphs, answers made from them) as a terminal may show
//! it: a title holding ESC, BEL or a right-to-left override would otherwise move the cursor,
//! ring, retitle the window or reverse what follows. `--json` output is escaped by JSON itself.

use std::borrow::Cow;
use std::fmt::Write;

/// Whether a terminal would act on `c` rather than show it: the C0 controls (tab and newline
/// included: one-line fields stay one line), DEL, the C1 controls, and the bidirectional
/// embeddings, overrides, isolates and marks.
fn is_control(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
        )
}

/// `text` with every such character written as a Rust escape (`\u{1b}`); untouched (no copy)
/// when it has none.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_control(c) {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_direction_overrides_are_escaped() {
        assert_eq!(
            escape("a\u{1b}[2Jb\u{7}\u{7f}\u{9b}\u{202e}c\u{2066}\n"),
            "a\\u{1b}[2Jb\\u{7}\\u{7f}\\u{9b}\\u{202e}c\\u{2066}\\u{a}"
        );
        assert!(matches!(escape("Café – Zürich 東京"), Cow::Borrowed(_)));
    }
}
