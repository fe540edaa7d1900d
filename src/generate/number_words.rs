//! A number as the documents write it. Asked "How many legs does the animal ... have?" with
//! "They have eight legs" in its prompt, the 1.5B default answers "8"; asked "In what order does
//! Three Colours: Blue appear in the trilogy?" with "Blue is the first of three films", it
//! answers "1". HotpotQA's answers are the documents' words. So a bare number (digits, or
//! "1st") that no document of the prompt writes in digits becomes the number word the documents
//! do write: the cardinal ("eight") or the ordinal ("first"), where they write only one of the
//! two. A "how many" question is answered by a cardinal only. Where the documents write the
//! number in digits only as an ordinal ("the 100th anniversary" for "100"), the answer takes
//! their suffix: the ordinal is what they say it is.

use std::sync::LazyLock;

use regex::Regex;

/// Numbers written out in words, with their values.
pub(super) const NUMBER_WORDS: [(&str, u64); 28] = [
    ("one", 1),
    ("two", 2),
    ("three", 3),
    ("four", 4),
    ("five", 5),
    ("six", 6),
    ("seven", 7),
    ("eight", 8),
    ("nine", 9),
    ("ten", 10),
    ("eleven", 11),
    ("twelve", 12),
    ("thirteen", 13),
    ("fourteen", 14),
    ("fifteen", 15),
    ("sixteen", 16),
    ("seventeen", 17),
    ("eighteen", 18),
    ("nineteen", 19),
    ("twenty", 20),
    ("thirty", 30),
    ("forty", 40),
    ("fifty", 50),
    ("sixty", 60),
    ("seventy", 70),
    ("eighty", 80),
    ("ninety", 90),
    ("hundred", 100),
];

/// Ordinals written out in words, with their values.
const ORDINAL_WORDS: [(&str, u64); 20] = [
    ("first", 1),
    ("second", 2),
    ("third", 3),
    ("fourth", 4),
    ("fifth", 5),
    ("sixth", 6),
    ("seventh", 7),
    ("eighth", 8),
    ("ninth", 9),
    ("tenth", 10),
    ("eleventh", 11),
    ("twelfth", 12),
    ("thirteenth", 13),
    ("fourteenth", 14),
    ("fifteenth", 15),
    ("sixteenth", 16),
    ("seventeenth", 17),
    ("eighteenth", 18),
    ("nineteenth", 19),
    ("twentieth", 20),
];

/// A pattern matching a count written in words: one word of [`NUMBER_WORDS`], or a ten and a
/// unit ("seventy seven", "twenty-one"), the compound first so that it wins.
pub(super) fn word_count_pattern() -> String {
    let words = |values: std::ops::RangeInclusive<u64>| {
        NUMBER_WORDS
            .iter()
            .filter(|(_, v)| values.contains(v) && (*v < 20 || v % 10 == 0))
            .map(|&(word, _)| word)
            .collect::<Vec<_>>()
            .join("|")
    };
    format!(
        "(?:{})[ -](?:{})|{}",
        words(20..=90),
        words(1..=9),
        words(1..=100)
    )
}

/// The value of a count written in words ([`word_count_pattern`]), case aside.
pub(super) fn word_value(text: &str) -> Option<u64> {
    let value = |word: &str| {
        NUMBER_WORDS
            .iter()
            .find(|(w, _)| w.eq_ignore_ascii_case(word))
            .map(|&(_, v)| v)
    };
    match text.split([' ', '-']).collect::<Vec<_>>().as_slice() {
        [word] => value(word),
        [ten, unit] => {
            let (ten, unit) = (value(ten)?, value(unit)?);
            ((20..=90).contains(&ten) && ten % 10 == 0 && unit < 10).then_some(ten + unit)
        }
        _ => None,
    }
}

/// Questions whose answer is a count.
pub(super) static HOW_MANY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\b(?:how many|what number)\b").expect("a pattern"));

/// A bare number as an answer: up to three digits (a year is no count or place) without a
/// leading zero, maybe an ordinal's suffix.
static BARE_NUMBER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^([1-9][0-9]{0,2})(st|nd|rd|th)?\.?$").expect("a pattern"));

const ORDINAL_SUFFIXES: [&str; 4] = ["st", "nd", "rd", "th"];

/// `answer` as the number word `documents` write for it, when it is a bare number they never
/// write in digits and they write exactly one of its cardinal and ordinal words (only the
/// cardinal for a question asking how many); as their ordinal in digits ("100th"), when it has
/// no suffix, the question does not ask how many, and they write its digits only so, with one
/// suffix; none otherwise.
pub fn as_written<'d>(
    question: &str,
    answer: &str,
    documents: impl IntoIterator<Item = &'d str>,
) -> Option<String> {
    let number = BARE_NUMBER.captures(answer.trim())?;
    let digits = &number[1];
    let value: u64 = digits.parse().ok()?;
    let words: Vec<&str> = documents
        .into_iter()
        .flat_map(crate::words::alphanumeric)
        .collect();
    // "8" or "8th" in the documents: the digits are their way of writing it.
    let in_digits: Vec<&str> = words
        .iter()
        .copied()
        .filter(|word| {
            word.strip_prefix(digits).is_some_and(|rest| {
                rest.is_empty()
                    || ORDINAL_SUFFIXES
                        .iter()
                        .any(|s| rest.eq_ignore_ascii_case(s))
            })
        })
        .collect();
    if !in_digits.is_empty() {
        let as_ordinal = number.get(2).is_none()
            && !HOW_MANY.is_match(question)
            && in_digits.iter().all(|w| w.len() > digits.len())
            && in_digits
                .iter()
                .all(|w| w.eq_ignore_ascii_case(in_digits[0]));
        return as_ordinal.then(|| in_digits[0].to_string());
    }
    let written = |table: &[(&'static str, u64)]| {
        let (word, _) = table.iter().find(|&&(_, v)| v == value)?;
        words
            .iter()
            .find(|w| w.eq_ignore_ascii_case(word))
            .map(|w| w.to_string())
    };
    // "1st" is no count.
    let cardinal = number
        .get(2)
        .is_none()
        .then(|| written(&NUMBER_WORDS))
        .flatten();
    let ordinal = (!HOW_MANY.is_match(question))
        .then(|| written(&ORDINAL_WORDS))
        .flatten();
    match (cardinal, ordinal) {
        (Some(word), None) | (None, Some(word)) => Some(word),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEGS: &str = "How many legs does the animal have?";

    #[test]
    fn digits_become_the_word_the_documents_write() {
        let docs = ["Scorpions are arachnids.", "They have eight legs."];
        assert_eq!(as_written(LEGS, "8", docs).as_deref(), Some("eight"));
        let order = "In what order does Blue appear in the trilogy?";
        let docs = ["\"Blue\" is the First of three films."];
        assert_eq!(as_written(order, "1", docs).as_deref(), Some("First"));
        assert_eq!(as_written(order, "1st.", docs).as_deref(), Some("First"));
    }

    #[test]
    fn digits_the_documents_write_stay() {
        let docs = ["They have eight legs, 8 eyes and 2 pedipalps."];
        assert_eq!(as_written(LEGS, "8", docs), None);
        let docs = ["The 8th of eight children."];
        assert_eq!(as_written(LEGS, "8", docs), None);
    }

    #[test]
    fn digits_the_documents_write_only_as_an_ordinal_take_its_suffix() {
        let q = "The album was recorded for what anniversary of the Tour de France?";
        let docs = ["Recorded for the 100th anniversary of the Tour de France."];
        assert_eq!(as_written(q, "100", docs).as_deref(), Some("100th"));
        assert_eq!(as_written(q, "100th", docs), None);
        // A count, digits also written bare, or two ordinals of them: nothing to go by.
        assert_eq!(as_written("How many tours?", "100", docs), None);
        let docs = ["The 100th tour had 100 riders."];
        assert_eq!(as_written(q, "100", docs), None);
        assert_eq!(as_written(q, "2", ["the 2nd and the 2th"]), None);
    }

    #[test]
    fn both_words_or_neither_decide_nothing() {
        let q = "Which film of the series is it?";
        let docs = ["One of three films, and the first."];
        assert_eq!(as_written(q, "1", docs), None);
        assert_eq!(as_written(q, "4", docs), None);
    }

    #[test]
    fn how_many_takes_no_ordinal_and_ordinals_no_cardinal() {
        assert_eq!(as_written(LEGS, "1", ["the first film"]), None);
        assert_eq!(as_written("Which one?", "1st", ["one film"]), None);
    }

    #[test]
    fn counts_in_words_have_their_values() {
        let pattern = Regex::new(&format!("^(?i:{})$", word_count_pattern())).unwrap();
        for (text, value) in [
            ("seven", 7),
            ("Seventy seven", 77),
            ("twenty-one", 21),
            ("forty", 40),
            ("hundred", 100),
        ] {
            assert!(pattern.is_match(text), "{text}");
            assert_eq!(word_value(text), Some(value), "{text}");
        }
        for text in [
            "seven seventy",
            "twelve-one",
            "seventy ten",
            "eleventy",
            "one two three",
        ] {
            assert_eq!(word_value(text), None, "{text}");
        }
    }

    #[test]
    fn only_bare_numbers_change() {
        let docs = ["eight legs"];
        for answer in ["8 legs", "08", "eight", "1000", "1998", "8.5", ""] {
            assert_eq!(as_written(LEGS, answer, docs), None, "{answer}");
        }
    }
}
