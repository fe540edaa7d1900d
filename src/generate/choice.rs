//! The two documents of a prompt that a question chooses between by their titles ("Who was born
//! first, A or B?", "Which has more species, A and B?"), and whether an answer names one of
//! them: what [`super::option_dates`] and [`super::option_counts`] decide between.

use std::collections::HashSet;

use crate::corpus::without_disambiguation;

/// The two documents whose titles (disambiguation dropped) the question names joined as a
/// choice, "A or B" or "A and B" (articles, quotes and commas between them aside), in the
/// question's order; none unless exactly two documents are named so.
pub(super) fn chosen_between(question: &str, documents: &[(&str, &str)]) -> Option<[usize; 2]> {
    let question = question.to_lowercase();
    // Each document's title at its first whole-word place in the question; of documents with
    // the same title once disambiguation is dropped, one without any stands for all ("Christian
    // Poulsen" over "Christian Poulsen (chess player)"), else the first in the prompt.
    let mut order: Vec<usize> = (0..documents.len()).collect();
    order.sort_by_key(|&i| documents[i].0 != without_disambiguation(documents[i].0));
    let mut seen = HashSet::new();
    let mut named: Vec<(usize, usize, usize)> = Vec::new();
    for i in order {
        let title = without_disambiguation(documents[i].0).to_lowercase();
        // "Ed Wood" and "Ed Wood (film)" are no choice: the first of them stands for both.
        if title.is_empty() || !seen.insert(title.clone()) {
            continue;
        }
        if let Some(at) = whole_word(&question, &title) {
            named.push((at, at + title.len(), i));
        }
    }
    // A title inside another one named ("Frida" in "Frida, en trotjänarinna") is not named
    // apart: the longer one, first in the question, stands.
    named.sort_unstable_by_key(|&(start, end, _)| (start, std::cmp::Reverse(end)));
    let mut end = 0;
    named.retain(|&(start, stop, _)| {
        let apart = start >= end;
        if apart {
            end = stop;
        }
        apart
    });
    // Exactly two, one after the other, joined as a choice.
    let joined = named.windows(2).filter(|pair| {
        let gap = &question[pair[0].1..pair[1].0];
        let gap: Vec<&str> = crate::words::alphanumeric(gap)
            .filter(|w| !matches!(*w, "the" | "a" | "an"))
            .collect();
        matches!(gap.as_slice(), ["or"] | ["and"])
    });
    match (named.len(), joined.count()) {
        (2, 1) => Some([named[0].2, named[1].2]),
        _ => None,
    }
}

/// Whether `answer` has a word of exactly one option that the other lacks ("Harvey Lawrence
/// Pekar" names "Harvey Pekar"; "The Battle of Manila occurred first." names "Battle of
/// Manila" against "Battle of Guam"), case aside.
pub(super) fn names_one(answer: &str, options: &[String; 2]) -> bool {
    let [first, second] = naming(answer, options);
    first != second
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
