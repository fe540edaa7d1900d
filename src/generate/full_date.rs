//! A year where the question asks for a date. Asked "When did the third spin-off of Pawn Stars
//! debut?", the 1.5B default answers "2013" with "26 August 2013" in its prompt; HotpotQA's answer
//! is the date the document gives. So a bare year answering a question that opens with "when" or
//! asks for a date becomes the full date holding that year, where the documents give exactly
//! one (two different ones would be a guess). "In what year" questions are left alone: their
//! answer is the year.

use std::sync::LazyLock;

use regex::Regex;

/// "28 January 1864" or "January 28, 1864", the year captured as `a` or `b` (one per form).
static FULL_DATE: LazyLock<Regex> = LazyLock::new(|| {
    const MONTH: &str =
        "(?:January|February|March|April|May|June|July|August|September|October|November|December)";
    Regex::new(&format!(
        r"\b(?:\d{{1,2}} {MONTH},? (?P<a>\d{{4}})|{MONTH} \d{{1,2}}, (?P<b>\d{{4}}))\b"
    ))
    .expect("a valid pattern")
});

/// A question that asks for a date: opening with "when", or naming a date ("the date of birth").
static ASKS_FOR_DATE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^\W*when\b|\bdate\b").expect("a valid pattern"));

/// `answer` completed to the one full date of its year in `documents`, when it is a bare year
/// and `question` asks for a date; none otherwise.
pub fn complete<'d>(
    question: &str,
    answer: &str,
    documents: impl IntoIterator<Item = &'d str>,
) -> Option<String> {
    let year = answer.trim().trim_end_matches('.');
    if year.len() != 4 || !year.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if !ASKS_FOR_DATE.is_match(question) {
        return None;
    }
    let mut found: Option<&str> = None;
    for document in documents {
        for date in FULL_DATE.captures_iter(document) {
            let of = date
                .name("a")
                .or_else(|| date.name("b"))
                .map(|m| m.as_str());
            if of != Some(year) {
                continue;
            }
            let text = date.get(0).expect("the whole match").as_str();
            match found {
                Some(other) if other != text => return None,
                _ => found = Some(text),
            }
        }
    }
    found.map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOCS: [&str; 2] = [
        "Pawn Stars UK is a British reality series that debuted on 26 August 2013 on History.",
        "Richard Hornsby (born January 28, 1864) was an English inventor. He died in 1920.",
    ];

    #[test]
    fn a_year_asked_for_as_a_date_becomes_the_date_the_documents_give() {
        let when = "When did the third international spin off of Pawn Stars debut?";
        assert_eq!(
            complete(when, "2013", DOCS).as_deref(),
            Some("26 August 2013")
        );
        let date = "What is the date of birth of the English inventor?";
        assert_eq!(
            complete(date, "1864.", DOCS).as_deref(),
            Some("January 28, 1864")
        );
    }

    #[test]
    fn years_asked_for_other_answers_and_ambiguous_dates_are_kept() {
        let year = "In what year did the third spin off of Pawn Stars debut?";
        assert_eq!(
            complete(year, "2013", DOCS),
            None,
            "the question asks for a year"
        );
        let when = "When did it debut?";
        assert_eq!(
            complete(when, "26 August 2013", DOCS),
            None,
            "already a date"
        );
        assert_eq!(
            complete(when, "1920", DOCS),
            None,
            "no full date of that year"
        );
        assert_eq!(
            complete(when, "the 2013 season", DOCS),
            None,
            "not a bare year"
        );
        let two = ["It opened on 3 May 2013 and closed on 9 June 2013."];
        assert_eq!(complete(when, "2013", two), None, "two dates of that year");
        let same = [
            "It aired on 3 May 2013.",
            "First shown 3 May 2013 in London.",
        ];
        assert_eq!(complete(when, "2013", same).as_deref(), Some("3 May 2013"));
    }
}
