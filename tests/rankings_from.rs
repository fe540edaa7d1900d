//! `rag eval --rankings-from RUN`: a run reads what another run retrieved, title by title, from
//! an index of another model whose ids differ, and refuses a run that searched another way or
//! lacks a cell, by name.

mod common;

use std::path::Path;

use rag::encoder::tiny::TinyBert;
use rag::index::Index;

use common::{refused, run_result, succeed};

#[test]
fn a_run_reads_another_runs_rankings_by_title_from_any_index_of_the_corpus() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (model, corpus) = common::tiny_model_and_corpus(dir, 60, 5);
    // Another model, over the same paragraphs in reverse record order: other vectors, other ids.
    let other_model = dir.join("other-model");
    TinyBert {
        seed: 8,
        ..TinyBert::default()
    }
    .write(&other_model)
    .unwrap();
    let mut records: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(&corpus).unwrap()).unwrap();
    records.reverse();
    let reversed = dir.join("reversed.json");
    std::fs::write(&reversed, serde_json::to_vec(&records).unwrap()).unwrap();
    let (one, other) = (dir.join("one"), dir.join("other"));
    common::tiny_index(&model, &[&corpus], &one, &[]);
    common::tiny_index(&other_model, &[&reversed], &other, &[]);
    let first_title = |dir: &Path| Index::open(dir).unwrap().document(0).unwrap().title;
    assert_ne!(first_title(&one), first_title(&other));

    let questions = dir.join("questions.json");
    common::write_topic_questions(&questions, 25);
    let runs = dir.join("runs");
    let source = runs.join("one");
    let from = source.to_str().unwrap();
    let eval = |index: &Path, name: &str, mode_layers: (&str, &str), extra: &[&str]| {
        common::retrieval_eval_args(index, &questions, &runs, name, mode_layers, extra)
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
    };
    const DENSE_3: (&str, &str) = ("dense", "3");
    succeed(&eval(&one, "one", DENSE_3, &[]));
    succeed(&eval(&other, "other", DENSE_3, &[]));
    succeed(&eval(
        &other,
        "borrowed",
        DENSE_3,
        &["--rankings-from", from],
    ));

    let (a, a_cells) = run_result(&source);
    let (own, _) = run_result(&runs.join("other"));
    let (borrowed, borrowed_cells) = run_result(&runs.join("borrowed"));
    // The other model ranks otherwise, so reading the first run's rankings is what made these
    // equal.
    assert_ne!(own, a);
    assert_eq!(borrowed, a);
    assert!(
        a_cells[0]["recall"]["10"].as_f64().unwrap() > 0.0,
        "{a_cells}"
    );
    assert_eq!(borrowed_cells[0]["recall"], a_cells[0]["recall"]);
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(runs.join("borrowed/config.json")).unwrap()).unwrap();
    assert_eq!(config["rankings_from"], from);

    // Each refusal: the run's name, its mode and depth, its flags, and what its line must say.
    let not_a_run = questions.to_str().unwrap();
    let refusals: [(&str, (&str, &str), &[&str], &[&str]); 4] = [
        (
            "bm25",
            ("bm25", "3"),
            &["--rankings-from", from],
            &["ranked with dense", "bm25"],
        ),
        (
            "shallow",
            ("dense", "1"),
            &["--rankings-from", from],
            &["has no ranking for question q0 at layers 1, dim 16"],
        ),
        (
            "deep",
            DENSE_3,
            &["--rankings-from", from, "--top-k", "20"],
            &["ranked 10 paragraphs deep, this run reads 20"],
        ),
        (
            "nowhere",
            DENSE_3,
            &["--rankings-from", not_a_run],
            &["is not a run folder"],
        ),
    ];
    for (name, mode_layers, extra, expected) in refusals {
        let line = refused(&eval(&other, name, mode_layers, extra));
        for part in expected {
            assert!(line.contains(part), "{name}: {line}");
        }
    }
}
