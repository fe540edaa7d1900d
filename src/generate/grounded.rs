//! Whether an answer is found in what the generator read: a yes or a no, or a run of whole
//! words (articles and punctuation aside) of one of the prompt's documents, its title or its
//! text. An answer that is not ("Tom Cruise" when no document names him) came from the model's
//! own memory or from a document the context left out; of the 119 fullwiki questions answered
//! so, 11 were right. Read again within 300 tokens, 15 were (eval/answers/tune.sh widen), which
//! is what [`crate::ask::AskSettings::widen_tokens`] does.

use super::options::{contains, words};
use super::yes_no;

/// Whether `answer` is a yes or a no, or is in one of `documents` (title, text) as a run of
/// whole words. An empty answer is found nowhere.
pub fn grounded<'d>(answer: &str, documents: impl Iterator<Item = (&'d str, &'d str)>) -> bool {
    if yes_no::said(answer).is_some() {
        return true;
    }
    let answer = words(answer);
    !answer.is_empty()
        && documents.into_iter().any(|(title, text)| {
            contains(&words(title), &answer) || contains(&words(text), &answer)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOCS: [(&str, &str); 2] = [
        (
            "Stargate SG-1",
            "It stars Richard Dean Anderson, with Don S. Davis as General Hammond.",
        ),
        (
            "Ed Wood",
            "Edward Davis Wood Jr. was an American filmmaker.",
        ),
    ];

    #[test]
    fn an_answer_in_a_title_or_a_text_is_grounded() {
        assert!(grounded("Don S. Davis", DOCS.into_iter()));
        assert!(grounded("the Stargate SG-1", DOCS.into_iter()));
        assert!(grounded("American", DOCS.into_iter()));
        assert!(grounded("Yes.", DOCS.into_iter()));
        assert!(grounded("no", DOCS.into_iter()));
    }

    #[test]
    fn an_answer_from_elsewhere_or_a_part_of_a_word_is_not() {
        assert!(!grounded("Tom Cruise", DOCS.into_iter()));
        // Whole words only: "Dav" is in "Davis" but is not a word of it.
        assert!(!grounded("Dav", DOCS.into_iter()));
        // The words must run together in one document, not across two.
        assert!(!grounded("General Hammond Edward", DOCS.into_iter()));
        assert!(!grounded("", DOCS.into_iter()));
        assert!(!grounded("Don S. Davis", std::iter::empty()));
    }
}
