//! An answer found in none of its prompt's documents is given again from a wider context
//! (`--widen-tokens`), on the real generators: recorded with the first answer and its prompt,
//! the costs of both counted; an answer that is found there is left as it was.

mod common;

use serde_json::Value;

/// The question's answer is the last sentence of a paragraph; at a budget of 24 tokens the
/// prompt holds one other sentence of it, at 400 all of it.
const QUESTION: &str = "What was the name of the hound kept by Marlow Abbey's last abbot?";

/// The titles and in-prompt sentences of an answer's sources.
fn read(answer: &Value) -> Vec<(String, String)> {
    answer["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let kept: Vec<&str> = s["sentences"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|x| x["in_prompt"] == true)
                .map(|x| x["text"].as_str().unwrap())
                .collect();
            (s["title"].as_str().unwrap().to_owned(), kept.join(" "))
        })
        .filter(|(_, text)| !text.is_empty())
        .collect()
}

#[test]
fn an_answer_found_in_no_document_is_given_again_from_a_wider_context_on_the_real_model() {
    let llms = common::all_llms(
        "an_answer_found_in_no_document_is_given_again_from_a_wider_context_on_the_real_model",
    );
    if llms.is_empty() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let index_dir = common::tiny_index_of(
        tmp.path(),
        serde_json::json!([
            [
                "Marlow Abbey",
                [
                    "Marlow Abbey is a ruined abbey in the north of Vesk. ",
                    "It stands on a hill above the old river valley. ",
                    "Its bells were cast in the winter of the long frost. ",
                    "Its last abbot kept a hound named Pemberton."
                ]
            ],
            [
                "Quenby Mill",
                [
                    "Quenby Mill is a water mill on the river Tarn. ",
                    "It ground corn for the abbey until 1820."
                ]
            ]
        ]),
    );
    for llm in &llms {
        let name = llm.display();
        let ask = |widen: &str| {
            common::rag_json([
                "ask",
                QUESTION,
                "--json",
                "--index",
                index_dir.to_str().unwrap(),
                "--llm",
                llm.to_str().unwrap(),
                "--context-tokens",
                "24",
                // Scores that leave the tiny encoder out: the budget decides what is read.
                "--sentence-weights",
                "0,0,0,1,0",
                "--widen-tokens",
                widen,
            ])
        };
        let off = ask("0");
        let on = ask("400");
        assert!(off.get("widened").is_none(), "{name}: {off}");
        let first = off["answer"].as_str().unwrap();
        let read_first = read(&off);
        let documents = || read_first.iter().map(|(t, s)| (t.as_str(), s.as_str()));
        eprintln!("{name}: {first:?} from {read_first:?}");
        assert!(
            !read_first.is_empty(),
            "{name}: the first prompt holds a sentence"
        );
        let default = common::default_llm().as_deref() == Some(llm.as_path());
        if rag::generate::grounded::grounded(first, documents()) {
            // The default model makes up a name the prompt does not hold: the test needs that.
            assert!(
                !default,
                "{name}: {first:?} is in the prompt (the test needs it not)"
            );
            assert!(on.get("widened").is_none(), "{name}: {on}");
            assert_eq!(on["answer"], off["answer"], "{name}");
            continue;
        }
        let widened = &on["widened"];
        assert_eq!(widened["first"], off["answer"], "{name}: {on}");
        assert_eq!(widened["first_context_tokens"], 24, "{name}");
        assert_eq!(
            widened["first_prompt_tokens"], off["prompt_tokens"],
            "{name}"
        );
        assert_eq!(on["context_tokens"], 400, "{name}");
        // Both prompts were read: the answer's costs count the first one too.
        let wider = on["prompt_tokens"].as_u64().unwrap();
        assert!(
            wider > 2 * off["prompt_tokens"].as_u64().unwrap(),
            "{name}: {wider} prompt tokens for both"
        );
        let read_again = read(&on);
        assert!(
            read_again.iter().any(|(_, s)| s.contains("Pemberton")),
            "{name}: {read_again:?}"
        );
        // The default model reads the answer off the wider context (the 0.5B may not).
        if default {
            assert!(
                on["answer"].as_str().unwrap().contains("Pemberton"),
                "{name}: {on}"
            );
        }
    }
}
