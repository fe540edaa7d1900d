//! Which of two named things is taller, or has the larger population, read from the measures
//! the documents give. Asked "Is the building located at 200 West Street taller than the one at
//! 888 7th Avenue?" with "a 749 ft, 44-story building" and "a 628 ft (191m) tall skyscraper" in
//! its prompt, the 1.5B default answered "No": a comparison of two numbers, which the model
//! mostly does not make. A question that compares two documents of the prompt by their titles,
//! as a choice ("Which is taller, A or B?", "Which town has a greater population, A or B?") or
//! with "than" ("Is A taller than B?"), is answered from the first height (feet or metres) or
//! population each document's text gives. Nothing is decided where either document gives none,
//! or both give the same.

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::choice::{chosen_between, compared_than, named_alone, names_either};
use super::yes_no;

/// What a question compares two documents by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Measure {
    /// In metres (feet converted).
    Height,
    /// In people.
    Population,
}

/// The answer decided between two documents by their measures (this module).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasuredChoice {
    /// The two titles the question compares, disambiguation dropped, in its order.
    pub options: [String; 2],
    pub measure: Measure,
    /// The first measure of it each one's document gives.
    pub values: [f64; 2],
    /// Whether the question asks for the smaller (shorter, less populous; else the larger).
    pub smaller: bool,
    /// Whether the question asks yes or no ("Is A taller than B?": yes when the first one is
    /// the one asked for), else it chooses one by name.
    pub yes_no: bool,
    /// Which of `options` the measures chose.
    pub chosen: usize,
    /// The answer as generated, before this choice.
    pub answer_before: String,
}

/// Asks for the taller or the shorter: "taller" anywhere; "higher" or "lower" only as the
/// comparison itself ("Which is higher, A or B?", "higher than", "higher in elevation"), since
/// "a higher rank" asks for something else.
static HEIGHT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:(taller)|(shorter)|(higher)(?:\s*,|\s+than|\s+in\s+elevation|\s*\?)|(lower)(?:\s*,|\s+than|\s+in\s+elevation|\s*\?))")
        .expect("a pattern")
});
/// Asks for the larger or the smaller population.
static POPULATION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:(more\s+populous|(?:greater|larger|bigger|higher)\s+population)|(less\s+populous|(?:smaller|lower)\s+population))\b")
        .expect("a pattern")
});
/// A height: a number and a unit of length, and for feet maybe inches ("6 ft 2 in"); a
/// superscript after the unit (an area, "m²") is group 4.
static LENGTH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)\s*-?\s*(feet|foot|ft|metres|meters|metre|meter|m)\b(?:\s*(\d{1,2})\s*(?:in|inches)\b)?([²³])?")
        .expect("a pattern")
});
/// A population: the first number within the words after "population" ("The population was
/// 5,656 at the 2010 census", "a population of 1.3 million"), or a number of inhabitants,
/// residents or people; a year is skipped.
static PEOPLE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\bpopulation\b[^.;\d]{0,40}?(?:\(?(?:1\d{3}|20\d{2})\)?[^.;\d]{0,30}?)?(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(\s+million)?|\b(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(\s+million)?\s+(?:inhabitants|residents|people)\b")
        .expect("a pattern")
});

/// The answer to `question` decided by the measures of the two documents (title, text) it
/// compares: the chosen document's title for a choice (the generated answer kept where it
/// already names that one alone), "Yes" or "No" for a comparison with "than"; `answer` (the
/// generated one, which must name one or both for a choice, or be yes or no for "than") kept
/// in the record. None where the question is no such comparison or a document gives no
/// measure, or both give the same.
pub fn decide<'d>(
    question: &str,
    answer: &str,
    documents: impl IntoIterator<Item = (&'d str, &'d str)>,
) -> Option<(String, MeasuredChoice)> {
    let (measure, smaller) = asked(question)?;
    let documents: Vec<(&str, &str)> = documents.into_iter().collect();
    let yes_no = yes_no::said(answer).is_some();
    let named = if yes_no {
        compared_than(question, &documents)?
    } else {
        chosen_between(question, &documents)?
    };
    let [first, second] = [named[0].document, named[1].document];
    let value = |i: usize| read(measure, documents[i].1);
    let values = [value(first)?, value(second)?];
    // Within half a percent is the same measure written in the other unit.
    if (values[0] - values[1]).abs() <= 0.005 * values[0].max(values[1]) {
        return None;
    }
    let chosen = usize::from((values[1] > values[0]) != smaller);
    let options = named.map(|n| n.name);
    let decided = if yes_no {
        yes_no::in_case_of(chosen == 0, answer)
    } else if named_alone(answer, &options) == Some(chosen) {
        answer.to_string()
    } else if names_either(answer, &options) {
        options[chosen].clone()
    } else {
        // An answer naming neither wants something else of the one chosen.
        return None;
    };
    let choice = MeasuredChoice {
        options,
        measure,
        values,
        smaller,
        yes_no,
        chosen,
        answer_before: answer.to_string(),
    };
    Some((decided, choice))
}

/// What `question` compares by, and whether it asks for the smaller.
fn asked(question: &str) -> Option<(Measure, bool)> {
    if let Some(c) = POPULATION.captures(question) {
        return Some((Measure::Population, c.get(2).is_some()));
    }
    let c = HEIGHT.captures(question)?;
    Some((Measure::Height, c.get(2).or(c.get(4)).is_some()))
}

/// The first measure of `measure` in `text`.
fn read(measure: Measure, text: &str) -> Option<f64> {
    let number = |m: regex::Match| m.as_str().replace(',', "").parse::<f64>().ok();
    match measure {
        Measure::Height => LENGTH
            .captures_iter(text)
            .filter(|c| c.get(4).is_none())
            .find_map(|c| {
                let value = number(c.get(1)?)?;
                let unit = c[2].to_lowercase();
                Some(if unit.starts_with('f') {
                    let inches = c.get(3).and_then(number).unwrap_or(0.0);
                    (value * 12.0 + inches) * 0.0254
                } else {
                    value
                })
            }),
        Measure::Population => PEOPLE.captures_iter(text).find_map(|c| {
            let (digits, million) = match c.get(1) {
                Some(digits) => (digits, c.get(2)),
                None => (c.get(3)?, c.get(4)),
            };
            let value = number(digits)?;
            if million.is_some() {
                return Some(value * 1e6);
            }
            // "population in 2010 was estimated": a year, no count of people.
            let year = digits.as_str().len() == 4 && (1000.0..2100.0).contains(&value);
            (!year).then_some(value)
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WEST: (&str, &str) = (
        "200 West Street",
        "The building is a 749 ft , 44-story building located on West Street.",
    );
    const SEVENTH: (&str, &str) = (
        "888 7th Avenue",
        "888 7th Avenue is a 628 ft (191m) tall office skyscraper of 2,050,000 square feet.",
    );
    const MINDEN: (&str, &str) = (
        "Minden, Nevada",
        "Minden is a town. The population was 3,001 at the 2010 census.",
    );
    const GARDNERVILLE: (&str, &str) = (
        "Gardnerville, Nevada",
        "As of the 2010 census, the population was 5,656. It is adjacent to Minden.",
    );

    #[test]
    fn a_comparison_with_than_is_answered_yes_or_no_by_the_heights() {
        let question =
            "Is the building located at 200 West Street taller than the one at 888 7th Avenue?";
        let (answer, choice) = decide(question, "No", [SEVENTH, WEST]).unwrap();
        assert_eq!(answer, "Yes");
        assert_eq!(
            (
                choice.options.clone(),
                choice.measure,
                choice.yes_no,
                choice.chosen
            ),
            (
                ["200 West Street".to_string(), "888 7th Avenue".to_string()],
                Measure::Height,
                true,
                0
            )
        );
        assert!(
            (choice.values[0] - 228.3).abs() < 0.1,
            "{:?}",
            choice.values
        );
        assert!(
            (choice.values[1] - 191.4).abs() < 0.1,
            "{:?}",
            choice.values
        );
        let shorter = "Is 200 West Street shorter than 888 7th Avenue?";
        assert_eq!(decide(shorter, "yes", [SEVENTH, WEST]).unwrap().0, "no");
    }

    #[test]
    fn a_choice_is_answered_with_the_one_the_measures_pick() {
        let question = "Which is taller, 888 7th Avenue or 200 West Street?";
        let (answer, choice) = decide(question, "888 7th Avenue", [SEVENTH, WEST]).unwrap();
        assert_eq!((answer.as_str(), choice.chosen), ("200 West Street", 1));
        // Already the one chosen, alone: the answer stays as generated.
        let (answer, _) = decide(question, "West Street", [SEVENTH, WEST]).unwrap();
        assert_eq!(answer, "West Street");
        let towns = "Which town has a greater population, Minden, Nevada or Gardnerville, Nevada?";
        let (answer, choice) = decide(towns, "Minden", [MINDEN, GARDNERVILLE]).unwrap();
        assert_eq!(
            (answer.as_str(), choice.measure, choice.values),
            (
                "Gardnerville, Nevada",
                Measure::Population,
                [3001.0, 5656.0]
            )
        );
        let fewer = "Which is less populous, Minden, Nevada or Gardnerville, Nevada?";
        assert_eq!(
            decide(fewer, "Gardnerville", [MINDEN, GARDNERVILLE])
                .unwrap()
                .0,
            "Minden, Nevada"
        );
    }

    #[test]
    fn measures_are_read_as_the_documents_write_them() {
        let read_height = |text| read(Measure::Height, text);
        assert_eq!(
            read_height("He is 6 ft 2 in (1.88 m) tall."),
            Some(74.0 * 0.0254)
        );
        assert_eq!(
            read_height("The peak rises to 4,478 m (14,692 ft)."),
            Some(4478.0)
        );
        // Areas and distances are no height.
        assert_eq!(
            read_height("It covers 190,451 m² and lies 10 km away."),
            None
        );
        let people = |text| read(Measure::Population, text);
        assert_eq!(
            people("The province has a population of 1.3 million."),
            Some(1.3e6)
        );
        assert_eq!(people("Its population (2010) is 46,997."), Some(46997.0));
        assert_eq!(people("A city of 122,067 inhabitants."), Some(122067.0));
        assert_eq!(people("Population figures are not kept."), None);
    }

    #[test]
    fn nothing_is_decided_without_two_measures_of_what_is_asked() {
        let docs = [SEVENTH, WEST];
        for (question, answer) in [
            // Not a comparison by height or population.
            (
                "Which is older, 888 7th Avenue or 200 West Street?",
                "888 7th Avenue",
            ),
            (
                "Which has a higher rank, 888 7th Avenue or 200 West Street?",
                "888 7th Avenue",
            ),
            // A choice answered yes, a "than" comparison answered by a name.
            ("Which is taller, 888 7th Avenue or 200 West Street?", "Yes"),
            (
                "Is 888 7th Avenue taller than 200 West Street?",
                "888 7th Avenue",
            ),
            // An answer naming neither, a document not in the prompt.
            (
                "Which is taller, 888 7th Avenue or 200 West Street?",
                "Emery Roth",
            ),
            (
                "Which is taller, 888 7th Avenue or the Chrysler Building?",
                "888 7th Avenue",
            ),
            // No population in the documents.
            (
                "Which has the larger population, 888 7th Avenue or 200 West Street?",
                "200 West Street",
            ),
        ] {
            assert!(
                decide(question, answer, docs).is_none(),
                "{question} {answer}"
            );
        }
        // The same height in either unit.
        let metres = ("200 West Street", "It is 191 m tall.");
        let question = "Is 200 West Street taller than 888 7th Avenue?";
        assert!(decide(question, "no", [SEVENTH, metres]).is_none());
    }
}
