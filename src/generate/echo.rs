//! An answer that repeats a phrase of its own question where the question offers no choice
//! ("What was the title of the debut studio album by Weezer ...?" -> "Weezer"): the model has
//! named what the question is about instead of what it asks for. Of the 41 fullwiki questions
//! answered so, the 3 right ones were choices of two; answered again, 2 became right and none
//! wrong (eval/answers/README.md). With `--answer-again` the
//! model answers once more with the echo's first word forbidden where it came
//! ([`super::Generator::answer_again`]), and the new answer is kept unless it echoes too.

use serde::{Deserialize, Serialize};

use super::choice;
use super::options::{contains, words};
use super::yes_no;

/// An echoing answer and the one given again (this module).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Echo {
    /// The answer as first generated, which repeats the question.
    pub echoed: String,
    /// The answer given with its first word forbidden.
    pub again: String,
    /// Whether `again` is the answer: not empty, not a yes or a no, and no echo itself.
    pub kept: bool,
}

/// Whether `answer` is nothing but a run of `question`'s words (articles and punctuation
/// aside), for a question that chooses between nothing: no "or" in it, and no two of the
/// prompt's `documents` (title, text) that it names joined as a choice ("Who is younger, A and
/// B?") or compared ("Is A taller than B?"). A yes or a no is never an echo.
pub fn echoes<'d>(
    question: &str,
    answer: &str,
    documents: impl Iterator<Item = (&'d str, &'d str)>,
) -> bool {
    let answer_words = words(answer);
    let question_words = words(question);
    if answer_words.is_empty()
        || yes_no::said(answer).is_some()
        || question_words.iter().any(|w| w == "or")
        || !contains(&question_words, &answer_words)
    {
        return false;
    }
    let documents: Vec<(&str, &str)> = documents.collect();
    choice::chosen_between(question, &documents).is_none()
        && choice::compared_than(question, &documents).is_none()
}

/// Whether a token's text opens a word the answer is about: it holds a letter or a digit and
/// is not an article ("The" before "Hounds of Zaroff" stays, so the answer may still open
/// with one).
pub(super) fn opens_a_word(piece: &str) -> bool {
    let word = piece.trim();
    word.chars().any(char::is_alphanumeric)
        && !["the", "a", "an"]
            .iter()
            .any(|article| word.eq_ignore_ascii_case(article))
}

/// The record of answering again: the second answer is kept unless it is empty, a yes or a
/// no, or an echo of the question too.
pub fn settle<'d>(
    question: &str,
    echoed: String,
    again: String,
    documents: impl Iterator<Item = (&'d str, &'d str)>,
) -> Echo {
    let kept = !words(&again).is_empty()
        && yes_no::said(&again).is_none()
        && !echoes(question, &again, documents);
    Echo {
        echoed,
        again,
        kept,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONE: [(&str, &str); 0] = [];

    #[test]
    fn an_answer_made_of_the_questions_words_echoes_it() {
        let q = "What was the title of the debut studio album by Weezer which contained the hit Buddy Holly?";
        assert!(echoes(q, "Weezer", NONE.into_iter()));
        assert!(echoes(q, "the debut studio album.", NONE.into_iter()));
        assert!(!echoes(q, "The Blue Album", NONE.into_iter()));
        // Words of the question, but not one run of them.
        assert!(!echoes(q, "Weezer album", NONE.into_iter()));
    }

    #[test]
    fn a_choice_or_a_yes_is_no_echo() {
        assert!(!echoes(
            "Which was formed first, the duo Big & Rich or Lonestar?",
            "Lonestar",
            NONE.into_iter()
        ));
        assert!(!echoes("Is Weezer a band?", "Yes.", NONE.into_iter()));
        let docs = [
            ("Dan Bejar", "Dan Bejar (born 1972) is a Canadian musician."),
            (
                "Makoto Koshinaka",
                "Makoto Koshinaka (born 1980) is a Japanese musician.",
            ),
        ];
        let q = "Who is younger, Dan Bejar and Makoto Koshinaka?";
        assert!(!echoes(q, "Makoto Koshinaka", docs.into_iter()));
        // The same answer with only one of them in the prompt: nothing to choose between.
        assert!(echoes(q, "Makoto Koshinaka", docs[..1].iter().copied()));
    }

    #[test]
    fn articles_and_punctuation_open_no_word() {
        assert!(!opens_a_word(" The"));
        assert!(!opens_a_word(" \""));
        assert!(opens_a_word(" Hounds"));
        assert!(opens_a_word("W"));
        assert!(opens_a_word(" Theodore"));
    }

    #[test]
    fn the_second_answer_is_kept_unless_it_echoes_or_says_yes() {
        let q =
            "What was Richard Connell's best known work The Hounds of Zaroff also published as?";
        let settled = |again: &str| {
            settle(
                q,
                "The Hounds of Zaroff".into(),
                again.into(),
                NONE.into_iter(),
            )
        };
        assert!(settled("The Most Dangerous Game").kept);
        assert!(!settled("Richard Connell").kept);
        assert!(!settled("No").kept);
        assert!(!settled("").kept);
        assert_eq!(settled("Game").echoed, "The Hounds of Zaroff");
    }
}
