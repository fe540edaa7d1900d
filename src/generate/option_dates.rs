//! Which of two named things came first, read from the years the documents give them. Asked
//! "Between Harvey Pekar and Denise Levertov who was born earlier?" with "Denise Levertov (24
//! October 1923 – ...)" and "Harvey Pekar (... October 8, 1939 – ...)" in its prompt, the 1.5B
//! default answers the first name it was given, as it does for most such questions it gets
//! wrong (it names the first option for 5 of its 6 wrong temporal answers on the fullwiki
//! tuning questions). A question that chooses between two documents of the prompt by their
//! titles ("A or B", "A and B") and asks which is earlier or later (first, older, younger,
//! more recent, ...) is answered instead from the first year each document's text gives:
//! a person's birth, a film's release, a school's founding, as Wikipedia's first sentences
//! put them. Nothing is decided where either document gives no year or both give the same.

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::choice::{chosen_between, names_one};

/// The answer decided between two documents by their years (this module).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatedChoice {
    /// The two titles the question chooses between, disambiguation dropped, in its order.
    pub options: [String; 2],
    /// The first year each one's document gives.
    pub years: [u32; 2],
    /// Whether the question asks for the later one (else the earlier).
    pub later: bool,
    /// Which of `options` the years chose.
    pub chosen: usize,
    /// The answer as generated, before this choice.
    pub answer_before: String,
}

/// Asks for the earlier of two: "first", "earlier", "older", ... (word boundaries, any case).
static EARLIER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:first|earlier|earliest|older|oldest|longer ago)\b").expect("a pattern")
});
/// Asks for the later of two.
static LATER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:later|latest|younger|youngest|newer|newest|more recent(?:ly)?|most recent(?:ly)?)\b")
        .expect("a pattern")
});
/// Asks about deaths ("Who died first?", "older when they died"), which a first year (a
/// birth) does not decide.
static DEATH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\b(?:die|died|dies|death|dead)\b").expect("a pattern"));
/// A year as Wikipedia's text gives one: 1000 to 2099, standing alone.
static YEAR: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b(1\d{3}|20\d{2})\b").expect("a pattern"));

/// The answer to `question` decided by the years of the two documents (title, text) it chooses
/// between, where it asks which is earlier or later: the chosen document's title, with
/// `answer` (the generated one, which must name one of the two) kept in the record. None where
/// the question is no such choice (or was answered otherwise, or asks about deaths), a
/// document gives no year, or both give the same.
pub fn decide<'d>(
    question: &str,
    answer: &str,
    documents: impl IntoIterator<Item = (&'d str, &'d str)>,
) -> Option<(String, DatedChoice)> {
    // "Were A and B both born first in their families?" is answered yes or no, not by a name.
    if matches!(answer.trim().to_lowercase().as_str(), "yes" | "no") || DEATH.is_match(question) {
        return None;
    }
    let later = match (EARLIER.is_match(question), LATER.is_match(question)) {
        (true, false) => false,
        (false, true) => true,
        _ => return None,
    };
    let documents: Vec<(&str, &str)> = documents.into_iter().collect();
    let named = chosen_between(question, &documents)?;
    let [first, second] = [named[0].document, named[1].document];
    let year = |i: usize| -> Option<u32> { YEAR.find(documents[i].1)?.as_str().parse().ok() };
    let years = [year(first)?, year(second)?];
    if years[0] == years[1] {
        return None;
    }
    let chosen = usize::from((years[1] > years[0]) == later);
    let options = named.map(|n| n.name);
    // The generated answer must name one of the two: otherwise the question wants something
    // else of the earlier one ("What is the birthday of the oldest among A and B?").
    if !names_one(answer, &options) {
        return None;
    }
    // The title as the question names it, even where the answer names the same one otherwise
    // ("Harvey Lawrence Pekar"): the answer to such a question is the name it was given.
    let answered = options[chosen].clone();
    let choice = DatedChoice {
        options,
        years,
        later,
        chosen,
        answer_before: answer.to_string(),
    };
    Some((answered, choice))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEVERTOV: (&str, &str) = (
        "Denise Levertov",
        "Priscilla Denise Levertov (24 October 1923 – 20 December 1997) was an American poet.",
    );
    const PEKAR: (&str, &str) = (
        "Harvey Pekar",
        "Harvey Lawrence Pekar (October 8, 1939 – July 12, 2010) was an American comic book writer.",
    );
    const BRABNER: (&str, &str) = (
        "Joyce Brabner",
        "Joyce Brabner (born March 1, 1952) is a writer.",
    );

    #[test]
    fn the_earlier_of_two_named_documents_is_chosen_by_their_first_years() {
        let question = "Between Harvey Pekar and Denise Levertov who was born earlier?";
        let (answer, choice) = decide(
            question,
            "Harvey Lawrence Pekar",
            [LEVERTOV, PEKAR, BRABNER],
        )
        .unwrap();
        assert_eq!(answer, "Denise Levertov");
        assert_eq!(choice.options, ["Harvey Pekar", "Denise Levertov"]);
        assert_eq!(
            (choice.years, choice.later, choice.chosen),
            ([1939, 1923], false, 1)
        );
        assert_eq!(choice.answer_before, "Harvey Lawrence Pekar");
        // Asked the other way, the later one, named as the question names it.
        let younger = "Who is younger, Denise Levertov or Harvey Pekar?";
        let (answer, choice) = decide(younger, "Pekar", [LEVERTOV, PEKAR]).unwrap();
        assert_eq!(
            (answer.as_str(), choice.chosen, choice.later),
            ("Harvey Pekar", 1, true)
        );
    }

    #[test]
    fn nothing_is_decided_without_a_choice_between_two_dated_documents() {
        let docs = [LEVERTOV, PEKAR, BRABNER];
        // No earlier or later asked, or both.
        assert!(decide(
            "Were Harvey Pekar and Denise Levertov both American?",
            "yes",
            docs
        )
        .is_none());
        assert!(decide(
            "Who was born first and who later, Harvey Pekar or Denise Levertov?",
            "Harvey Pekar",
            docs
        )
        .is_none());
        // Deaths: the first years are births.
        let died = "Who was older when they died, Harvey Pekar or Denise Levertov?";
        assert!(decide(died, "Harvey Pekar", docs).is_none());
        // A yes-no question naming both.
        assert!(decide(
            "Were Harvey Pekar and Denise Levertov born first in their families?",
            "No",
            docs
        )
        .is_none());
        // One document named, or the two not joined as a choice.
        assert!(decide(
            "Who was born first, Harvey Pekar or his wife?",
            "Harvey Pekar",
            docs
        )
        .is_none());
        assert!(decide(
            "Was Harvey Pekar born earlier than the poet Denise Levertov?",
            "Harvey Pekar",
            docs
        )
        .is_none());
        // A title inside a longer word is not named.
        assert!(decide(
            "Who is older, Harvey Pekarson or Denise Levertov?",
            "Harvey Pekar",
            docs
        )
        .is_none());
        // An answer naming neither: the question wants something else of the one chosen.
        let birthday = "What is the birthday of the oldest among Harvey Pekar and Denise Levertov?";
        assert!(decide(birthday, "24 October", docs).is_none());
        assert!(decide(birthday, "Denise Levertov", docs).is_some());
        // No year, or the same year.
        let undated = ("Harvey Pekar", "Harvey Pekar was an American writer.");
        assert!(decide(
            "Who is older, Harvey Pekar or Denise Levertov?",
            "Harvey Pekar",
            [LEVERTOV, undated]
        )
        .is_none());
        let same = ("Harvey Pekar", "Harvey Pekar (born 1923) was a writer.");
        assert!(decide(
            "Who is older, Harvey Pekar or Denise Levertov?",
            "Harvey Pekar",
            [LEVERTOV, same]
        )
        .is_none());
    }

    #[test]
    fn a_title_inside_another_named_one_is_not_an_option() {
        let docs = [
            ("Frida", "Frida is a 2002 American biographical film."),
            (
                "The Staten Island Catapult",
                "The Staten Island Catapult is a 1999 documentary.",
            ),
            (
                "Frida, en trotjänarinna",
                "Frida, en trotjänarinna is a 1997 documentary.",
            ),
        ];
        let question = "Between the documentaries The Staten Island Catapult and Frida, en trotjänarinna which came first?";
        let (answer, choice) = decide(question, "The Staten Island Catapult", docs).unwrap();
        assert_eq!(answer, "Frida, en trotjänarinna");
        assert_eq!(choice.years, [1999, 1997]);
    }

    #[test]
    fn a_title_without_disambiguation_stands_for_its_namesakes() {
        let chess = (
            "Christian Poulsen (chess player)",
            "Christian Poulsen (16 August 1912 – 19 April 1981) was a Danish chess master.",
        );
        let footballer = (
            "Christian Poulsen",
            "Christian Bjørnshøj Poulsen (born 28 February 1980) is a Danish footballer.",
        );
        let wome = (
            "Pierre Womé",
            "Pierre Nlend Womé (born 26 March 1979) is a footballer.",
        );
        let question = "who was born first Pierre Womé or Christian Poulsen ?";
        let (answer, choice) =
            decide(question, "Christian Poulsen", [wome, chess, footballer]).unwrap();
        assert_eq!(
            (answer.as_str(), choice.years),
            ("Pierre Womé", [1979, 1980])
        );
    }

    #[test]
    fn titles_are_matched_without_their_disambiguation_articles_or_quotes() {
        let docs = [
            (
                "Mean Girls",
                "Mean Girls is a 2004 American teen comedy film.",
            ),
            (
                "April Fool's Day (2008 film)",
                "April Fool's Day is a 2008 slasher film.",
            ),
        ];
        let question = "Which movie was released first, 'Mean Girls' or the 'April Fool's Day'?";
        let (answer, choice) = decide(question, "April Fool's Day", docs).unwrap();
        assert_eq!(
            (answer.as_str(), choice.years),
            ("Mean Girls", [2004, 2008])
        );
    }

    #[test]
    fn a_document_is_named_by_the_fuller_name_its_text_opens_with() {
        let docs = [
            (
                "John W. Henry",
                "John William Henry II (born September 13, 1949) is an American businessman.",
            ),
            (
                "Jed Hoyer",
                "Jed Hoyer (born December 7, 1973) is an executive.",
            ),
            (
                "William Henry (brother of Patrick Henry)",
                "William Henry (1734–1785) was the son of John and Sarah Henry.",
            ),
        ];
        let question = "Who is older, Jed Hoyer or John William Henry II?";
        let (answer, choice) = decide(question, "Jed Hoyer", docs).unwrap();
        assert_eq!(
            (answer.as_str(), choice.years),
            ("John William Henry II", [1973, 1949])
        );
        // An opening that is not a fuller form of the title names nothing.
        let docs = [
            (
                "Jed Hoyer",
                "Jed Hoyer (born December 7, 1973) is an executive.",
            ),
            ("Fenway", "The Boston Red Sox play here, since 1912."),
        ];
        let question = "Who is older, Jed Hoyer or The Boston Red Sox?";
        assert!(decide(question, "Jed Hoyer", docs).is_none());
    }
}
