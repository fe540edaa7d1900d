//! `rag eval` runs end to end on a tiny generated model and corpus (reports, resuming, the
//! index built for missing depths), generation with the real default GGUF when it is present,
//! and the one-line errors of `rag ask` and `rag eval`.

mod common;

use std::path::{Path, PathBuf};
use std::time::Instant;

use rag::ask::{AskSettings, Pipeline};
use rag::corpus::{read_questions, Paragraph};
use rag::encoder::tiny::TinyBert;
use rag::encoder::{EncoderOptions, Precision};
use rag::eval::hotpot::{self, RunCell, RunConfig, RunOptions};
use rag::generate::{Generation, Generator, GeneratorOptions, PromptSpec, PromptStyle};
use rag::index::BuildOptions;
use rag::progress::ProgressMode;
use rag::retrieve::{Mode, Queries, Retriever, SearchResponse, SearchTimings, Strategy};
use serde_json::Value;

/// `records` HotpotQA questions, each asking about its first paragraph ("fact n") among
/// three.
fn write_questions(path: &Path, records: usize) {
    let records: Vec<serde_json::Value> = (0..records)
        .map(|r| {
            let context: Vec<serde_json::Value> = (0..3)
                .map(|p| {
                    let n = r * 3 + p;
                    serde_json::json!([format!("fact {n}"), [format!("Fact {n} concerns item {}.", n * 11)]])
                })
                .collect();
            serde_json::json!({"_id": format!("q{r}"), "question": format!("What does fact {} concern?", r * 3),
                               "answer": format!("item {}", r * 33), "type": "bridge",
                               "supporting_facts": [[format!("fact {}", r * 3), 0]], "context": context})
        })
        .collect();
    std::fs::write(path, serde_json::to_vec(&records).unwrap()).unwrap();
}

fn build_options(model: &Path, corpus: &Path, index_dir: &Path) -> BuildOptions {
    BuildOptions {
        index_dir: index_dir.to_path_buf(),
        corpus: vec![corpus.to_path_buf()],
        model_dir: model.to_path_buf(),
        encoder: EncoderOptions::default(),
        layers: None,
        dim: None,
        reduce: None,
        ann: Default::default(),
        template: "{title}: {text}".into(),
        chunk_size: 16,
        skip_bad: false,
        fresh: false,
        shard: None,
        progress: ProgressMode::Quiet,
        vectors_from: None,
    }
}

#[test]
fn retrieval_runs_build_missing_depths_report_and_resume() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("model");
    TinyBert::default().write(&model).unwrap();
    let corpus = tmp.path().join("q.json");
    write_questions(&corpus, 12);
    let base = tmp.path().join("index").join("default");

    // No index yet: one is built with both depths, then found again, also for a subset.
    let options = build_options(&model, &corpus, &base);
    let dir = rag::eval::hotpot::index_with_depths(&options, &[1, 3]).unwrap();
    assert_ne!(dir, base);
    assert!(dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("eval-L1-3-"));
    assert_eq!(
        rag::eval::hotpot::index_with_depths(&options, &[3]).unwrap(),
        dir
    );
    // Another model's evaluation never reads those vectors: it gets an index of its own.
    let other_model = tmp.path().join("other-model");
    TinyBert {
        seed: 8,
        ..TinyBert::default()
    }
    .write(&other_model)
    .unwrap();
    let other =
        rag::eval::hotpot::index_with_depths(&build_options(&other_model, &corpus, &base), &[3])
            .unwrap();
    assert_ne!(other, dir);
    assert_eq!(
        rag::index::Manifest::read(&other).unwrap().model.path,
        other_model
    );

    let retriever = Retriever::open(&dir, None, Precision::F32).unwrap();
    let questions = read_questions(&corpus, usize::MAX).unwrap();
    let cells = vec![
        RunCell::retrieval(1, 16),
        RunCell::retrieval(3, 8),
        RunCell::retrieval(3, 16),
    ];
    let config = common::retrieval_config(
        &corpus,
        questions.len(),
        cells.clone(),
        Strategy::new(Mode::Bm25, 1).unwrap(),
        &dir,
    );
    let run_dir = tmp.path().join("runs").join("r");
    let options = |config: &RunConfig, fresh| RunOptions {
        dir: run_dir.clone(),
        config: config.clone(),
        questions: &questions,
        retriever: Some(&retriever),
        pipeline: None,
        rankings: None,
        fresh,
        progress: ProgressMode::Quiet,
    };
    let summary = hotpot::run(&options(&config, false)).unwrap();
    assert_eq!(summary.cells.len(), 3);
    // BM25 finds "fact n" for "What does fact n concern?" first.
    assert_eq!(summary.cells[0].recall[&1], 1.0);
    assert_eq!(summary.cells[0].exact_match, None);
    for file in ["summary.json", "summary.md", "config.json"] {
        assert!(run_dir.join(file).is_file(), "{file}");
    }
    if Path::new("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf").exists() {
        let png = std::fs::read(run_dir.join("heatmap.png")).unwrap();
        assert_eq!(&png[1..4], b"PNG");
    }
    let table = std::fs::read_to_string(run_dir.join("summary.md")).unwrap();
    assert!(table.contains("| 3 | 8 | 12 | 100.0 |"), "{table}");

    // Question by question across the cells: a run stopped anywhere has its cells on the
    // same questions.
    let predictions = run_dir.join(hotpot::PREDICTIONS_FILE);
    for (i, p) in hotpot::read_predictions(&predictions)
        .unwrap()
        .iter()
        .enumerate()
    {
        assert_eq!(
            (p.id.as_str(), p.cell),
            (
                questions[i / cells.len()].id.as_str(),
                cells[i % cells.len()]
            ),
            "line {i}"
        );
    }

    // A crash mid-write: keep 20 whole lines and half of the next. The rerun drops the
    // half line and makes exactly the missing predictions.
    let text = std::fs::read_to_string(&predictions).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 36);
    let cut = format!("{}\n{}", lines[..20].join("\n"), &lines[20][..10]);
    std::fs::write(&predictions, cut).unwrap();
    let resumed = hotpot::run(&options(&config, false)).unwrap();
    assert!(
        resumed.seconds >= summary.seconds,
        "a resumed run reports the time of every session"
    );
    let again = hotpot::read_predictions(&predictions).unwrap();
    assert_eq!(again.len(), 36);
    let mut keys: Vec<(String, RunCell)> = again.iter().map(|p| (p.id.clone(), p.cell)).collect();
    keys.sort_by_key(|(id, c)| (id.clone(), c.layers, c.dim));
    keys.dedup();
    assert_eq!(keys.len(), 36);

    // Other settings in the same directory are refused unless --fresh.
    let mut other = config.clone();
    other.top_k = 3;
    let err = hotpot::run(&options(&other, false))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("other settings"), "{err}");
    hotpot::run(&options(&other, true)).unwrap();
    assert_eq!(hotpot::read_predictions(&predictions).unwrap().len(), 36);

    // Dense cells share one encoding of the questions at every depth; each must rank as a
    // question encoded on its own at that depth does.
    let mut dense = config.clone();
    dense.mode = Mode::Dense;
    hotpot::run(&options(&dense, true)).unwrap();
    for prediction in hotpot::read_predictions(&predictions).unwrap() {
        let mut timings = SearchTimings::default();
        let alone = retriever
            .rank(
                Queries::texts(&[prediction.question.as_str()]),
                Strategy::default(),
                prediction.cell.searched().unwrap(),
                3,
                &mut timings,
            )
            .unwrap()
            .remove(0);
        let titles: Vec<String> = alone
            .iter()
            .map(|s| retriever.index.document(s.id).unwrap().title)
            .collect();
        assert_eq!(prediction.retrieved[..3], titles[..], "{}", prediction.cell);
    }
}

#[test]
fn default_generator_answers_from_context_and_trims_it() {
    let Some(llm) = common::any_llm("default_generator_answers_from_context_and_trims_it") else {
        return;
    };
    let generator = Generator::load(
        &llm,
        &GeneratorOptions {
            ctx_size: Some(512),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(generator.has_chat_template());
    let paris = Paragraph {
        title: "Zorbland".into(),
        text: "The capital of Zorbland is Quimby, a port city.".into(),
        links: Vec::new(),
        source: None,
    };
    let filler = Paragraph {
        title: "Filler".into(),
        text: "Nothing of note happened here. ".repeat(40),
        links: Vec::new(),
        source: None,
    };
    let spec = PromptSpec::from_flags(Some(PromptStyle::Chat), None).unwrap();
    let pipeline = from_paragraphs(&generator, &spec);
    let whole = whole_paragraphs();
    let question = "What is the capital of Zorbland?";
    let answer = |passages: &[Paragraph], on_token: &mut dyn FnMut(&str) -> bool| {
        pipeline
            .answer_from(
                SearchResponse::of_passages(question, passages),
                &whole,
                Instant::now(),
                on_token,
            )
            .unwrap()
    };
    let mut streamed = String::new();
    let first = answer(std::slice::from_ref(&paris), &mut |s| {
        streamed.push_str(s);
        true
    });
    let g = &first.generation;
    assert!(g.text.contains("Quimby"), "{g:?}");
    assert_eq!(streamed.trim(), g.text);
    assert!(!g.text.contains('\n'));
    assert!(g.generated_tokens >= 1 && g.generated_tokens <= generator.max_tokens());
    assert!(g.prompt_tokens > 20 && g.llama_prompt_eval_ms > 0.0);
    assert_eq!(first.dropped_paragraphs, 0);
    // A listener that stops wanting tokens (a client gone) ends generation at once.
    let stopped = answer(std::slice::from_ref(&paris), &mut |_| false);
    assert_eq!(stopped.generation.stop, "stopped", "{stopped:?}");
    assert!(stopped.generation.generated_tokens < g.generated_tokens.max(2));
    // Four 300-token paragraphs overflow 512 tokens: the lowest-ranked go.
    let passages = vec![paris, filler.clone(), filler.clone(), filler];
    let trimmed = answer(&passages, &mut |_| true);
    assert!(trimmed.dropped_paragraphs >= 2, "{trimmed:?}");
    assert!(trimmed.generation.prompt_tokens + generator.max_tokens() <= 512);
}

fn one_line_error(args: &[&str]) -> String {
    let out = common::rag().args(args).output().unwrap();
    assert!(!out.status.success(), "{args:?} succeeded");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    stderr
}

#[test]
fn ask_and_eval_report_bad_input_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let none = tmp.path().join("none");
    let none = none.to_str().unwrap();
    let long = "why ".repeat(2000);
    one_line_error(&["ask", "  ", "--index", none]);
    one_line_error(&["ask", &long, "--index", none]);
    assert!(one_line_error(&["ask", "who?", "--index", none]).contains("no index"));
    let junk = tmp.path().join("junk.gguf");
    std::fs::write(&junk, b"GGUF but not really").unwrap();
    let err = one_line_error(&[
        "eval",
        "--oracle",
        "--llm",
        junk.to_str().unwrap(),
        "--questions",
        none,
    ]);
    assert!(err.contains("none"), "{err}");
    if let Some(data) = common::data_dir() {
        let questions = data.join("hotpotqa/hotpot_dev_distractor_sample.json");
        let q = questions.to_str().unwrap();
        let err = one_line_error(&[
            "eval",
            "--oracle",
            "--limit",
            "1",
            "--questions",
            q,
            "--llm",
            junk.to_str().unwrap(),
            "--runs-dir",
            none,
        ]);
        assert!(err.contains("unsupported GGUF version"), "{err}");
        let err = one_line_error(&[
            "eval",
            "--layers",
            "1,3",
            "--no-generate",
            "--limit",
            "1",
            "--questions",
            q,
            "--index",
            none,
        ]);
        assert!(err.contains("--sweep"), "{err}");
    } else {
        common::missing(
            "ask_and_eval_report_bad_input_in_one_line (eval part)",
            "data",
            "no shared HotpotQA data",
        );
    }
}

/// Three made-up paragraphs no model knows from training.
fn zorbland() -> [Paragraph; 3] {
    [
        (
            "Zorbland",
            "The capital of Zorbland is Quimby, a port city founded in 1802.",
        ),
        (
            "Quimby",
            "Quimby has a population of 40,000. Its mayor is Ada Lorne.",
        ),
        (
            "Ada Lorne",
            "Ada Lorne was born in Vesk in 1961 and studied law.",
        ),
    ]
    .map(|(title, text)| paragraph(title, text))
}

/// A paragraph of `title` and `text`, no links.
fn paragraph(title: &str, text: &str) -> Paragraph {
    Paragraph {
        title: title.into(),
        text: text.into(),
        links: Vec::new(),
        source: None,
    }
}

/// A pipeline that answers from the paragraphs it is given (no index).
fn from_paragraphs<'a>(generator: &'a Generator, spec: &'a PromptSpec) -> Pipeline<'a> {
    Pipeline {
        retriever: None,
        generator,
        spec,
    }
}

/// Settings that put the paragraphs in the prompt whole.
fn whole_paragraphs() -> AskSettings {
    AskSettings {
        context_tokens: 0,
        ..Default::default()
    }
}

/// The answer `llm` gives to `question` from `passages` whole, and how it was generated.
fn generated(
    llm: &Path,
    options: &GeneratorOptions,
    passages: &[Paragraph],
    question: &str,
) -> (String, Generation) {
    let generator = Generator::load(llm, options).unwrap();
    let spec = PromptSpec::from_flags(None, None).unwrap();
    let pipeline = from_paragraphs(&generator, &spec);
    let whole = whole_paragraphs();
    let response = SearchResponse::of_passages(question, passages);
    let result = pipeline
        .answer_from(response, &whole, Instant::now(), |_| true)
        .unwrap();
    (result.answer, result.generation)
}

/// The answer and its yes/no margin.
fn answer(
    llm: &Path,
    options: &GeneratorOptions,
    passages: &[Paragraph],
    question: &str,
) -> (String, Option<f32>) {
    let (text, generation) = generated(llm, options, passages, question);
    (text, generation.yes_no_margin)
}

/// On every generator present: a yes/no answer records the margin between its yes and no
/// tokens, and the bias decides the answer on either side of it (0 is greedy); other answers
/// have no margin and are left alone by any bias.
#[test]
fn the_yes_no_bias_decides_yes_or_no_on_the_real_model() {
    let llms = common::all_llms("the_yes_no_bias_decides_yes_or_no_on_the_real_model");
    let passages = zorbland();
    // The first token's margin: the facts step is tested on its own below.
    let with_bias = |bias: f32| GeneratorOptions {
        yes_no_bias: bias,
        yes_no_facts: false,
        ..Default::default()
    };
    for llm in llms {
        let question = "Was the mayor of Quimby born in Vesk?";
        let (greedy, margin) = answer(&llm, &with_bias(0.0), &passages, question);
        let margin =
            margin.unwrap_or_else(|| panic!("{}: no margin for {greedy:?}", llm.display()));
        let says = |text: &str, word: &str| text.to_lowercase().starts_with(word);
        assert!(
            says(&greedy, if margin > 0.0 { "yes" } else { "no" }),
            "{greedy} at {margin}"
        );
        let (below, m) = answer(&llm, &with_bias(margin - 0.25), &passages, question);
        assert!(
            says(&below, "yes") && m == Some(margin),
            "{}: {below} {m:?}",
            llm.display()
        );
        let (above, m) = answer(&llm, &with_bias(margin + 0.25), &passages, question);
        assert!(
            says(&above, "no") && m == Some(margin),
            "{}: {above} {m:?}",
            llm.display()
        );
        let (capital, m) = answer(
            &llm,
            &with_bias(100.0),
            &passages,
            "What is the capital of Zorbland?",
        );
        assert!(
            capital.contains("Quimby") && m.is_none(),
            "{}: {capital} {m:?}",
            llm.display()
        );
    }
}

/// On every generator present: with `yes_no_facts`, an answer that opens with yes or no is
/// decided after the model has written facts (returned beside the answer), the answer is the
/// yes or the no alone, and the bias applies to the margin read after the facts; an answer
/// that is neither writes no facts.
#[test]
fn yes_no_answers_are_decided_after_the_facts_on_the_real_model() {
    let llms = common::all_llms("yes_no_answers_are_decided_after_the_facts_on_the_real_model");
    let passages = zorbland();
    let with_bias = |bias: f32| GeneratorOptions {
        yes_no_bias: bias,
        yes_no_facts: true,
        ..Default::default()
    };
    let question = "Was the mayor of Quimby born in Vesk?";
    for llm in llms {
        let name = llm.display();
        let (text, generation) = generated(&llm, &with_bias(0.0), &passages, question);
        let facts = generation.yes_no_facts.clone();
        let margin = generation.yes_no_margin;
        assert!(
            facts.as_deref().is_some_and(|f| f.len() > 2) && generation.stop == "yes_no",
            "{name}: {text:?} {generation:?}"
        );
        let margin = margin.unwrap_or_else(|| panic!("{name}: no margin"));
        let word = text.trim().to_lowercase();
        assert_eq!(
            word,
            if margin > 0.0 { "yes" } else { "no" },
            "{name}: {margin}"
        );
        // The facts are greedy, so the same margin comes back; a bias past it flips the answer.
        let (flipped, again) = generated(&llm, &with_bias(margin.abs() + 1.0), &passages, question);
        assert_eq!(again.yes_no_margin, Some(margin), "{name}");
        assert_eq!(flipped.trim().to_lowercase(), "no", "{name}: {margin}");
        let (yes, _) = generated(&llm, &with_bias(-margin.abs() - 1.0), &passages, question);
        assert_eq!(yes.trim().to_lowercase(), "yes", "{name}: {margin}");
        let (capital, other) = generated(
            &llm,
            &with_bias(0.0),
            &passages,
            "What is the capital of Zorbland?",
        );
        assert!(
            capital.contains("Quimby") && other.yes_no_facts.is_none(),
            "{name}: {capital} {other:?}"
        );
    }
}

/// On every generator present: an answer naming one of the question's two options records the
/// margin between their log-probabilities, and the bias decides the option on either side of
/// it; with the choice off the greedy answer stands and nothing is recorded.
#[test]
fn the_option_bias_decides_between_the_options_on_the_real_model() {
    let llms = common::all_llms("the_option_bias_decides_between_the_options_on_the_real_model");
    let passages = zorbland();
    let with_bias = |option_bias: Option<f32>| GeneratorOptions {
        option_bias,
        ..Default::default()
    };
    let question = "Which city has a mayor, Quimby or Vesk?";
    for llm in llms {
        let (greedy, g) = generated(&llm, &with_bias(None), &passages, question);
        assert!(g.option_choice.is_none(), "{}: {g:?}", llm.display());
        let (_, g) = generated(&llm, &with_bias(Some(0.0)), &passages, question);
        let choice = g
            .option_choice
            .unwrap_or_else(|| panic!("{}: no choice for {greedy:?}", llm.display()));
        assert_eq!(choice.options, ["Quimby".to_string(), "Vesk".to_string()]);
        assert_eq!(choice.greedy_answer, greedy, "{}", llm.display());
        assert!(choice.margin.is_finite());
        for (bias, side) in [(choice.margin - 0.25, 0), (choice.margin + 0.25, 1)] {
            let (text, g) = generated(&llm, &with_bias(Some(bias)), &passages, question);
            let decided = g.option_choice.expect("decided at every bias");
            assert_eq!(decided.margin, choice.margin, "{}", llm.display());
            assert_eq!(
                (decided.chosen, text.as_str()),
                (side, choice.options[side].as_str())
            );
        }
    }
}

/// Zorbland with a second person and a dated founding, for the option and date steps.
fn zorbland_dated() -> Vec<Paragraph> {
    let mut passages = zorbland().to_vec();
    passages.push(paragraph(
        "Bo Renn",
        "Bo Renn was born in Quimby on 2 May 1948 and became a painter.",
    ));
    passages[0].text =
        "The capital of Zorbland is Quimby, a port city founded on 4 March 1802.".into();
    passages
}

/// On every generator present: with `option_facts`, an answer naming one of the question's
/// two options is decided after the model has written facts (recorded with the choice), by
/// the options' margin read after them, which the bias moves as it does without the facts;
/// the cache is left holding the prompt (the next question reuses it).
#[test]
fn option_answers_are_decided_after_the_facts_on_the_real_model() {
    let llms = common::all_llms("option_answers_are_decided_after_the_facts_on_the_real_model");
    let passages = zorbland_dated();
    // The dates would decide this question first (`option_dates`): the facts are tested alone.
    let with = |option_bias: Option<f32>| GeneratorOptions {
        option_bias,
        option_facts: true,
        option_dates: false,
        ..Default::default()
    };
    let question = "Who was born first, Ada Lorne or Bo Renn?";
    for llm in llms {
        let name = llm.display();
        let (text, g) = generated(&llm, &with(None), &passages, question);
        let choice = g
            .option_choice
            .clone()
            .unwrap_or_else(|| panic!("{name}: no choice for {text:?}: {g:?}"));
        assert_eq!(
            choice.options,
            ["Ada Lorne".to_string(), "Bo Renn".to_string()]
        );
        assert!(
            choice.facts.as_deref().is_some_and(|f| f.len() > 2) && choice.margin.is_finite(),
            "{name}: {choice:?}"
        );
        assert_eq!(
            choice.chosen,
            usize::from(choice.margin <= 0.0),
            "{name}: {choice:?}"
        );
        assert_eq!(text, choice.options[choice.chosen], "{name}");
        for (bias, side) in [(choice.margin - 0.25, 0), (choice.margin + 0.25, 1)] {
            let (text, g) = generated(&llm, &with(Some(bias)), &passages, question);
            let decided = g.option_choice.expect("decided at every bias");
            assert_eq!(
                decided.margin, choice.margin,
                "{name}: the facts are greedy"
            );
            assert_eq!(
                (decided.chosen, text.as_str()),
                (side, choice.options[side].as_str())
            );
        }
    }
}

/// On every generator in `llms`: with the step `with(false)` leaves off, `question` is answered
/// `generated` as generated; with it on (`with(true)`), the generated text is the same and the
/// answer is `rewritten`.
fn assert_rewritten_after_generation(
    llms: Vec<PathBuf>,
    with: impl Fn(bool) -> GeneratorOptions,
    passages: &[Paragraph],
    question: &str,
    [generated_text, rewritten]: [&str; 2],
) {
    for llm in llms {
        let name = llm.display();
        let (plain, g) = generated(&llm, &with(false), passages, question);
        assert_eq!(plain, g.text, "{name}: nothing rewritten with the step off");
        assert_eq!(
            plain.trim(),
            generated_text,
            "{name}: the test needs {generated_text:?} generated, to rewrite"
        );
        let (after, g) = generated(&llm, &with(true), passages, question);
        assert_eq!(
            (g.text.trim(), after.as_str()),
            (generated_text, rewritten),
            "{name}"
        );
    }
}

/// On every generator present: a bare year answering a "when" question becomes the full date
/// the documents give (`full_dates`, on by default), and stays the year with it off.
#[test]
fn a_year_asked_when_becomes_the_documents_full_date_on_the_real_model() {
    let llms =
        common::all_llms("a_year_asked_when_becomes_the_documents_full_date_on_the_real_model");
    let with = |full_dates: bool| GeneratorOptions {
        full_dates,
        ..Default::default()
    };
    assert_rewritten_after_generation(
        llms,
        with,
        &zorbland_dated(),
        "When was Quimby founded? Give only the year.",
        ["1802", "4 March 1802"],
    );
}

/// On every generator present: a count asked for in digits, which the documents write only as
/// a word, is answered with the documents' word (`number_words`, on by default), and stays
/// the digits with it off.
#[test]
fn a_bare_number_becomes_the_documents_number_word_on_the_real_model() {
    let llms =
        common::all_llms("a_bare_number_becomes_the_documents_number_word_on_the_real_model");
    let passages = [paragraph(
        "Glimmerfly",
        "The glimmerfly is an insect of Zorbland. It has six legs and two pairs of wings.",
    )];
    let with = |number_words: bool| GeneratorOptions {
        number_words,
        ..Default::default()
    };
    assert_rewritten_after_generation(
        llms,
        with,
        &passages,
        "How many legs does the glimmerfly have? Answer with digits.",
        ["6", "six"],
    );
}

/// `question` answered by `llm` with `options` from `passages` whole, the default prompt.
fn ask_whole(
    llm: &Path,
    options: &GeneratorOptions,
    passages: &[Paragraph],
    question: &str,
) -> rag::ask::AskResult {
    let generator = Generator::load(llm, options).unwrap();
    let spec = PromptSpec::from_flags(None, None).unwrap();
    let response = SearchResponse::of_passages(question, passages);
    from_paragraphs(&generator, &spec)
        .answer_from(response, &whole_paragraphs(), Instant::now(), |_| true)
        .unwrap()
}

/// `question` answered by `llm` from `passages` whole with a step after generation off, then
/// on (`options` gives the generator's options either way); off, the answer is the generated
/// one.
fn off_and_on(
    llm: &Path,
    passages: &[Paragraph],
    question: &str,
    options: impl Fn(bool) -> GeneratorOptions,
) -> (rag::ask::AskResult, rag::ask::AskResult) {
    let off = ask_whole(llm, &options(false), passages, question);
    let name = llm.display();
    assert_eq!(off.answer, off.generation.text.trim(), "{name}: {question}");
    (off, ask_whole(llm, &options(true), passages, question))
}

/// On every generator present: an answer to "who was born first, A or B?" naming either is
/// the title whose document gives the earlier year (`option_dates`, on by default), recorded
/// with both years; with it off the answer is the generated one and nothing is recorded.
#[test]
fn an_earlier_or_later_choice_is_decided_by_the_documents_years_on_the_real_model() {
    let llms = common::all_llms(
        "an_earlier_or_later_choice_is_decided_by_the_documents_years_on_the_real_model",
    );
    let passages = zorbland_dated();
    for (question, right) in [
        ("Who was born first, Ada Lorne or Bo Renn?", "Bo Renn"),
        ("Who is younger, Bo Renn or Ada Lorne?", "Ada Lorne"),
    ] {
        for llm in &llms {
            let name = llm.display();
            let (off, on) = off_and_on(llm, &passages, question, |option_dates| GeneratorOptions {
                option_dates,
                ..Default::default()
            });
            assert!(off.dated_choice.is_none(), "{name}: {question}");
            let choice = on.dated_choice.unwrap_or_else(|| {
                panic!(
                    "{name}: {question}: not decided (the test needs an answer naming one): {:?}",
                    on.answer
                )
            });
            assert_eq!(choice.answer_before, off.answer, "{name}: greedy both ways");
            let born = if choice.options[0] == "Ada Lorne" {
                [1961, 1948]
            } else {
                [1948, 1961]
            };
            assert_eq!(choice.years, born, "{name}: {question}");
            assert_eq!(on.answer, right, "{name}: {question}");
        }
    }
}

/// On every generator present: an answer to "which has more acts, A or B?" naming exactly one
/// of them (or giving a count) is the title whose document gives the larger count
/// (`option_counts`, on by default), recorded with both counts; with it off the answer is the
/// generated one and nothing is recorded. An answer naming both ("A has more acts than B", the
/// 0.5B's way) is decided too, one naming neither is left as generated; each model must have
/// at least one of the questions decided.
/// The operas are made up, so the model knows nothing of them but the prompt.
#[test]
fn a_more_or_fewer_choice_is_decided_by_the_documents_counts_on_the_real_model() {
    let llms = common::all_llms(
        "a_more_or_fewer_choice_is_decided_by_the_documents_counts_on_the_real_model",
    );
    let passages = vec![
        paragraph(
            "Vellamira",
            "Vellamira is an opera in two acts by Oskar Thenn, first staged in Quimby.",
        ),
        paragraph(
            "The Glass Harbour",
            "The Glass Harbour is an opera in seven acts by Ada Lorne, set in a port city.",
        ),
    ];
    for llm in &llms {
        let name = llm.display();
        let mut decided = 0;
        let mut undecided = Vec::new();
        for (question, right) in [
            (
                "Which opera has more acts, Vellamira or The Glass Harbour?",
                "The Glass Harbour",
            ),
            (
                "Which opera has fewer acts, The Glass Harbour or Vellamira?",
                "Vellamira",
            ),
            (
                "Which has more acts, The Glass Harbour or Vellamira?",
                "The Glass Harbour",
            ),
        ] {
            let (off, on) =
                off_and_on(llm, &passages, question, |option_counts| GeneratorOptions {
                    option_counts,
                    ..Default::default()
                });
            assert!(off.counted_choice.is_none(), "{name}: {question}");
            let Some(choice) = on.counted_choice else {
                let said = off.answer.to_lowercase();
                let names = ["vellamira", "glass harbour"].map(|t| said.contains(t));
                assert_eq!(names, [false; 2], "{name}: {question}: {said:?} names one");
                assert_eq!(on.answer, off.answer, "{name}: {question}");
                undecided.push(off.answer);
                continue;
            };
            decided += 1;
            assert_eq!(choice.answer_before, off.answer, "{name}: greedy both ways");
            let acts = if choice.options[0] == "Vellamira" {
                [2, 7]
            } else {
                [7, 2]
            };
            assert_eq!(
                (choice.counts, choice.thing.as_str()),
                (acts, "acts"),
                "{name}"
            );
            assert_eq!(on.answer, right, "{name}: {question}");
        }
        assert!(
            decided > 0,
            "{name}: no question decided by the counts: {undecided:?}"
        );
    }
}

/// On every generator present: "Is A taller than B?" answered yes or no is answered by the
/// two documents' heights, feet against metres (`option_measures`, on by default), recorded
/// with both, the towns' populations beside them not read as heights; so is "which is taller,
/// A or B?" where the answer names either. With it off the answer is the generated one and
/// nothing is recorded. The towers are made up, so the model knows nothing of them but the
/// prompt; each model must have at least one of the questions decided.
#[test]
fn a_taller_or_more_populous_comparison_is_decided_by_the_documents_measures_on_the_real_model() {
    let llms = common::all_llms(
        "a_taller_or_more_populous_comparison_is_decided_by_the_documents_measures_on_the_real_model",
    );
    let passages = vec![
        paragraph(
            "Vellan Spire",
            "The Vellan Spire is a 250 m office skyscraper in Ostrel, completed in 1999. \
             Ostrel is a port town; the population was 8,412 at the 2010 census.",
        ),
        paragraph(
            "Quimby Tower",
            "The Quimby Tower is a 1,020 ft (311 m) residential tower in Quimby. \
             Quimby is a mountain town with a population of 2,305.",
        ),
    ];
    for llm in &llms {
        let name = llm.display();
        let mut decided = 0;
        let mut undecided = Vec::new();
        for (question, right, metres) in [
            (
                "Is the Vellan Spire taller than the Quimby Tower?",
                "no",
                [250.0, 310.9],
            ),
            (
                "Is the Quimby Tower taller than the Vellan Spire?",
                "yes",
                [310.9, 250.0],
            ),
            (
                "Which is taller, the Vellan Spire or the Quimby Tower?",
                "Quimby Tower",
                [250.0, 310.9],
            ),
        ] {
            let (off, on) = off_and_on(llm, &passages, question, |option_measures| {
                GeneratorOptions {
                    option_measures,
                    ..Default::default()
                }
            });
            assert!(off.measured_choice.is_none(), "{name}: {question}");
            let Some(choice) = on.measured_choice else {
                assert_eq!(on.answer, off.answer, "{name}: {question}");
                undecided.push(off.answer);
                continue;
            };
            decided += 1;
            assert_eq!(choice.answer_before, off.answer, "{name}: greedy both ways");
            assert_eq!(
                choice.measure,
                rag::generate::option_measures::Measure::Height
            );
            for (value, metres) in choice.values.iter().zip(metres) {
                assert!(
                    (value - metres).abs() < 0.1,
                    "{name}: {question}: {value} m"
                );
            }
            assert!(
                on.answer.eq_ignore_ascii_case(right),
                "{name}: {question}: {}",
                on.answer
            );
        }
        assert!(
            decided > 0,
            "{name}: no question decided by the heights: {undecided:?}"
        );
    }
}

/// On every generator present: a "yes" to whether two documents are both in a place becomes
/// "no" where one of them never mentions it (`shared_place`, on by default), and stays "yes"
/// with it off. The towers are made up, so the model knows nothing of them but the prompt.
#[test]
fn a_yes_to_both_in_a_place_becomes_no_where_a_document_lacks_it_on_the_real_model() {
    let llms = common::all_llms(
        "a_yes_to_both_in_a_place_becomes_no_where_a_document_lacks_it_on_the_real_model",
    );
    let passages = [
        paragraph(
            "Vellan Spire",
            "The Vellan Spire is a tall office tower in Ostrel, the second city of Zorbland.",
        ),
        paragraph(
            "Quimby Tower",
            "The Quimby Tower is a tall office tower in Quimby, a port on the Zorb coast.",
        ),
    ];
    // Plain greedy yes or no (no bias towards "no"), so that the models say "yes".
    let with = |shared_place: bool| GeneratorOptions {
        shared_place,
        yes_no_bias: 0.0,
        ..Default::default()
    };
    assert_rewritten_after_generation(
        llms,
        with,
        &passages,
        "Are the Vellan Spire and the Quimby Tower both in Zorbland?",
        ["Yes", "No"],
    );
}

/// On every generator present: with `extractive` every answer is a span of the prompt (case
/// aside) or a yes or a no, while the same questions answered freely leave the prompt at least
/// once (so the constraint did something); an answer that already was a span is unchanged.
#[test]
fn extractive_answers_are_spans_of_the_prompt_on_the_real_model() {
    let llms = common::all_llms("extractive_answers_are_spans_of_the_prompt_on_the_real_model");
    let passages = zorbland();
    let questions = [
        "What is the capital of Zorbland?",
        "How old was Ada Lorne when Quimby turned 150?",
        "What kind of place is Quimby? Describe it in your own words.",
        "In which century was the mayor of the capital of Zorbland born?",
        "Was Quimby founded before its mayor was born?",
    ];
    let mut prompt_text = rag::generate::prompt::CHAT_INSTRUCTION.to_string();
    for p in &passages {
        prompt_text.push_str(&format!("{} {}\n", p.title, p.text));
    }
    let is_span = |answer: &str, question: &str| {
        let answer = answer.trim().to_lowercase();
        ["yes", "no"].contains(&answer.as_str())
            || format!("{prompt_text}{question}")
                .to_lowercase()
                .contains(&answer)
    };
    for llm in llms {
        let with = |extractive: bool| GeneratorOptions {
            extractive,
            ..Default::default()
        };
        let mut left_the_prompt = 0;
        for question in questions {
            let (free, _) = answer(&llm, &with(false), &passages, question);
            let (kept, _) = answer(&llm, &with(true), &passages, question);
            assert!(
                is_span(&kept, question),
                "{}: {question} -> {kept:?}",
                llm.display()
            );
            if is_span(&free, question) {
                assert_eq!(kept, free, "{}: {question}", llm.display());
            } else {
                left_the_prompt += 1;
            }
        }
        assert!(
            left_the_prompt > 0,
            "{}: every free answer was a span",
            llm.display()
        );
    }
}

/// Reusing the previous prompt's opening from the KV cache changes no answer, on every
/// generator present; it does reuse it from the second question on.
#[test]
fn prefix_reuse_gives_the_same_answers() {
    let llms = common::all_llms("prefix_reuse_gives_the_same_answers");
    let passages = zorbland();
    let questions = [
        "What is the capital of Zorbland?",
        "Who is the mayor of the capital of Zorbland?",
        // Decided between its options (the choice is on below) after greedy decoding, which
        // scores both options in the cache and must leave the prompt there to reuse.
        "Which city has a mayor, Quimby or Vesk?",
        "Where was the mayor of Quimby born?",
        "When was Quimby founded?",
    ];
    let spec = PromptSpec::from_flags(None, None).unwrap();
    let whole = whole_paragraphs();
    for llm in llms {
        let answers = |reuse_prefix: bool| {
            let generator = Generator::load(
                &llm,
                &GeneratorOptions {
                    reuse_prefix,
                    option_bias: Some(0.0),
                    // The facts' step too must leave the prompt in the cache.
                    option_facts: true,
                    ..Default::default()
                },
            )
            .unwrap();
            let pipeline = from_paragraphs(&generator, &spec);
            questions
                .iter()
                .map(|q| {
                    let response = SearchResponse::of_passages(q, &passages);
                    let g = pipeline
                        .answer_from(response, &whole, Instant::now(), |_| true)
                        .unwrap()
                        .generation;
                    (g.text, g.reused_tokens, g.prompt_tokens)
                })
                .collect::<Vec<_>>()
        };
        let (reused, fresh) = (answers(true), answers(false));
        for ((q, with), without) in questions.iter().zip(&reused).zip(&fresh) {
            assert_eq!(with.0, without.0, "{}: {q}", llm.display());
        }
        assert_eq!(reused[0].1, 0);
        // The fixed opening (template head, instruction, the same documents) is reused.
        for r in &reused[1..] {
            assert!(r.1 > 20 && r.1 < r.2, "{}: {reused:?}", llm.display());
        }
        assert!(fresh.iter().all(|f| f.1 == 0), "{fresh:?}");
        assert!(reused[0].0.contains("Quimby"), "{reused:?}");
    }
}

/// `rag ask` end to end with a real generator: one JSON answer whose sources carry the sentences
/// the prompt held, within the context budget, and the budget 0 puts paragraphs in whole.
#[test]
fn rag_ask_answers_with_the_sentences_it_read() {
    let Some(llm) = common::any_llm("rag_ask_answers_with_the_sentences_it_read") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (model, corpus) = common::tiny_model_and_corpus(tmp.path(), 20, 3);
    let index_dir = tmp.path().join("index");
    rag::index::build(&common::tiny_build_options(&model, corpus, &index_dir)).unwrap();
    let ask = |budget: &str| {
        common::rag_json([
            "ask",
            "What is topic 7 about?",
            "--json",
            "--index",
            index_dir.to_str().unwrap(),
            "--llm",
            llm.to_str().unwrap(),
            "--context-tokens",
            budget,
            // The budget alone decides what is read (tests/widened_context.rs widens).
            "--widen-tokens",
            "0",
        ])
    };
    let short = ask("40");
    assert!(!short["answer"].as_str().unwrap().is_empty(), "{short}");
    assert_eq!(short["mode"], "fusion");
    assert_eq!(short["hops"], 2);
    let sources = short["sources"].as_array().unwrap();
    assert_eq!(sources.len(), 5);
    let read: Vec<&Value> = sources
        .iter()
        .flat_map(|s| s["sentences"].as_array().unwrap())
        .filter(|s| s["in_prompt"] == true)
        .collect();
    assert!(!read.is_empty(), "{short}");
    let whole = ask("0");
    assert!(
        short["prompt_tokens"].as_u64().unwrap() < whole["prompt_tokens"].as_u64().unwrap(),
        "{short} / {whole}"
    );
    assert!(whole["sources"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["in_prompt"] == true));
}

/// Sentence links end to end, on a real generator's tokens: with the other sentence weights 0,
/// sentences are kept in rank and document order, so a small budget holds only the first
/// paragraph; with the link weight, the paragraph its first sentence names comes next. Each
/// paragraph's first sentence names the next one's title, in a ring, so whichever the retriever
/// ranks first, the named one is known.
#[test]
fn a_kept_sentence_brings_in_the_paragraph_it_names() {
    let Some(llm) = common::any_llm("a_kept_sentence_brings_in_the_paragraph_it_names") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let titles = [
        "Marlow Abbey",
        "Quenby Mill",
        "Harwick Bridge",
        "Tolland Fort",
        "Aldous Tower",
    ];
    let context: Vec<Value> = titles
        .iter()
        .enumerate()
        .map(|(i, title)| {
            let next = titles[(i + 1) % titles.len()];
            serde_json::json!([
                title,
                [
                    format!("{title} was raised by the builders of {next}. "),
                    "It stands on a hill above the old river valley. ",
                    "Its bells were cast in the winter of the long frost."
                ]
            ])
        })
        .collect();
    let index_dir = common::tiny_index_of(tmp.path(), Value::Array(context));
    let read = |weights: &str| {
        let answer = common::rag_json([
            "ask",
            "Who raised the abbey?",
            "--json",
            "--max-tokens",
            "1",
            "--index",
            index_dir.to_str().unwrap(),
            "--llm",
            llm.to_str().unwrap(),
            "--context-tokens",
            "50",
            // A one-token answer is found in no document: widened, it would read everything.
            "--widen-tokens",
            "0",
            "--sentence-weights",
            weights,
        ]);
        let sources = answer["sources"].as_array().unwrap().clone();
        let first = sources[0]["title"].as_str().unwrap().to_owned();
        let read: Vec<String> = sources
            .iter()
            .filter(|s| s["in_prompt"] == true)
            .map(|s| s["title"].as_str().unwrap().to_owned())
            .collect();
        (first, read)
    };
    let (first, without) = read("0,0,0,0,0");
    assert_eq!(
        without,
        vec![first.clone()],
        "the budget holds one paragraph"
    );
    let named = titles[(titles.iter().position(|t| *t == first).unwrap() + 1) % titles.len()];
    let (_, with) = read("0,0,0,0,1");
    assert!(
        with.contains(&first) && with.contains(&named.to_owned()),
        "{with:?}, named {named}"
    );
}

/// On every generator present: an answer that only repeats a phrase of its question is given
/// again with its first word forbidden (`answer_again`, on by default), recorded with both
/// answers, and the one kept is no echo; an answer that does not echo is the same either way.
/// The album is not in the prompt: the default model answers with the band, and the test
/// needs it to echo at least once.
#[test]
fn an_answer_echoing_its_question_is_given_again_on_the_real_model() {
    let llms = common::all_llms("an_answer_echoing_its_question_is_given_again_on_the_real_model");
    let passages = [
        paragraph(
            "Ada Lorne",
            "Ada Lorne is a Zorbish painter from Ostrel. She is married to the sailor Bo Renn.",
        ),
        paragraph(
            "Bo Renn",
            "Bo Renn is a Zorbish sailor, the only son of the weaver Cia Renn.",
        ),
        paragraph(
            "The Zorb Five",
            "The Zorb Five are a rock band from Ostrel, best known for the hit Moon Cart.",
        ),
    ];
    let questions = [
        "Who is the mother of Ada Lorne's husband?",
        "Which album by The Zorb Five contained the hit Moon Cart?",
        "What was the title of the debut studio album by The Zorb Five which contained the hit Moon Cart?",
    ];
    let documents = || passages.iter().map(|p| (p.title.as_str(), p.text.as_str()));
    for llm in &llms {
        let name = llm.display();
        let mut echoed = 0;
        for question in questions {
            let (off, on) = off_and_on(llm, &passages, question, |answer_again| GeneratorOptions {
                answer_again,
                ..Default::default()
            });
            assert!(off.echo.is_none(), "{name}: {question}");
            eprintln!("{name}: {question}: {:?}", off.answer);
            if !rag::generate::echo::echoes(question, &off.answer, documents()) {
                assert!(on.echo.is_none(), "{name}: {question}: {:?}", on.echo);
                assert_eq!(on.answer, off.answer, "{name}: {question}");
                continue;
            }
            echoed += 1;
            let echo = on
                .echo
                .unwrap_or_else(|| panic!("{name}: {question}: {:?} not given again", off.answer));
            assert_eq!(echo.echoed, off.answer, "{name}: {question}");
            assert_ne!(
                echo.again, echo.echoed,
                "{name}: {question}: the same answer again"
            );
            if echo.kept {
                assert_eq!(on.answer, echo.again.trim(), "{name}: {question}");
                assert!(
                    !rag::generate::echo::echoes(question, &on.answer, documents()),
                    "{name}: {question}: {:?}",
                    on.answer
                );
            } else {
                assert_eq!(on.answer, off.answer, "{name}: {question}");
            }
            eprintln!(
                "{name}: {question}: {:?} -> {:?} (kept: {})",
                echo.echoed, echo.again, echo.kept
            );
        }
        // The default model echoes where the prompt lacks the album (the 0.5B may not).
        if common::default_llm().as_deref() == Some(llm.as_path()) {
            assert!(
                echoed > 0,
                "{name}: no question was answered with an echo (the test needs one)"
            );
        }
    }
}
