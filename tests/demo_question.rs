//! The question `scripts/setup.sh` ends with, on the real models and the default index (issue
//! 58): "Were Scott Derrickson and Ed Wood of the same nationality?" must put both men's
//! nationality into the prompt and be answered "yes", at every encoder precision this CPU has.
//! Needs `index/default` (`scripts/setup.sh`, or `RAG_INDEX`) and the default generator;
//! without them it skips loudly, and fails with `RAG_REQUIRE=models,data` (CI), where
//! `scripts/test.sh` fetches the generator and builds an index first. On an AVX2-only CPU the
//! index is f32 and the questions are encoded in f32 and int8 (bf16 needs AVX-512 BF16); a bf16
//! or int8 index is tested by pointing `RAG_INDEX` at one (`rag index --precision int8`).

mod common;

use std::path::PathBuf;

use rag::ask::{AskResult, AskSettings, Pipeline};
use rag::encoder::Precision;
use rag::generate::{Generator, GeneratorOptions, PromptSpec};
use rag::retrieve::Retriever;

const QUESTION: &str = "Were Scott Derrickson and Ed Wood of the same nationality?";

fn default_index() -> PathBuf {
    std::env::var_os("RAG_INDEX")
        .map(PathBuf::from)
        .unwrap_or_else(|| common::repo_root().join("index/default"))
}

/// The demo question answered with every default at each encoder precision this CPU has.
fn answers() -> Option<Vec<(Precision, AskResult)>> {
    const TEST: &str = "demo_question";
    let index = default_index();
    if !index.join("manifest.json").is_file() {
        // Built from the data (scripts/test.sh builds one where data and models are required).
        common::missing(TEST, "data", "no index/default (scripts/setup.sh)");
        return None;
    }
    let Some(llm) = common::default_llm() else {
        common::missing(
            TEST,
            "models",
            "no default generator (scripts/fetch-models.sh llm)",
        );
        return None;
    };
    let generator = Generator::load(&llm, &GeneratorOptions::default()).unwrap();
    let spec = PromptSpec::from_flags(None, None).unwrap();
    let precisions: Vec<Precision> = [Precision::F32, Precision::Bf16, Precision::Int8]
        .into_iter()
        .filter(|p| p.available())
        .collect();
    eprintln!("{TEST}: encoder precisions on this CPU: {precisions:?}");
    Some(
        precisions
            .into_iter()
            .map(|precision| {
                let retriever = Retriever::open(&index, None, precision).unwrap();
                let pipeline = Pipeline::new(&retriever, &generator, &spec);
                let answer = pipeline
                    .ask(QUESTION, &AskSettings::default(), |_| true)
                    .unwrap();
                (precision, answer)
            })
            .collect(),
    )
}

#[test]
fn the_demo_question_gets_both_nationalities_into_the_prompt_and_yes() {
    let Some(answers) = answers() else { return };
    for (precision, answer) in answers {
        let read = |title: &str| -> Vec<String> {
            answer
                .sources
                .iter()
                .filter(|s| s.hit.title == title)
                .flat_map(|s| s.sentences.iter().filter(|t| t.in_prompt))
                .map(|t| t.text.clone())
                .collect()
        };
        for person in ["Scott Derrickson", "Ed Wood"] {
            let sentences = read(person);
            assert!(
                sentences.iter().any(|s| s.contains("American")),
                "{precision:?}: {person}'s nationality is not in the prompt: {sentences:?}\n{:#?}",
                answer.sources
            );
        }
        assert_eq!(
            answer.answer.trim().to_lowercase(),
            "yes",
            "{precision:?}: margin {:?}",
            answer.generation.yes_no_margin
        );
    }
}
