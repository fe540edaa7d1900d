//! Whether two named things are both in or from a place, read from whether the documents
//! mention it. Asked "Are Southwest Florida International Airport and Henry E. Rohlsen Airport
//! both in Florida?" with "... an airport in Lee County, Florida" and "... an airport on the
//! island of St. Croix in the United States Virgin Islands" in its prompt, the 1.5B default
//! answered "Yes", as it answers most yes/no questions. A question asking yes or no whether two
//! documents of the prompt that it names by their titles, joined by "and", are (both) in or
//! from a place ("... both from New York?", "... based in Massachusetts?") is answered "no"
//! where one of the two documents never mentions that place, by its name or its people's
//! ("Portugal" as "Portuguese", "United States" as "American"). A mention is no proof of being
//! there, so a "no" is never turned into a "yes".

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::choice::chosen_between;
use super::yes_no;

/// The answer turned to "no" because a document does not mention the place (this module).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlaceCheck {
    /// The two titles the question names, disambiguation dropped, in its order.
    pub options: [String; 2],
    /// The place asked about, as the question writes it.
    pub place: String,
    /// Whether each one's document mentions it.
    pub mentioned: [bool; 2],
    /// The answer as generated, before this check.
    pub answer_before: String,
}

/// A yes/no question about two ending "in", "from", "based in" or "located in" a capitalised
/// name ("... both in Florida?", "... from the United States?"): the name is group 1.
static ASKED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?i:are|were)\b.*\b(?i:in|from)\s+(?i:the\s+)?((?:[A-Z][\w.'-]*)(?:\s+(?:of\s+)?[A-Z][\w.'-]*)*)\s*\?\s*$")
        .expect("a pattern")
});

/// Places whose people's word is not a prefix of their name's first letters ("France" and
/// "French"), each with the words that mention it.
const DEMONYMS: [(&str, &[&str]); 22] = [
    ("united states", &["american", "u.s."]),
    ("america", &["american"]),
    ("usa", &["american", "united states"]),
    ("us", &["american", "united states"]),
    (
        "united kingdom",
        &["british", "england", "scotland", "wales"],
    ),
    ("uk", &["british", "united kingdom"]),
    ("britain", &["british"]),
    ("england", &["english"]),
    ("france", &["french"]),
    ("spain", &["spanish"]),
    ("italy", &["italian"]),
    ("china", &["chinese"]),
    ("netherlands", &["dutch"]),
    ("holland", &["dutch"]),
    ("ireland", &["irish"]),
    ("scotland", &["scottish", "scots"]),
    ("wales", &["welsh"]),
    ("sweden", &["swedish"]),
    ("denmark", &["danish"]),
    ("finland", &["finnish"]),
    ("norway", &["norwegian"]),
    ("switzerland", &["swiss"]),
];

/// `answer` turned to "no" (in its case) where `question` asks whether two documents it names
/// are both in or from a place and one of the two documents does not mention it; none where the
/// question is no such question, `answer` is not a yes, or both documents mention the place.
pub fn check<'d>(
    question: &str,
    answer: &str,
    documents: impl IntoIterator<Item = (&'d str, &'d str)>,
) -> Option<(String, PlaceCheck)> {
    if yes_no::said(answer) != Some(true) {
        return None;
    }
    let place = ASKED.captures(question.trim())?[1].to_string();
    let documents: Vec<(&str, &str)> = documents.into_iter().collect();
    let named = chosen_between(question, &documents)?;
    let mentioned = [0, 1].map(|i| mentions(documents[named[i].document].1, &place));
    if mentioned == [true, true] {
        return None;
    }
    let choice = PlaceCheck {
        options: named.map(|n| n.name),
        place,
        mentioned,
        answer_before: answer.to_string(),
    };
    Some((yes_no::in_case_of(false, answer), choice))
}

/// Whether `text` mentions `place`: each of its words (but "of") as the start of a word of
/// the text, cut to its first five letters ("Portugal" in "Portuguese", "Russia" in
/// "Russian"), or one of its people's words ([`DEMONYMS`]).
fn mentions(text: &str, place: &str) -> bool {
    let text = text.to_lowercase();
    let place = place.to_lowercase();
    let words: Vec<&str> = crate::words::alphanumeric(&text).collect();
    let named = crate::words::alphanumeric(&place)
        .filter(|w| *w != "of")
        .all(|word| {
            let stem: String = word.chars().take(5).collect();
            words.iter().any(|w| w.starts_with(&stem))
        });
    let people = DEMONYMS
        .iter()
        .filter(|(name, _)| *name == place)
        .flat_map(|(_, words)| words.iter())
        .any(|word| text.contains(word));
    named || people
}

#[cfg(test)]
mod tests {
    use super::*;

    const RSW: (&str, &str) = (
        "Southwest Florida International Airport",
        "Southwest Florida International Airport is an airport in Lee County, Florida.",
    );
    const STX: (&str, &str) = (
        "Henry E. Rohlsen Airport",
        "Henry E. Rohlsen Airport is an airport on St. Croix in the United States Virgin Islands.",
    );
    const TPA: (&str, &str) = (
        "Tampa International Airport",
        "Tampa International Airport is a public airport in Hillsborough County, Florida.",
    );

    #[test]
    fn a_yes_becomes_no_where_a_document_does_not_mention_the_place() {
        let question = "Are Southwest Florida International Airport and Henry E. Rohlsen Airport both in Florida?";
        let (answer, choice) = check(question, "Yes", [RSW, STX]).unwrap();
        assert_eq!(answer, "No");
        assert_eq!(
            (choice.place.as_str(), choice.mentioned),
            ("Florida", [true, false])
        );
        assert_eq!(choice.options[1], "Henry E. Rohlsen Airport");
        let from = "Were Southwest Florida International Airport and Henry E. Rohlsen Airport from the Bahamas?";
        assert_eq!(check(from, "yes.", [RSW, STX]).unwrap().0, "no");
    }

    #[test]
    fn places_are_mentioned_by_their_peoples_words() {
        assert!(mentions("a breed of dog from Portugal's north", "Portugal"));
        assert!(mentions("The Portuguese Podengo is a dog", "Portugal"));
        assert!(mentions("an American singer", "United States"));
        assert!(mentions("a French poet", "France"));
        assert!(mentions("born in New York City", "New York"));
        assert!(!mentions("born in York, England", "New York"));
        assert!(!mentions("a Spanish painter", "France"));
    }

    #[test]
    fn nothing_changes_without_a_yes_two_named_documents_and_a_place_one_lacks() {
        let both = "Are Southwest Florida International Airport and Tampa International Airport both in Florida?";
        assert!(check(both, "Yes", [RSW, TPA]).is_none());
        let question = "Are Southwest Florida International Airport and Henry E. Rohlsen Airport both in Florida?";
        assert!(check(question, "No", [RSW, STX]).is_none());
        assert!(check(question, "Lee County", [RSW, STX]).is_none());
        // One of the two not in the prompt.
        assert!(check(question, "Yes", [RSW, TPA]).is_none());
        // Not a question about a place.
        for other in [
            "Are Southwest Florida International Airport and Henry E. Rohlsen Airport both airports?",
            "Which is older, Southwest Florida International Airport or Henry E. Rohlsen Airport in Florida?",
        ] {
            assert!(check(other, "Yes", [RSW, STX]).is_none(), "{other}");
        }
    }
}
