//! Sentence boundaries in a paragraph's text. The document store keeps a paragraph as one
//! string (HotpotQA's sentence lists joined), and any corpus may come as plain text, so the
//! boundaries are found again here: after `.`, `!` or `?` (and any closing quote or bracket),
//! before white space and an upper-case letter, a digit or an opening quote or bracket, unless
//! the word before the stop is an initial ("J. R. R. Tolkien"), a common abbreviation
//! ("Dr. Who", "U.S. Army") or a digit of a number.

/// Words that end in a full stop without ending a sentence.
const ABBREVIATIONS: [&str; 26] = [
    "mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "mt", "ft", "no", "vs", "inc", "ltd", "co",
    "corp", "gen", "col", "lt", "sgt", "capt", "gov", "sen", "rep", "rev", "fr",
];

/// The sentences of `text` as byte ranges, in order; together they cover the text except the
/// white space between them.
pub fn split(text: &str) -> Vec<std::ops::Range<usize>> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut start = skip_space(text, 0);
    let mut i = start;
    while i < bytes.len() {
        if matches!(bytes[i], b'.' | b'!' | b'?') {
            let mut end = i + 1;
            while end < bytes.len() && matches!(bytes[end], b'"' | b'\'' | b')' | b']') {
                end += 1;
            }
            let next = skip_space(text, end);
            if next > end && next < bytes.len() && opens_sentence(&text[next..]) {
                if bytes[i] != b'.' || !is_abbreviation(&text[start..i]) {
                    out.push(start..end);
                    start = next;
                }
                i = next;
                continue;
            }
            i = end;
            continue;
        }
        i += 1;
    }
    let end = text.trim_end().len();
    if start < end {
        out.push(start..end);
    }
    out
}

fn skip_space(text: &str, from: usize) -> usize {
    from + text[from..].len() - text[from..].trim_start().len()
}

fn opens_sentence(rest: &str) -> bool {
    rest.chars()
        .next()
        .is_some_and(|c| c.is_uppercase() || c.is_ascii_digit() || "\"'([“‘".contains(c))
}

/// Whether the text before a full stop ends in a word that does not end a sentence there. The
/// word is read raw, not through one of the crate's word normalisers ([`crate::words`]): their
/// lower-casing and splitting at punctuation would lose the capital and the inner dots that
/// tell an initial or "U.S." from a sentence's last word.
fn is_abbreviation(before: &str) -> bool {
    let word = before
        .rsplit(|c: char| c.is_whitespace() || c == '(' || c == '"')
        .next()
        .unwrap_or("");
    let bare = word.trim_start_matches(|c: char| !c.is_alphanumeric());
    let mut letters = bare.chars();
    match (letters.next(), letters.next()) {
        // An initial: "J." in "J. R. R. Tolkien".
        (Some(c), None) if c.is_alphabetic() => true,
        // Dotted abbreviations: "U.S", "a.m".
        _ if bare.contains('.') => true,
        _ => ABBREVIATIONS.contains(&bare.to_lowercase().as_str()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sentences(text: &str) -> Vec<&str> {
        split(text).into_iter().map(|r| &text[r]).collect()
    }

    #[test]
    fn splits_at_stops_before_a_new_sentence() {
        assert_eq!(
            sentences("Scott Derrickson is a director. He lives in Los Angeles! Born 1966? Yes."),
            vec![
                "Scott Derrickson is a director.",
                "He lives in Los Angeles!",
                "Born 1966?",
                "Yes."
            ]
        );
        assert_eq!(
            sentences("He said \"Go.\" Then he left.  "),
            vec!["He said \"Go.\"", "Then he left."]
        );
    }

    #[test]
    fn initials_abbreviations_and_numbers_do_not_end_sentences() {
        let text = "J. R. R. Tolkien met Dr. Smith of the U.S. Army in 1.5 hours. It rained.";
        assert_eq!(
            sentences(text),
            vec![
                "J. R. R. Tolkien met Dr. Smith of the U.S. Army in 1.5 hours.",
                "It rained."
            ]
        );
        assert_eq!(sentences("No stop at the end"), vec!["No stop at the end"]);
        assert!(sentences("   ").is_empty());
        // Lower case after a stop is not a new sentence ("e.g. this").
        assert_eq!(sentences("See e.g. this one."), vec!["See e.g. this one."]);
    }

    #[test]
    fn multibyte_text_keeps_char_boundaries() {
        assert_eq!(
            sentences("Café Noir is a film. “Élan” was its sequel."),
            vec!["Café Noir is a film.", "“Élan” was its sequel."]
        );
    }
}
