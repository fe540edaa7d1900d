//! The one question-answering pipeline: question -> retrieve -> select context -> prompt ->
//! generate -> answer with its sources, the sentences the generator read, and where the time
//! went. `rag ask`, `rag serve`'s `/ask` and `rag eval` all answer through [`Pipeline`].

pub mod context;
pub mod sentences;

use std::time::Instant;

use anyhow::{bail, Context as _, Result};
use serde::{Deserialize, Serialize};

use crate::corpus::Paragraph;
use crate::generate::grounded::grounded;
use crate::generate::{
    echo, full_date, number_words, option_counts, option_dates, option_measures, shared_place,
    CountedChoice, DatedChoice, Echo, Generation, Generator, MeasuredChoice, PlaceCheck,
    PromptSpec,
};
use crate::progress::ms_since;
use crate::retrieve::{Hit, Retriever, SearchRequest, SearchResponse, Strategy};
use context::{ScoredParagraph, SentenceWeights};

/// Token budget of the selected sentences unless `--context-tokens` says otherwise (chosen on
/// the fullwiki questions, eval/answers/).
pub const DEFAULT_CONTEXT_TOKENS: usize = 200;
/// Paragraphs retrieved for a question unless `--top-k` says otherwise.
pub const DEFAULT_TOP_K: usize = 5;
/// Best-ranked paragraphs that each get their best sentence before the rest are chosen by
/// score, unless `--context-floor` says otherwise (chosen on the fullwiki questions,
/// eval/answers/selection.sh).
pub const DEFAULT_CONTEXT_FLOOR: usize = 0;
/// The budget an answer found in none of the prompt's documents is read again from, unless
/// `--widen-tokens` says otherwise (chosen on the fullwiki questions, eval/answers/tune.sh
/// widen).
pub const DEFAULT_WIDEN_TOKENS: usize = 300;
/// How questions are retrieved unless a flag says otherwise (chosen on the fullwiki
/// questions, eval/answers/).
pub const DEFAULT_STRATEGY: Strategy = Strategy {
    mode: crate::retrieve::Mode::Fusion,
    hops: 2,
};

/// What to retrieve and how much of it the generator reads.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AskSettings {
    pub strategy: Strategy,
    /// Depth and size (default: the index's).
    pub layers: Option<usize>,
    pub dim: Option<usize>,
    /// Paragraphs retrieved; their best sentences make the context.
    pub top_k: usize,
    /// Token budget of the context (the generator's tokens); 0 puts the paragraphs in whole.
    pub context_tokens: usize,
    /// How the sentences are scored.
    pub weights: SentenceWeights,
    /// The best-ranked paragraphs that each get their best sentence first (the two of a
    /// bridge); absent in settings written before it existed: none.
    #[serde(default)]
    pub context_floor: usize,
    /// An answer found in none of the prompt's documents ([`grounded`]) is given again from
    /// the best sentences within this budget, where it is larger than `context_tokens` (and
    /// that is not 0); absent in settings written before it existed: 0, never.
    #[serde(default)]
    pub widen_tokens: usize,
}

/// Whether answers from a budget of `context_tokens` are widened to `widen_tokens`: only
/// answers from a sentence budget (not whole paragraphs), and only to a larger one.
pub fn widens(context_tokens: usize, widen_tokens: usize) -> bool {
    context_tokens > 0 && widen_tokens > context_tokens
}

impl Default for AskSettings {
    fn default() -> Self {
        Self {
            strategy: DEFAULT_STRATEGY,
            layers: None,
            dim: None,
            top_k: DEFAULT_TOP_K,
            context_tokens: DEFAULT_CONTEXT_TOKENS,
            weights: SentenceWeights::default(),
            context_floor: DEFAULT_CONTEXT_FLOOR,
            widen_tokens: DEFAULT_WIDEN_TOKENS,
        }
    }
}

/// A sentence of a source and whether the generator read it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SourceSentence {
    pub text: String,
    pub in_prompt: bool,
}

/// A retrieved paragraph, and what of it the generator read.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Source {
    /// Its rank, id, text, score and hop: written as the source's own fields.
    #[serde(flatten)]
    pub hit: Hit,
    /// Whether any of it went into the prompt.
    pub in_prompt: bool,
    pub sentences: Vec<SourceSentence>,
}

/// Where an answer's time went, in milliseconds. `total_ms` runs from the question to the last
/// token; `llama_ms` is llama.cpp's own count of prompt evaluation and generation in it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AskTimings {
    pub encode_ms: f64,
    pub search_ms: f64,
    /// Scoring and choosing the sentences.
    pub select_ms: f64,
    /// Laying out the prompt and counting its tokens.
    pub prompt_ms: f64,
    pub prompt_eval_ms: f64,
    pub generation_ms: f64,
    pub total_ms: f64,
    pub llama_ms: f64,
}

/// An answer with everything behind it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AskResult {
    pub question: String,
    pub answer: String,
    pub mode: crate::retrieve::Mode,
    pub hops: u8,
    pub layers: usize,
    pub dim: usize,
    pub context_tokens: usize,
    pub prompt_tokens: usize,
    /// Prompt tokens whose state was reused from the previous question (the fixed opening).
    pub reused_tokens: usize,
    /// Retrieved paragraphs left out whole to fit the model's context.
    pub dropped_paragraphs: usize,
    pub sources: Vec<Source>,
    pub generation: Generation,
    /// How the answer was decided by its two documents' years (`--option-dates`), where it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dated_choice: Option<DatedChoice>,
    /// How the answer was decided by its two documents' counts (`--option-counts`), where it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counted_choice: Option<CountedChoice>,
    /// How the answer was decided by its two documents' heights or populations
    /// (`--option-measures`), where it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_choice: Option<MeasuredChoice>,
    /// How a "yes" became "no" because a document does not mention the place asked about
    /// (`--shared-place`), where it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub place_check: Option<PlaceCheck>,
    /// The answer that only repeated the question and the one given again
    /// (`--answer-again`), where it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub echo: Option<Echo>,
    /// The answer found in none of its prompt's documents, given again from a wider context
    /// (`--widen-tokens`), where it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub widened: Option<Widened>,
    pub timings: AskTimings,
}

/// An answer found in none of the documents its prompt held, and the prompt it came from; the
/// answer given instead is read from the wider context ([`AskSettings::widen_tokens`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Widened {
    pub first: String,
    pub first_prompt_tokens: usize,
    pub first_context_tokens: usize,
}

impl AskResult {
    /// This answer, given from a wider context after `first` was found in none of its
    /// documents: its own sources and prompt, the costs of both.
    fn widened_from(mut self, first: AskResult) -> AskResult {
        self.generation = self.generation.after(&first.generation);
        self.prompt_tokens = self.generation.prompt_tokens;
        self.reused_tokens = self.generation.reused_tokens;
        let (t, f) = (&mut self.timings, &first.timings);
        t.select_ms += f.select_ms;
        t.prompt_ms += f.prompt_ms;
        t.prompt_eval_ms = self.generation.prompt_eval_ms;
        t.generation_ms = self.generation.generation_ms;
        t.llama_ms = self.generation.llama_prompt_eval_ms + self.generation.llama_eval_ms;
        self.widened = Some(Widened {
            first: first.answer,
            first_prompt_tokens: first.prompt_tokens,
            first_context_tokens: first.context_tokens,
        });
        self
    }
}

/// One step after generation: where it is `on` and decides, its answer and its record; else
/// the answer as it was.
fn after_generation<T>(
    answer: String,
    on: bool,
    decide: impl FnOnce(&str) -> Option<(String, T)>,
) -> (String, Option<T>) {
    match on.then(|| decide(&answer)).flatten() {
        Some((decided, record)) => (decided, Some(record)),
        None => (answer, None),
    }
}

/// The context chosen for a question, before generation.
struct Chosen {
    passages: Vec<Paragraph>,
    kept: Vec<Vec<bool>>,
    sentences: Vec<Vec<std::ops::Range<usize>>>,
}

/// The models and prompt layout that answer questions. Without a retriever it answers from
/// given paragraphs only ([`answer_from`](Self::answer_from) with a zero budget).
pub struct Pipeline<'a> {
    pub retriever: Option<&'a Retriever>,
    pub generator: &'a Generator,
    pub spec: &'a PromptSpec,
}

impl<'a> Pipeline<'a> {
    pub fn new(retriever: &'a Retriever, generator: &'a Generator, spec: &'a PromptSpec) -> Self {
        Self {
            retriever: Some(retriever),
            generator,
            spec,
        }
    }

    /// Retrieves for `question` and answers it; `on_token` gets the answer as it grows and
    /// returns false to stop (a client that went away).
    pub fn ask(
        &self,
        question: &str,
        settings: &AskSettings,
        on_token: impl FnMut(&str) -> bool,
    ) -> Result<AskResult> {
        let started = Instant::now();
        let retriever = self.retriever.context("asking needs an index")?;
        let response = retriever.search(&SearchRequest {
            query: question,
            k: settings.top_k,
            strategy: settings.strategy,
            layers: settings.layers,
            dim: settings.dim,
        })?;
        self.answer_from(response, settings, started, on_token)
    }

    /// Answers from a search already made (`rag eval` ranks all its questions in one batch);
    /// `started` is when the question came in.
    pub fn answer_from(
        &self,
        response: SearchResponse,
        settings: &AskSettings,
        started: Instant,
        on_token: impl FnMut(&str) -> bool,
    ) -> Result<AskResult> {
        self.complete(response, settings, started, Some(on_token))
    }

    /// Everything up to the generator: the sources, the sentences the prompt would hold and its
    /// token count, but no answer (what `rag eval --context-only` measures).
    pub fn read_only(
        &self,
        response: SearchResponse,
        settings: &AskSettings,
        started: Instant,
    ) -> Result<AskResult> {
        self.complete(response, settings, started, None::<fn(&str) -> bool>)
    }

    /// The answer from the context `settings` choose, or, where it is found in none of that
    /// context's documents and `settings` widen, the answer from the wider one.
    fn complete(
        &self,
        response: SearchResponse,
        settings: &AskSettings,
        started: Instant,
        on_token: Option<impl FnMut(&str) -> bool>,
    ) -> Result<AskResult> {
        let widens = on_token.is_some() && widens(settings.context_tokens, settings.widen_tokens);
        // Kept only where it may be needed: the first answer takes the search's results.
        let again = widens.then(|| response.clone());
        let (first, grounded) = self.answer_on(response, settings, started, on_token)?;
        // A client that stopped the first answer wants none.
        let Some(response) = again.filter(|_| !grounded && first.generation.stop != "stopped")
        else {
            return Ok(first);
        };
        let wider = AskSettings {
            context_tokens: settings.widen_tokens,
            widen_tokens: 0,
            ..*settings
        };
        // Not streamed: what was streamed is followed by the final answer.
        let (second, _) = self.answer_on(response, &wider, started, Some(|_: &str| true))?;
        Ok(second.widened_from(first))
    }

    /// The answer from the context `settings` choose, and whether it is [`grounded`] in that
    /// context's documents.
    fn answer_on(
        &self,
        response: SearchResponse,
        settings: &AskSettings,
        started: Instant,
        on_token: Option<impl FnMut(&str) -> bool>,
    ) -> Result<(AskResult, bool)> {
        let selecting = Instant::now();
        let chosen = self.choose(
            &response.query,
            &response.hits,
            response.cell.layers,
            settings,
        )?;
        let select_ms = ms_since(selecting);
        let prompting = Instant::now();
        let (prompt, dropped) = self
            .spec
            .build_within(&response.query, &chosen.passages, |p| {
                self.generator.fits(p)
            })?;
        let prompt_ms = ms_since(prompting);
        let used = chosen.passages.len() - dropped;
        let passages = &chosen.passages[..used];
        // The steps after generation read the prompt's documents: their texts, or their
        // titles with them.
        let texts = || passages.iter().map(|p| p.text.as_str());
        let documents = || passages.iter().map(|p| (p.title.as_str(), p.text.as_str()));
        let query = response.query.as_str();
        let mut echo = None;
        let generation = match on_token {
            Some(on_token) => {
                let options = crate::generate::options::parse(&response.query);
                let mut generation =
                    self.generator
                        .generate(&prompt, options.as_ref(), on_token)?;
                if self.generator.answers_echoes_again()
                    && echo::echoes(query, &generation.text, documents())
                {
                    // Not streamed: what was streamed is followed by the final answer.
                    if let Some(again) =
                        self.generator
                            .answer_again(&prompt, &generation, |_| true)?
                    {
                        let echoed = generation.text.clone();
                        let settled = echo::settle(query, echoed, again.text.clone(), documents());
                        generation = generation.and_again(again, settled.kept);
                        echo = Some(settled);
                    }
                }
                if generation.yes_no_margin.is_some() && self.generator.records_yes_no_prior() {
                    let bare = self
                        .spec
                        .build_within(&response.query, &[], |_| Ok(true))?
                        .0;
                    generation.yes_no_prior = self.generator.yes_no_margin(&bare)?;
                }
                generation
            }
            None => Generation {
                prompt_tokens: self.generator.prompt_tokens(&prompt)?,
                ..Default::default()
            },
        };
        let answer = self
            .spec
            .labelled_subject(&generation.text, passages)
            .unwrap_or_else(|| generation.text.clone());
        let answer = self
            .generator
            .completes_dates()
            .then(|| full_date::complete(&response.query, &answer, texts()))
            .flatten()
            .unwrap_or(answer);
        // Without generation the answer is empty, which names no option: nothing is decided.
        // Each step decides only where none before it did.
        let generator = self.generator;
        let (answer, dated_choice) = after_generation(answer, generator.decides_by_dates(), |a| {
            option_dates::decide(query, a, documents())
        });
        let (answer, counted_choice) = after_generation(
            answer,
            dated_choice.is_none() && generator.decides_by_counts(),
            |a| option_counts::decide(query, a, documents()),
        );
        let (answer, measured_choice) = after_generation(
            answer,
            dated_choice.is_none() && counted_choice.is_none() && generator.decides_by_measures(),
            |a| option_measures::decide(query, a, documents()),
        );
        let (answer, place_check) = after_generation(
            answer,
            measured_choice.is_none() && generator.checks_places(),
            |a| shared_place::check(query, a, documents()),
        );
        let answer = (dated_choice.is_none()
            && counted_choice.is_none()
            && measured_choice.is_none()
            && self.generator.writes_number_words())
        .then(|| number_words::as_written(&response.query, &answer, texts()))
        .flatten()
        .unwrap_or(answer);
        let grounded = grounded(&answer, documents());
        let titles_used: Vec<&str> = passages.iter().map(|p| p.title.as_str()).collect();
        let sources = response
            .hits
            .iter()
            .zip(&chosen.kept)
            .zip(&chosen.sentences)
            .map(|((hit, kept), ranges)| {
                let in_prompt = titles_used.contains(&hit.title.as_str());
                Source {
                    hit: hit.clone(),
                    in_prompt,
                    sentences: ranges
                        .iter()
                        .zip(kept)
                        .map(|(r, &k)| SourceSentence {
                            text: hit.text[r.clone()].to_string(),
                            in_prompt: in_prompt && k,
                        })
                        .collect(),
                }
            })
            .collect();
        let llama_ms = generation.llama_prompt_eval_ms + generation.llama_eval_ms;
        Ok((
            AskResult {
                question: response.query,
                answer,
                mode: response.mode,
                hops: response.hops,
                layers: response.cell.layers,
                dim: response.cell.dim,
                context_tokens: settings.context_tokens,
                prompt_tokens: generation.prompt_tokens,
                reused_tokens: generation.reused_tokens,
                dropped_paragraphs: dropped,
                sources,
                timings: AskTimings {
                    encode_ms: response.timings.encode_ms,
                    search_ms: response.timings.search_ms,
                    select_ms,
                    prompt_ms,
                    prompt_eval_ms: generation.prompt_eval_ms,
                    generation_ms: generation.generation_ms,
                    total_ms: ms_since(started),
                    llama_ms,
                },
                generation,
                dated_choice,
                counted_choice,
                measured_choice,
                place_check,
                echo,
                widened: None,
            },
            grounded,
        ))
    }

    /// The passages the prompt gets: whole paragraphs with a zero budget, else their best
    /// sentences within it.
    fn choose(
        &self,
        question: &str,
        hits: &[Hit],
        layers: usize,
        settings: &AskSettings,
    ) -> Result<Chosen> {
        let sentences: Vec<_> = hits.iter().map(|h| sentences::split(&h.text)).collect();
        let paragraphs: Vec<Paragraph> = hits.iter().map(Hit::paragraph).collect();
        if settings.context_tokens == 0 {
            return Ok(Chosen {
                kept: sentences.iter().map(|s| vec![true; s.len()]).collect(),
                passages: paragraphs,
                sentences,
            });
        }
        let Some(retriever) = self.retriever else {
            bail!("choosing sentences needs the index's encoder; use a context budget of 0");
        };
        let encoder = &retriever.encoder;
        // One forward pass: the question (row 0, behind its query prefix), then every sentence
        // as the index templates a paragraph.
        let texts: Vec<String> = std::iter::once(encoder.query_text(question))
            .chain(paragraphs.iter().zip(&sentences).flat_map(|(p, ranges)| {
                ranges
                    .iter()
                    .map(move |r| format!("{}: {}", p.title, &p.text[r.clone()]))
            }))
            .collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let vectors = encoder.encode(&refs, &[layers])?.remove(0);
        let words = context::content_words(question);
        let names = context::names(&paragraphs, &sentences)?;
        let in_question = context::named_by(question, &paragraphs)?;
        let mut row = 1;
        let scored: Vec<ScoredParagraph> = paragraphs
            .iter()
            .zip(&sentences)
            .zip(names)
            .enumerate()
            .map(|(rank, ((p, ranges), names))| {
                let scores = ranges
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        let cosine = crate::vectors::cosine(vectors.row(0), vectors.row(row + i));
                        // The title counts: "He directed it" is about the paragraph's subject.
                        let text = format!("{} {}", p.title, &p.text[r.clone()]);
                        let overlap = context::lexical_overlap(&words, &text);
                        context::sentence_score(
                            &settings.weights,
                            cosine,
                            overlap,
                            rank + 1,
                            i == 0,
                        )
                    })
                    .collect();
                row += ranges.len();
                ScoredParagraph {
                    paragraph: p,
                    sentences: ranges.clone(),
                    scores,
                    names,
                    in_question: in_question.contains(&rank),
                }
            })
            .collect();
        let selection = context::select(
            &scored,
            settings.context_tokens,
            settings.context_floor,
            settings.weights.link,
            |s| self.generator.count_tokens(s),
            |passages| self.generator.count_tokens(&self.spec.context(passages)),
        );
        Ok(Chosen {
            passages: selection.passages,
            kept: selection.kept,
            sentences,
        })
    }
}
