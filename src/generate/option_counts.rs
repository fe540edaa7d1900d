//! Which of two named things has more (or fewer) of something, read from the counts the
//! documents give. Asked "Which opera has more acts, Don Quichotte or Tosca?" with "an opera in
//! five acts" and "an opera in three acts" in its prompt, the 1.5B default answered "5"; asked
//! "Which has more species, Aichryson or Polypodium?" with "about 15 species" and "75–100
//! species", it named the first. A question that chooses between two documents of the prompt
//! by their titles and asks which has more or fewer of a plural thing ("more species", "more
//! Grand Slam titles") is answered instead from the first count of that thing each document's
//! text gives ("118 species", "39 Grand Slam titles", "five acts"; "the only species" is one).
//! Nothing is decided where either document gives no count or both give the same.

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::choice::{chosen_between, names_either};
use super::number_words::{word_count_pattern, word_value, HOW_MANY};

/// The answer decided between two documents by their counts (this module).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CountedChoice {
    /// The two titles the question chooses between, disambiguation dropped, in its order.
    pub options: [String; 2],
    /// What is counted, as the question says it ("species", "titles").
    pub thing: String,
    /// The first count of it each one's document gives.
    pub counts: [u64; 2],
    /// Whether the question asks for fewer (else more).
    pub fewer: bool,
    /// Which of `options` the counts chose.
    pub chosen: usize,
    /// The answer as generated, before this choice.
    pub answer_before: String,
}

/// "more" or "fewer" and the plural thing within the next three words ("more Grand Slam
/// titles"): words of letters only, so "more than 300 papers" asks nothing of this kind.
static ASKED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(more|fewer|less)\s+((?:[a-z'-]+\s+){0,2}?)([a-z-]+s)\b").expect("a pattern")
});
/// The answer to `question` decided by the counts the two documents (title, text) it chooses
/// between give of the thing it asks more or fewer of: the chosen document's title, with
/// `answer` (the generated one, which must name one or both of the two, or be a bare number) kept in
/// the record. None where the question is no such choice, a document gives no count, or both
/// give the same.
pub fn decide<'d>(
    question: &str,
    answer: &str,
    documents: impl IntoIterator<Item = (&'d str, &'d str)>,
) -> Option<(String, CountedChoice)> {
    let trimmed = answer.trim().to_lowercase();
    if matches!(trimmed.as_str(), "yes" | "no") || HOW_MANY.is_match(question) {
        return None;
    }
    let asked = ASKED.captures(question)?;
    if asked[2]
        .split_whitespace()
        .any(|w| w.eq_ignore_ascii_case("than"))
    {
        return None;
    }
    let fewer = !asked[1].eq_ignore_ascii_case("more");
    let thing = asked[3].to_lowercase();
    let documents: Vec<(&str, &str)> = documents.into_iter().collect();
    let named = chosen_between(question, &documents)?;
    let [first, second] = [named[0].document, named[1].document];
    let counted = counter(&thing);
    let count = |i: usize| first_count(&counted, documents[i].1);
    let counts = [count(first)?, count(second)?];
    if counts[0] == counts[1] {
        return None;
    }
    let options = named.map(|n| n.name);
    // An answer naming neither wants something else of the one chosen; one naming both is a
    // comparison of the two ("Vellamira has more acts than The Glass Harbour", the 0.5B's
    // way); a bare number is the count the model read instead of the name asked for.
    let number = !trimmed.is_empty() && parse_count(trimmed.trim_end_matches('.')).is_some();
    if !number && !names_either(answer, &options) {
        return None;
    }
    let chosen = usize::from((counts[1] > counts[0]) != fewer);
    let choice = CountedChoice {
        options: options.clone(),
        thing,
        counts,
        fewer,
        chosen,
        answer_before: answer.to_string(),
    };
    Some((options[chosen].clone(), choice))
}

/// Things Wikipedia counts under other names, every form of each: a building's floors are its
/// stories ("a 68-story tower" answers "more floors").
const SAME_THING: [&[&str]; 1] = [&["floors", "floor", "stories", "story", "storeys", "storey"]];

/// A count followed, within three words, by `thing` in the singular or the plural ("15 species",
/// "39 Grand Slam titles", "five acts", "a 68-story tower"), or a word saying there is one right
/// before it ("the only species in the genus"): that word is group 1, a count group 2 and the
/// words between it and the thing group 3.
fn counter(thing: &str) -> Regex {
    let forms = match SAME_THING.iter().find(|forms| forms.contains(&thing)) {
        Some(forms) => forms.join("|"),
        None => {
            let singular = thing.strip_suffix('s').unwrap_or(thing);
            format!("{}(?:s|es)?", regex::escape(singular))
        }
    };
    // A count as Wikipedia's text writes one: digits (with thousands separators; of a range,
    // "75–100", the first) or number words ("seventy seven").
    let pattern = format!(
        r"(?i)\b(?:(only|single|sole)\s+|(\d{{1,3}}(?:,\d{{3}})+|\d+|{})(?:\s*(?:–|-|to)\s*\d+)?(?:\s+|-)((?:[\w'-]+\s+){{0,3}}?))(?:{forms})\b",
        word_count_pattern(),
    );
    Regex::new(&pattern).expect("an escaped pattern")
}

/// Words that part a count from the thing it would count ("one of the acts", "two in the
/// species list").
const NOT_BETWEEN: [&str; 10] = [
    "of", "the", "a", "an", "in", "and", "or", "to", "for", "with",
];

/// The first count in `text` that is not a year ("1998 Drama Desk Award").
fn first_count(counter: &Regex, text: &str) -> Option<u64> {
    counter
        .captures_iter(text)
        .filter(|c| {
            let gap = c.get(3).map_or("", |m| m.as_str()).split_whitespace();
            !gap.map(str::to_lowercase)
                .any(|w| NOT_BETWEEN.contains(&w.as_str()))
        })
        .filter_map(|c| {
            if c.get(1).is_some() {
                return Some(1);
            }
            let count = &c[2];
            let year = count.len() == 4
                && count.bytes().all(|b| b.is_ascii_digit())
                && (1000..2100).contains(&count.parse::<u32>().ok()?);
            (!year).then(|| parse_count(count)).flatten()
        })
        .next()
}

/// A count's value: digits (thousands separators aside) or number words.
fn parse_count(text: &str) -> Option<u64> {
    if let Some(value) = word_value(text) {
        return Some(value);
    }
    let digits = text.replace(',', "");
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOSCA: (&str, &str) = (
        "Tosca",
        "Tosca is an opera in three acts by Giacomo Puccini to an Italian libretto.",
    );
    const QUICHOTTE: (&str, &str) = (
        "Don Quichotte",
        "Don Quichotte is an opera in five acts by Jules Massenet, first performed in 1910.",
    );
    const AICHRYSON: (&str, &str) = (
        "Aichryson",
        "Aichryson is a genus of about 15 species of succulent plants.",
    );
    const POLYPODIUM: (&str, &str) = (
        "Polypodium",
        "Polypodium is a genus of between 75–100 species of true ferns.",
    );

    #[test]
    fn the_one_with_more_is_chosen_by_the_documents_counts() {
        let question = "Which opera has more acts, Don Quichotte or Tosca?";
        let (answer, choice) = decide(question, "5", [TOSCA, QUICHOTTE]).unwrap();
        assert_eq!(answer, "Don Quichotte");
        assert_eq!(
            (
                choice.options,
                choice.counts,
                choice.fewer,
                choice.thing.as_str()
            ),
            (
                ["Don Quichotte".to_string(), "Tosca".to_string()],
                [5, 3],
                false,
                "acts"
            )
        );
        assert_eq!(choice.answer_before, "5");
        let species = "Which has more species, Aichryson or Polypodium?";
        let (answer, choice) = decide(species, "Aichryson", [AICHRYSON, POLYPODIUM]).unwrap();
        let both = "Aichryson has more species than Polypodium.";
        assert_eq!(
            decide(species, both, [AICHRYSON, POLYPODIUM]).unwrap().0,
            "Polypodium"
        );
        assert_eq!((answer.as_str(), choice.counts), ("Polypodium", [15, 75]));
        let fewer = "Which genus has fewer species, Aichryson or Polypodium?";
        assert_eq!(
            decide(fewer, "Polypodium", [AICHRYSON, POLYPODIUM])
                .unwrap()
                .0,
            "Aichryson"
        );
        // Words between the count and the thing, the thing in the singular, separators.
        let king = (
            "Billie Jean King",
            "Billie Jean King won 39 Grand Slam titles, including 12 in singles.",
        );
        let ullyett = (
            "Kevin Ullyett",
            "Kevin Ullyett won 2 Grand Slam doubles titles and 1 mixed title.",
        );
        let titles = "Which player won more Grand Slam titles, Kevin Ullyett or Billie Jean King?";
        let (answer, choice) = decide(titles, "Kevin Ullyett", [ullyett, king]).unwrap();
        assert_eq!(
            (answer.as_str(), choice.counts),
            ("Billie Jean King", [2, 39])
        );
        // "The only species" is one; "only 3 species" is three.
        let one = (
            "Xanthoceras",
            "X. sorbifolium is the only species in the genus Xanthoceras.",
        );
        let three = (
            "Tri",
            "Tri has only 3 species, the single one of them a tree.",
        );
        let question = "Which genus has more species, Xanthoceras or Tri?";
        let (answer, choice) = decide(question, "Xanthoceras", [one, three]).unwrap();
        assert_eq!((answer.as_str(), choice.counts), ("Tri", [1, 3]));
        // A building's stories are its floors; counts in compound words and before a hyphen.
        let penn = (
            "15 Penn Plaza",
            "15 Penn Plaza is a proposed 68-story tower. It would have 430 units.",
        );
        let cherry = (
            "247 Cherry",
            "247 Cherry is a seventy seven story residential building.",
        );
        let floors = "Which building will have more floors, 15 Penn Plaza, or 247 Cherry?";
        let (answer, choice) = decide(floors, "15 Penn Plaza", [penn, cherry]).unwrap();
        assert_eq!((answer.as_str(), choice.counts), ("247 Cherry", [68, 77]));
        let big = ("Big Genus", "Big Genus has 1,250 species.");
        let question = "Which has more species, Aichryson or Big Genus?";
        assert_eq!(
            decide(question, "Aichryson", [AICHRYSON, big])
                .unwrap()
                .1
                .counts,
            [15, 1250]
        );
    }

    #[test]
    fn nothing_is_decided_without_two_counts_of_the_thing_asked() {
        let docs = [TOSCA, QUICHOTTE];
        for (question, answer) in [
            (
                "Which opera was first performed earlier, Don Quichotte or Tosca?",
                "Tosca",
            ),
            (
                "Who has written more than 300 papers, Don Quichotte or Tosca?",
                "Tosca",
            ),
            (
                "How many acts has the opera with more acts, Don Quichotte or Tosca?",
                "5",
            ),
            ("Does Don Quichotte or Tosca have more acts?", "yes"),
            (
                "Which opera has more acts, Don Quichotte or La Bohème?",
                "Tosca",
            ),
            (
                "Which opera has more arias, Don Quichotte or Tosca?",
                "Tosca",
            ),
            // An answer naming neither: the question wants something else.
            (
                "Which opera has more acts, Don Quichotte or Tosca?",
                "Massenet",
            ),
        ] {
            assert!(
                decide(question, answer, docs).is_none(),
                "{question} {answer}"
            );
        }
        let same = ("Tosca", "Tosca is an opera in five acts.");
        let question = "Which opera has more acts, Don Quichotte or Tosca?";
        assert!(decide(question, "Tosca", [same, QUICHOTTE]).is_none());
        // A count of something else ("one of"), and a year, are no count.
        let parted = (
            "Tosca",
            "Tosca is one of the acts of a cycle, in five acts.",
        );
        assert_eq!(
            decide(question, "Tosca", [parted, QUICHOTTE]),
            None,
            "five against five"
        );
        // A year is no count.
        let awards = [
            (
                "Brothers Quay",
                "The Brothers Quay won the 1998 Drama Desk Award.",
            ),
            ("Jake Kasdan", "Jake Kasdan won 2 awards."),
        ];
        let question = "Who won more awards, Brothers Quay or Jake Kasdan?";
        assert!(decide(question, "Jake Kasdan", awards).is_none());
    }
}
