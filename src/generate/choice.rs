//! The two documents of a prompt that a question chooses between by their titles ("Who was born
//! first, A or B?", "Which has more species, A and B?") or compares ("Is A taller than B?"),
//! and whether an answer names one of them: what [`super::option_dates`],
//! [`super::option_counts`] and [`super::option_measures`] decide between. A document is also
//! named by the fuller form of its title its text opens with ("John William Henry II (born
//! 1949) is ..." for "John W. Henry"), as questions often write it.

use std::collections::HashSet;

use crate::corpus::without_disambiguation;

/// A document a question names, and the name it is named by: its title with disambiguation
/// dropped, or the fuller form its text opens with.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Named {
    pub document: usize,
    pub name: String,
}

/// The two documents whose titles (disambiguation dropped) the question names joined as a
/// choice, "A or B" or "A and B" (articles, quotes and commas between them aside), in the
/// question's order; none unless exactly two documents are named so.
pub(super) fn chosen_between(question: &str, documents: &[(&str, &str)]) -> Option<[Named; 2]> {
    let question = question.to_lowercase();
    let named = named_titles(&question, documents);
    // Exactly two, one after the other, joined as a choice.
    let joined = named.windows(2).filter(|pair| {
        let gap: Vec<&str> = between(&question, pair)
            .filter(|w| !matches!(*w, "the" | "a" | "an"))
            .collect();
        matches!(gap.as_slice(), ["or"] | ["and"])
    });
    match (named.len(), joined.count()) {
        (2, 1) => Some([named[0].2.clone(), named[1].2.clone()]),
        _ => None,
    }
}

/// The two documents whose titles the question names with "than" between them ("Is the
/// building at 200 West Street taller than the one at 888 7th Avenue?"), the one compared
/// first; none unless exactly two documents are named.
pub(super) fn compared_than(question: &str, documents: &[(&str, &str)]) -> Option<[Named; 2]> {
    let question = question.to_lowercase();
    let named = named_titles(&question, documents);
    match named.as_slice() {
        [first, second] if between(&question, &named).any(|w| w == "than") => {
            Some([first.2.clone(), second.2.clone()])
        }
        _ => None,
    }
}

/// Where in the question (start, end) a document is named.
type Place = (usize, usize, Named);

/// The words of `question` between the first two named titles.
fn between<'q>(question: &'q str, pair: &[Place]) -> impl Iterator<Item = &'q str> {
    crate::words::alphanumeric(&question[pair[0].1..pair[1].0])
}

/// Each document named in `question` (lowercased) by its title or the fuller form its text
/// opens with, in the question's order, none inside another.
fn named_titles(question: &str, documents: &[(&str, &str)]) -> Vec<Place> {
    // Each document's title at its first whole-word place in the question; of documents with
    // the same title once disambiguation is dropped, one without any stands for all ("Christian
    // Poulsen" over "Christian Poulsen (chess player)"), else the first in the prompt.
    let mut order: Vec<usize> = (0..documents.len()).collect();
    order.sort_by_key(|&i| documents[i].0 != without_disambiguation(documents[i].0));
    let mut seen = HashSet::new();
    let mut named: Vec<Place> = Vec::new();
    for i in order {
        let (title, text) = documents[i];
        let title = without_disambiguation(title);
        // "Ed Wood" and "Ed Wood (film)" are no choice: the first of them stands for both.
        if title.is_empty() || !seen.insert(title.to_lowercase()) {
            continue;
        }
        let place = [Some(title), opening_name(title, text)]
            .into_iter()
            .flatten()
            .find_map(|name| {
                let lower = name.to_lowercase();
                let at = whole_word(question, &lower)?;
                Some((at, at + lower.len(), name))
            });
        if let Some((start, end, name)) = place {
            let name = name.to_string();
            named.push((start, end, Named { document: i, name }));
        }
    }
    // A title inside another one named ("Frida" in "Frida, en trotjänarinna") is not named
    // apart: the longer one, first in the question, stands.
    named.sort_by_key(|&(start, end, _)| (start, std::cmp::Reverse(end)));
    let mut end = 0;
    named.retain(|&(start, stop, _)| {
        let apart = start >= end;
        if apart {
            end = stop;
        }
        apart
    });
    named
}

/// Whether `answer` has a word of exactly one option that the other lacks ("Harvey Lawrence
/// Pekar" names "Harvey Pekar"; "The Battle of Manila occurred first." names "Battle of
/// Manila" against "Battle of Guam"), case aside.
pub(super) fn names_one(answer: &str, options: &[String; 2]) -> bool {
    named_alone(answer, options).is_some()
}

/// The option `answer` names alone ([`names_one`]'s test), if it names one.
pub(super) fn named_alone(answer: &str, options: &[String; 2]) -> Option<usize> {
    match naming(answer, options) {
        [true, false] => Some(0),
        [false, true] => Some(1),
        _ => None,
    }
}

/// Whether `answer` names either option ([`names_one`]'s test), both allowed ("Tosca has
/// more acts than Don Quichotte").
pub(super) fn names_either(answer: &str, options: &[String; 2]) -> bool {
    naming(answer, options).contains(&true)
}

/// For each option, whether `answer` has a word of it that the other option lacks.
fn naming(answer: &str, options: &[String; 2]) -> [bool; 2] {
    let words = |text: &str| -> HashSet<String> {
        crate::words::alphanumeric(text)
            .map(str::to_lowercase)
            .collect()
    };
    let [first, second] = [words(&options[0]), words(&options[1])];
    let answer = words(answer);
    let names = |own: &HashSet<String>, other: &HashSet<String>| {
        own.difference(other).any(|w| answer.contains(w))
    };
    [names(&first, &second), names(&second, &first)]
}

/// The fuller form of `title` that `text` opens with, as Wikipedia's first sentence names its
/// subject ("John William Henry II (born September 13, 1949) is ..." for "John W. Henry"):
/// the two to six words before the first " (", ",", " is " or " was ", starting with the
/// title's first word and ending with its last (case aside), where they differ from it.
fn opening_name<'t>(title: &str, text: &'t str) -> Option<&'t str> {
    let end = [" (", ",", " is ", " was "]
        .iter()
        .filter_map(|stop| text.find(stop))
        .min()?;
    let name = text[..end].trim();
    let words: Vec<&str> = name.split_whitespace().collect();
    let title_words: Vec<&str> = title.split_whitespace().collect();
    let same = |a: Option<&&str>, b: Option<&&str>| {
        a.zip(b).is_some_and(|(a, b)| a.eq_ignore_ascii_case(b))
    };
    let fuller = (2..=6).contains(&words.len())
        && words.len() >= title_words.len()
        && same(words.first(), title_words.first())
        && (same(words.last(), title_words.last())
            || same(words.iter().rev().nth(1), title_words.last()))
        && !name.eq_ignore_ascii_case(title);
    fuller.then_some(name)
}

/// The byte offset of `needle`'s first occurrence in `haystack` not inside a longer word.
fn whole_word(haystack: &str, needle: &str) -> Option<usize> {
    let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    haystack
        .match_indices(needle)
        .map(|(at, _)| at)
        .find(|&at| {
            !word(haystack[..at].chars().next_back())
                && !word(haystack[at + needle.len()..].chars().next())
        })
}
