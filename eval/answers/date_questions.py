"""The questions of a HotpotQA file that a date step of `ask` can change, as the Rust code reads
a question:

- `--kind when` (default): those opening with "when" or asking for a date, which
  `--full-dates` can change (src/generate/full_date.rs);
- `--kind choice`: those asking for the earlier or the later of two (first, older, younger,
  more recent, ...) and joining names with "or" or "and", which `--option-dates` can change
  (src/generate/option_dates.rs; whether the names are two of the prompt's titles is only known
  once the prompt is built, so this is a superset);
- `--kind count`: those asking which has more or fewer of a plural thing ("more species"),
  joining names with "or" or "and", which `--option-counts` can change
  (src/generate/option_counts.rs; a superset, as for `choice`);
- `--kind measure`: those asking which of two is taller or shorter or has the larger or smaller
  population, joining names with "or" or "and" or comparing them with "than", which
  `--option-measures` can change (src/generate/option_measures.rs; a superset, as for `choice`);
- `--kind place`: those asking yes or no whether (two) things are in or from a capitalised
  place ("Are A and B both in Florida?"), whose "yes" `--shared-place` can change
  (src/generate/shared_place.rs; a superset, as for `choice`);
- `--kind number`: those asking for a count or a place in an order ("how many", "in what
  order"), whose answers are the bare numbers `--number-words` can change
  (src/generate/number_words.rs; any answer that is a bare number can change, so this is not a
  superset: the 240 tuning questions are run whole beside it).

    python3 eval/answers/date_questions.py QUESTIONS OUT [--kind when|choice|count|measure|place|number] [--limit N]
"""
import argparse
import json
import re

ASKS_FOR_DATE = re.compile(r"^\W*when\b|\bdate\b", re.I)
EARLIER = re.compile(r"\b(?:first|earlier|earliest|older|oldest|longer ago)\b", re.I)
LATER = re.compile(
    r"\b(?:later|latest|younger|youngest|newer|newest|more recent(?:ly)?|most recent(?:ly)?)\b", re.I)
JOINS = re.compile(r"\b(?:or|and)\b", re.I)
# option_counts.rs's ASKED, without its "than" and "how many" exclusions (a superset).
MORE_OF = re.compile(r"\b(?:more|fewer|less)\s+(?:[a-z'-]+\s+){0,2}?[a-z-]+s\b", re.I)

# option_measures.rs's HEIGHT and POPULATION.
HEIGHT = re.compile(r"\b(?:taller|shorter|(?:higher|lower)(?:\s*,|\s+than|\s+in\s+elevation|\s*\?))", re.I)
POPULATION = re.compile(
    r"\b(?:(?:more|less)\s+populous|(?:greater|larger|bigger|higher|smaller|lower)\s+population)\b", re.I)
COMPARES = re.compile(r"\b(?:or|and|than)\b", re.I)

# shared_place.rs's ASKED.
IN_PLACE = re.compile(
    r"^(?i:are|were)\b.*\b(?i:in|from)\s+(?i:the\s+)?((?:[A-Z][\w.'-]*)(?:\s+(?:of\s+)?[A-Z][\w.'-]*)*)\s*\?\s*$")

NUMBER = re.compile(r"\b(?:how many|what number|(?:in )?(?:what|which) (?:order|place|position|rank))\b", re.I)


def asks_earlier_or_later(question):
    return bool(EARLIER.search(question)) != bool(LATER.search(question)) and bool(JOINS.search(question))


def asks_more_or_fewer(question):
    return bool(MORE_OF.search(question)) and bool(JOINS.search(question))


def asks_taller_or_more_populous(question):
    return bool(HEIGHT.search(question) or POPULATION.search(question)) and bool(COMPARES.search(question))


KINDS = {"when": ASKS_FOR_DATE.search, "choice": asks_earlier_or_later, "count": asks_more_or_fewer,
         "measure": asks_taller_or_more_populous, "place": lambda q: IN_PLACE.search(q.strip()),
         "number": NUMBER.search}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("questions")
    parser.add_argument("out")
    parser.add_argument("--kind", choices=KINDS, default="when")
    parser.add_argument("--limit", type=int)
    args = parser.parse_args()
    records = json.load(open(args.questions))[: args.limit]
    kept = [r for r in records if KINDS[args.kind](r["question"])]
    json.dump(kept, open(args.out, "w"))
    print(f"{len(kept)} of {len(records)} questions ({args.kind}) -> {args.out}")


if __name__ == "__main__":
    main()
