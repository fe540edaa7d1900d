//! One evaluation run: every question at every cell of the grid (a depth and a size, or the
//! gold paragraphs for `--oracle`), one line of `predictions.jsonl` per question and cell.
//!
//! Resuming: the settings are kept in `config.json`; a run started again with the same settings
//! reads the predictions already written and does only the rest. Lines are appended whole, and
//! a line cut short by a crash is dropped on the next start. The answers go question by question
//! across the cells, so a run stopped early still compares its cells on the same questions.

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::record::{read_predictions, Prediction, PredictionTimings, RunCell, RunConfig};
use super::record::{CONFIG_FILE, PREDICTIONS_FILE};
use super::report::{self, Summary};
use super::scores::{self as metrics, RetrievalScores, RECALL_KS};
use super::shard_hits::Rankings;
use crate::ask::{AskSettings, Pipeline};
use crate::corpus::Question;
use crate::progress::ms_since;
use crate::progress::{Progress, ProgressMode};
use crate::retrieve::{Mode, Queries, Retriever, Scored, SearchResponse, SearchTimings};
use crate::vectors::Matrix;

/// How often a long run brings its reports on disk up to date.
const REPORT_EVERY: Duration = Duration::from_secs(30);

pub struct RunOptions<'a> {
    pub dir: PathBuf,
    pub config: RunConfig,
    pub questions: &'a [Question],
    pub retriever: Option<&'a Retriever>,
    /// Answers the questions; `None` measures retrieval only.
    pub pipeline: Option<&'a Pipeline<'a>>,
    /// Rankings made elsewhere (the shards' merged hits, [`super::hits`]), used instead of
    /// ranking with the retriever, which then only reads the documents.
    pub rankings: Option<&'a Rankings>,
    /// Discard what the directory holds instead of resuming.
    pub fresh: bool,
    pub progress: ProgressMode,
}

/// Runs (or finishes) an evaluation and writes its reports; returns the summary.
pub fn run(options: &RunOptions) -> Result<Summary> {
    let started = Instant::now();
    let config = &options.config;
    if config.oracle && options.pipeline.is_none() {
        bail!("--oracle measures the generator; it cannot go with --no-generate");
    }
    if !config.oracle && options.retriever.is_none() {
        bail!("retrieval needs an index");
    }
    let mut done = prepare_dir(&options.dir, config, options.fresh)?;
    let resumed = done.len();
    let earlier_seconds = if resumed > 0 {
        report::seconds_so_far(&options.dir)
    } else {
        0.0
    };
    let seconds = || earlier_seconds + started.elapsed().as_secs_f64();
    let path = options.dir.join(PREDICTIONS_FILE);
    let mut out = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;

    let total = config.cells.len() * options.questions.len();
    let mut bar = Progress::new(
        options.progress,
        "eval",
        total as u64,
        "{bar:40} {pos}/{len} predictions [{elapsed_precise} < {eta_precise}]",
    );
    let mut finished = resumed as u64;
    let pending: Vec<(RunCell, Vec<&Question>)> = config
        .cells
        .iter()
        .map(|&cell| {
            let seen: HashSet<&str> = done
                .iter()
                .filter(|p| p.cell == cell)
                .map(|p| p.id.as_str())
                .collect();
            let pending: Vec<&Question> = options
                .questions
                .iter()
                .filter(|q| !seen.contains(q.id.as_str()))
                .collect();
            (cell, pending)
        })
        .filter(|(_, pending)| !pending.is_empty())
        .collect();
    let encoded = match options.retriever {
        Some(retriever) if config.mode != Mode::Bm25 && options.rankings.is_none() => {
            Some(EncodedQuestions::new(retriever, &pending)?)
        }
        _ => None,
    };
    // Every cell's contexts first (a batched search per cell), then the answers question by
    // question across the cells: a run stopped early leaves every cell with the same
    // questions, so its cells compare paired.
    let mut prompts = pending
        .iter()
        .map(|(cell, questions)| {
            let ids = questions.iter().map(|q| q.id.as_str());
            let made = contexts(options, *cell, questions, encoded.as_ref())?;
            Ok((*cell, ids.zip(made).collect::<HashMap<_, _>>()))
        })
        .collect::<Result<Vec<_>>>()?;
    // The predictions on disk, then the reports made from them.
    let save = |out: &File, done: &[Prediction]| {
        out.sync_data()
            .with_context(|| format!("writing {}", path.display()))?;
        report::write(&options.dir, config, done, seconds())
    };
    let mut reported = Instant::now();
    for question in options.questions {
        for (cell, by_question) in &mut prompts {
            let Some(context) = by_question.remove(question.id.as_str()) else {
                continue;
            };
            let prediction = predict(options, *cell, question, context)?;
            let mut line = serde_json::to_vec(&prediction)?;
            line.push(b'\n');
            out.write_all(&line)
                .with_context(|| format!("writing {}", path.display()))?;
            done.push(prediction);
            finished += 1;
            bar.update(finished, || format!("{finished}/{total} predictions"));
        }
        if reported.elapsed() >= REPORT_EVERY {
            save(&out, &done)?;
            reported = Instant::now();
        }
    }
    bar.finish();
    save(&out, &done)
}

/// Creates the run directory or checks that it holds a run with these settings, and returns
/// the predictions already made.
fn prepare_dir(dir: &Path, config: &RunConfig, fresh: bool) -> Result<Vec<Prediction>> {
    let config_path = dir.join(CONFIG_FILE);
    if fresh && dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    if config_path.exists() {
        let existing: RunConfig = crate::files::read_json(&config_path)?;
        if &existing != config {
            bail!(
                "{} holds a run with other settings; pass --fresh to replace it or --name to start another",
                dir.display()
            );
        }
        return read_predictions(&dir.join(PREDICTIONS_FILE));
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let _ = std::fs::remove_file(dir.join(PREDICTIONS_FILE));
    crate::files::write_json_atomic(&config_path, config)?;
    Ok(Vec::new())
}

/// What a pending question's prompt is made from, with the retrieval behind it.
struct PromptContext {
    /// As a search response: the retrieved paragraphs (the top `top_k`, with this question's
    /// share of its batch's encoding and search time), or the gold ones for the oracle.
    response: SearchResponse,
    /// Retrieved titles to the deepest recall cut-off, best first (none for the oracle).
    retrieved: Vec<String>,
}

/// The pending questions' vectors at every depth the grid asks for, from one forward pass: a
/// shallower layer's vector comes free with the deepest one's, which is what lets a sweep cost
/// little more than one encoding.
struct EncodedQuestions<'q> {
    rows: HashMap<&'q str, usize>,
    depths: Vec<usize>,
    vectors: Vec<Matrix>,
    encode_ms_per_question: f64,
}

impl<'q> EncodedQuestions<'q> {
    fn new(retriever: &Retriever, pending: &[(RunCell, Vec<&'q Question>)]) -> Result<Self> {
        let started = Instant::now();
        let mut depths: Vec<usize> = pending.iter().filter_map(|(c, _)| c.layers).collect();
        depths.sort_unstable();
        depths.dedup();
        let mut rows = HashMap::new();
        let mut texts = Vec::new();
        for question in pending.iter().flat_map(|(_, questions)| questions) {
            rows.entry(question.id.as_str()).or_insert_with(|| {
                texts.push(question.question.as_str());
                texts.len() - 1
            });
        }
        let vectors = if depths.is_empty() {
            Vec::new()
        } else {
            retriever.encoder.encode_queries(&texts, &depths)?
        };
        Ok(Self {
            rows,
            depths,
            vectors,
            encode_ms_per_question: ms_since(started) / texts.len().max(1) as f64,
        })
    }

    /// These questions' full-width vectors at `depth`, a row each.
    fn at(&self, depth: usize, questions: &[&Question]) -> Matrix {
        let at_depth = &self.vectors[self
            .depths
            .binary_search(&depth)
            .expect("every cell's depth is encoded")];
        let mut out = Matrix::zeros(questions.len(), at_depth.cols);
        for (i, question) in questions.iter().enumerate() {
            out.row_mut(i)
                .copy_from_slice(at_depth.row(self.rows[question.id.as_str()]));
        }
        out
    }
}

fn contexts(
    options: &RunOptions,
    cell: RunCell,
    pending: &[&Question],
    encoded: Option<&EncodedQuestions>,
) -> Result<Vec<PromptContext>> {
    let config = &options.config;
    let (Some(searched), Some(retriever)) = (cell.searched(), options.retriever) else {
        return Ok(pending
            .iter()
            .map(|q| PromptContext {
                response: SearchResponse::of_passages(&q.question, &q.gold_paragraphs),
                retrieved: Vec::new(),
            })
            .collect());
    };
    let texts: Vec<&str> = pending.iter().map(|q| q.question.as_str()).collect();
    let k = ranking_depth(config.top_k);
    let mut timings = SearchTimings::default();
    let strategy = config.strategy()?;
    let ranked = match options.rankings {
        Some(rankings) => pending
            .iter()
            .map(|q| {
                let ranking = rankings
                    .get(&(q.id.clone(), cell))
                    .with_context(|| format!("no ranking for question {}", q.id))?;
                Ok(ranking
                    .iter()
                    .map(|&(id, score)| Scored { id, score, hop: 1 })
                    .collect())
            })
            .collect::<Result<Vec<_>>>()?,
        None => {
            let vectors = encoded.map(|e| e.at(searched.layers, pending));
            let queries = Queries {
                texts: &texts,
                encoded: vectors.as_ref(),
                lexical: None,
            };
            retriever.rank(queries, strategy, searched, k, &mut timings)?
        }
    };
    let n = pending.len() as f64;
    let timings = SearchTimings {
        encode_ms: encoded.map_or(0.0, |e| e.encode_ms_per_question) + timings.encode_ms / n,
        search_ms: timings.search_ms / n,
        total_ms: 0.0,
    };
    ranked
        .into_iter()
        .zip(&texts)
        .map(|(ranking, question)| {
            // Each document read once: all of them for recall, the best for the prompt.
            let mut response =
                retriever.respond(question, strategy, searched, ranking, timings.clone())?;
            let retrieved = response.hits.iter().map(|h| h.title.clone()).collect();
            response.hits.truncate(config.top_k);
            Ok(PromptContext {
                retrieved,
                response,
            })
        })
        .collect()
}

/// How deep a run ranks each question: to the deepest recall cut-off, and at least the
/// paragraphs a prompt reads.
pub fn ranking_depth(top_k: usize) -> usize {
    (*RECALL_KS.last().expect("cut-offs")).max(top_k)
}

fn predict(
    options: &RunOptions,
    cell: RunCell,
    question: &Question,
    context: PromptContext,
) -> Result<Prediction> {
    let started = Instant::now();
    let mut timings = PredictionTimings {
        encode_ms: context.response.timings.encode_ms,
        search_ms: context.response.timings.search_ms,
        ..Default::default()
    };
    let retrieval = if cell == RunCell::ORACLE {
        RetrievalScores::default()
    } else {
        RetrievalScores::of(&context.retrieved, &question.supporting_titles)
    };
    let mut prediction = Prediction {
        id: question.id.clone(),
        cell,
        question: question.question.clone(),
        gold: question.answer.clone(),
        prediction: None,
        em: None,
        f1: None,
        context_titles: Vec::new(),
        dropped: 0,
        context: Vec::new(),
        answer_in_context: None,
        retrieved: context.retrieved,
        retrieval,
        yes_no_margin: None,
        yes_no_prior: None,
        option_choice: None,
        dated_choice: None,
        counted_choice: None,
        measured_choice: None,
        place_check: None,
        echo: None,
        widened: None,
        timings: PredictionTimings::default(),
    };
    if let Some(pipeline) = options.pipeline {
        let config = &options.config;
        let settings = AskSettings {
            strategy: config.strategy()?,
            layers: cell.layers,
            dim: cell.dim,
            top_k: config.top_k,
            // The oracle reads the gold paragraphs whole: the generator's ceiling.
            context_tokens: if cell == RunCell::ORACLE {
                0
            } else {
                config.context_tokens
            },
            weights: config.sentence_weights.unwrap_or_default(),
            context_floor: config.context_floor,
            widen_tokens: config.widen_tokens,
        };
        let answer = if config.context_only {
            pipeline.read_only(context.response, &settings, started)
        } else {
            pipeline.answer_from(context.response, &settings, started, |_| true)
        }
        .with_context(|| format!("answering question {}", question.id))?;
        let used: Vec<_> = answer.sources.iter().filter(|s| s.in_prompt).collect();
        prediction.context_titles = used.iter().map(|s| s.hit.title.clone()).collect();
        let read: Vec<String> = used
            .iter()
            .map(|s| {
                let kept: Vec<&str> = s
                    .sentences
                    .iter()
                    .filter(|x| x.in_prompt)
                    .map(|x| x.text.as_str())
                    .collect();
                format!("{}: {}", s.hit.title, kept.join(" "))
            })
            .collect();
        prediction.answer_in_context = metrics::contains_answer(&read.join("\n"), &question.answer);
        if settings.context_tokens > 0 {
            prediction.context = read;
        }
        prediction.dropped = answer.dropped_paragraphs;
        let g = answer.generation;
        if !config.context_only {
            prediction.em = Some(metrics::exact_match(&answer.answer, &question.answer));
            prediction.f1 = Some(metrics::f1_score(&answer.answer, &question.answer));
            prediction.prediction = Some(answer.answer);
            prediction.yes_no_margin = g.yes_no_margin;
            prediction.yes_no_prior = g.yes_no_prior;
            prediction.option_choice = g.option_choice;
            prediction.dated_choice = answer.dated_choice;
            prediction.counted_choice = answer.counted_choice;
            prediction.measured_choice = answer.measured_choice;
            prediction.place_check = answer.place_check;
            prediction.echo = answer.echo;
            prediction.widened = answer.widened;
        }
        timings.prompt_tokens = g.prompt_tokens;
        timings.reused_tokens = g.reused_tokens;
        timings.generated_tokens = g.generated_tokens;
        timings.select_ms = answer.timings.select_ms;
        timings.prompt_eval_ms = g.prompt_eval_ms;
        timings.generation_ms = g.generation_ms;
        timings.total_ms = timings.encode_ms + timings.search_ms + answer.timings.total_ms;
    }
    prediction.timings = timings;
    Ok(prediction)
}
