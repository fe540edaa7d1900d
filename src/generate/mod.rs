//! Answer generation with a local GGUF model through llama.cpp (crate `llama-cpp-2`): the model's
//! chat template, greedy decoding (a yes or a no first token decided with a bias: [`yes_no`];
//! an answer naming one of the two options a question offers, by the options' biased
//! log-probabilities: [`options`]; optionally each token one that keeps the answer a span of the
//! prompt: [`extractive`]), stop at end of turn or at the first line break.
//!
//! The model is loaded once per process, with one context kept beside it. Consecutive prompts
//! share their opening (the chat template's head and the instruction): the context keeps the
//! previous prompt's tokens in its KV cache, and each prompt evaluates only what follows the
//! longest opening it shares with them, the way llama.cpp's server reuses its cached prompt.
//! llama.cpp's own timings are reset per answer, so they cover exactly one.
//!
//! Here the generator (loading, the template, token counts); the reused prompt in `cache`,
//! decoding and its costs in `decode`, the answer's text in `answer_text`, and the choice
//! between a question's options, with its scoring by the model, in [`options`].

mod answer_text;
mod cache;
mod choice;
mod decode;
pub mod echo;
pub mod extractive;
pub mod facts;
pub mod full_date;
pub mod gguf;
pub mod grounded;
pub mod number_words;
pub mod option_counts;
pub mod option_dates;
pub mod option_measures;
pub mod options;
pub mod prompt;
pub mod shared_place;
pub mod yes_no;

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use anyhow::{anyhow, bail, Context, Result};
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::token::LlamaToken;

use cache::Cached;
pub use decode::Generation;
pub use echo::Echo;
use extractive::Spans;
pub use option_counts::CountedChoice;
pub use option_dates::DatedChoice;
pub use option_measures::MeasuredChoice;
pub use options::OptionChoice;
pub use prompt::{Prompt, PromptSpec, PromptStyle};
pub use shared_place::PlaceCheck;
use yes_no::YesNoTokens;

pub const DEFAULT_LLM: &str = "data/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
pub const DEFAULT_MAX_TOKENS: usize = 32;
/// Context window used unless `--ctx-size` says otherwise (capped by what the model was trained
/// on): ten HotpotQA paragraphs and the instructions need about 2,000 tokens.
pub const DEFAULT_CTX_SIZE: u32 = 4096;
/// Chosen on the fullwiki yes/no questions for the margin read after the facts
/// (`eval/answers/issue58.sh yes-no-facts`: 37 of 50 right at 3.3, the middle of the 2.6-4.0
/// within one of the best). Without the facts (`--yes-no-facts false`) the fullwiki choice was 2.2.
pub const DEFAULT_YES_NO_BIAS: f32 = 3.3;

#[derive(Debug, Clone)]
pub struct GeneratorOptions {
    pub max_tokens: usize,
    /// Context window in tokens; `None` is [`DEFAULT_CTX_SIZE`].
    pub ctx_size: Option<u32>,
    /// Threads for prompt evaluation and decoding; `None` is every core.
    pub threads: Option<usize>,
    /// Let llama.cpp's own log through to stderr.
    pub verbose: bool,
    /// Keep the previous prompt in the KV cache and evaluate only what a new prompt does not
    /// share with it (off: every prompt is evaluated whole, in a cleared cache).
    pub reuse_prefix: bool,
    /// An answer that opens with yes or no says "yes" only if the yes-token's logit beats the
    /// no-token's by more than this (0: greedy); see [`yes_no`].
    pub yes_no_bias: f32,
    /// Decide an answer that opens with yes or no after the model has written the documents'
    /// facts about the question ([`facts`]); the bias then applies to the margin read after them.
    pub yes_no_facts: bool,
    /// An answer naming one of the two options a question ends with ("..., A or B?") is the
    /// first option only if its log-probability beats the second's by more than this; `None`
    /// (the default: on the fullwiki questions no bias beat greedy answers by more than one
    /// question of 67) keeps the greedy answer. See [`options`].
    pub option_bias: Option<f32>,
    /// Decide an answer naming one of a question's two options after the model has written the
    /// documents' facts about them ([`options::margin_after_facts`]), by the options'
    /// log-probabilities then (the first only if it wins by more than `option_bias`, 0 when
    /// that is off).
    pub option_facts: bool,
    /// A bare year answering a question that asks for a date becomes the one full date of
    /// that year in the prompt's documents ([`full_date`]); applied by the caller, who has the
    /// question and the documents apart.
    pub full_dates: bool,
    /// A question choosing the earlier or later of two documents it names ("Who was born first,
    /// A or B?") is answered from the first year each document gives ([`option_dates`]);
    /// applied by the caller, as `full_dates` is.
    pub option_dates: bool,
    /// A question choosing whichever of two documents it names has more (or fewer) of a thing
    /// ("Which has more species, A or B?") is answered from the first count of it each
    /// document gives ([`option_counts`]); applied by the caller, as `full_dates` is.
    pub option_counts: bool,
    /// A question comparing two documents it names by height or population ("Is A taller
    /// than B?", "Which has the larger population, A or B?") is answered from the first
    /// measure of it each document gives ([`option_measures`]); applied by the caller, as
    /// `full_dates` is.
    pub option_measures: bool,
    /// A "yes" to whether two documents the question names are both in or from a place
    /// becomes "no" where one of them does not mention it ([`shared_place`]); applied by the
    /// caller, as `full_dates` is.
    pub shared_place: bool,
    /// A bare number that the prompt's documents write only as a word becomes that word ("8"
    /// -> "eight", "1" -> "first"; [`number_words`]); applied by the caller, as `full_dates` is.
    pub number_words: bool,
    /// An answer that only repeats a phrase of a question offering no choice is given again
    /// with its first word forbidden ([`echo`]); applied by the caller, who has the question.
    pub answer_again: bool,
    /// Keep every answer a span of the prompt's text or a yes or a no; see [`extractive`]. Off
    /// by default: on 358 fullwiki questions it made 2 answers right and 1 wrong, F1 lower.
    pub extractive: bool,
    /// For an answer that opens with yes or no, also read the margin the question gets with
    /// no documents ([`Generation::yes_no_prior`]; contextual calibration, Zhao et al. 2021),
    /// which costs a second, short prompt evaluation. Recorded only; it decides nothing.
    pub yes_no_prior: bool,
}

impl Default for GeneratorOptions {
    fn default() -> Self {
        Self {
            max_tokens: DEFAULT_MAX_TOKENS,
            ctx_size: None,
            threads: None,
            verbose: false,
            reuse_prefix: true,
            yes_no_bias: DEFAULT_YES_NO_BIAS,
            yes_no_facts: true,
            option_bias: None,
            option_facts: false,
            full_dates: true,
            option_dates: true,
            option_counts: true,
            option_measures: true,
            shared_place: true,
            number_words: true,
            answer_again: true,
            extractive: false,
            yes_no_prior: false,
        }
    }
}

/// The context, made on first use; one prompt at a time.
type ContextSlot<'model> = Mutex<Option<Cached<'model>>>;

self_cell::self_cell!(
    /// The model and the one context that borrows it.
    struct Loaded {
        owner: LlamaModel,
        #[not_covariant]
        dependent: ContextSlot,
    }
);

pub struct Generator {
    loaded: Loaded,
    template: Option<LlamaChatTemplate>,
    yes_no: YesNoTokens,
    pub path: PathBuf,
    pub name: String,
    options: GeneratorOptions,
    ctx_size: u32,
    threads: i32,
}

/// llama.cpp's backend is process-global and may be initialised only once.
fn backend(verbose: bool) -> Result<&'static LlamaBackend> {
    static BACKEND: OnceLock<std::result::Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            if !verbose {
                llama_cpp_2::send_logs_to_tracing(
                    llama_cpp_2::LogOptions::default().with_logs_enabled(false),
                );
            }
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| anyhow!("initialising llama.cpp: {e}"))
}

impl Generator {
    pub fn load(path: &Path, options: &GeneratorOptions) -> Result<Self> {
        if options.max_tokens == 0 {
            bail!("--max-tokens must be at least 1");
        }
        if let Some(bias) = options.option_bias.filter(|b| !b.is_finite()) {
            bail!("--option-bias must be a finite number or off (got {bias})");
        }
        if !options.yes_no_bias.is_finite() {
            bail!(
                "--yes-no-bias must be a finite number (got {})",
                options.yes_no_bias
            );
        }
        let metadata = std::fs::metadata(path).with_context(|| {
            format!(
                "no generator model at {} (scripts/fetch-models.sh llm fetches the default)",
                path.display()
            )
        })?;
        if !metadata.is_file() {
            bail!("generator model {} is not a file", path.display());
        }
        let header = gguf::check(path)?;
        let backend = backend(options.verbose)?;
        let model = LlamaModel::load_from_file(backend, path, &LlamaModelParams::default())
            .map_err(|e| header.load_error(path, e))?;
        let template = model.chat_template(None).ok();
        let yes_no = YesNoTokens::of(&model);
        let trained = model.n_ctx_train().max(1);
        let ctx_size = options.ctx_size.unwrap_or(DEFAULT_CTX_SIZE).min(trained);
        if (ctx_size as usize) <= options.max_tokens {
            bail!(
                "a context of {ctx_size} tokens leaves no room for a prompt and {} new tokens",
                options.max_tokens
            );
        }
        let threads = options
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        Ok(Self {
            loaded: Loaded::new(model, |_| Mutex::new(None)),
            template,
            yes_no,
            name: crate::files::model_name(path),
            path: path.to_path_buf(),
            options: options.clone(),
            ctx_size,
            threads: i32::try_from(threads).unwrap_or(i32::MAX),
        })
    }

    pub fn has_chat_template(&self) -> bool {
        self.template.is_some()
    }

    pub fn max_tokens(&self) -> usize {
        self.options.max_tokens
    }

    /// The prompt as the model sees it: its chat template applied, or without one the turns'
    /// texts one after another.
    pub fn render(&self, prompt: &Prompt) -> Result<String> {
        let Some(template) = &self.template else {
            let turns: Vec<&str> = prompt.messages.iter().map(|m| m.content.as_str()).collect();
            return Ok(turns.join("\n\n"));
        };
        let messages = prompt
            .messages
            .iter()
            .map(|m| LlamaChatMessage::new(m.role.as_str().into(), m.content.clone()))
            .collect::<std::result::Result<Vec<_>, _>>()
            .context("a prompt contains a NUL byte")?;
        self.model()
            .apply_chat_template(template, &messages, true)
            .map_err(|e| anyhow!("applying {}'s chat template: {e}", self.name))
    }

    fn model(&self) -> &LlamaModel {
        self.loaded.borrow_owner()
    }

    fn tokenize(&self, prompt: &Prompt) -> Result<Vec<LlamaToken>> {
        let text = self.render(prompt)?;
        // parse_special: the template's turn markers are special tokens, not text.
        Ok(self.model().vocab().tokenize(text.as_bytes(), true, true))
    }

    /// How many tokens `text` is to this model, on its own (no template, no special tokens).
    pub fn count_tokens(&self, text: &str) -> usize {
        self.model()
            .vocab()
            .tokenize(text.as_bytes(), false, false)
            .len()
    }

    /// Whether the prompt and `max_tokens` new tokens fit in the context window.
    pub fn fits(&self, prompt: &Prompt) -> Result<bool> {
        Ok(self.prompt_tokens(prompt)? + self.options.max_tokens <= self.ctx_size as usize)
    }

    /// The prompt's length in tokens, its chat template applied.
    pub fn prompt_tokens(&self, prompt: &Prompt) -> Result<usize> {
        Ok(self.tokenize(prompt)?.len())
    }

    /// Greedy-decodes an answer; `on_token` gets the answer's text as it grows, piece by piece,
    /// and returns false to stop early (a client that went away). `options` are the two the
    /// question offers ([`options::parse`]): an answer that may be decided between them is
    /// passed to `on_token` whole, once decided.
    pub fn generate(
        &self,
        prompt: &Prompt,
        options: Option<&[String; 2]>,
        on_token: impl FnMut(&str) -> bool,
    ) -> Result<Generation> {
        self.generate_forbidding(prompt, options, None, on_token)
    }

    /// The prompt answered again with the first word of `first`'s answer (articles and
    /// punctuation aside) forbidden where it came: the model's next choice there, then greedy
    /// ([`echo`]). None where the answer has no such word.
    pub fn answer_again(
        &self,
        prompt: &Prompt,
        first: &Generation,
        on_token: impl FnMut(&str) -> bool,
    ) -> Result<Option<Generation>> {
        let vocab = self.model().vocab();
        let word = first.tokens.iter().position(|&t| {
            let piece = vocab.token_to_piece(t, false, None);
            echo::opens_a_word(&String::from_utf8_lossy(&piece))
        });
        let Some(at) = word else {
            return Ok(None);
        };
        let forbidden = decode::Forbidden {
            at,
            token: first.tokens[at],
        };
        self.generate_forbidding(prompt, None, Some(forbidden), on_token)
            .map(Some)
    }

    fn generate_forbidding(
        &self,
        prompt: &Prompt,
        options: Option<&[String; 2]>,
        forbidden: Option<decode::Forbidden>,
        on_token: impl FnMut(&str) -> bool,
    ) -> Result<Generation> {
        let tokens = self.tokenize(prompt)?;
        let spans = self
            .options
            .extractive
            .then(|| Spans::of(prompt.messages.iter().map(|m| m.content.as_str())));
        if tokens.is_empty() {
            bail!("the prompt is empty");
        }
        let facts_room = if self.options.yes_no_facts || self.options.option_facts {
            facts::room()
        } else {
            0
        };
        let needed = tokens.len() + self.options.max_tokens + facts_room;
        if needed > self.ctx_size as usize {
            bail!(
                "the prompt has {} tokens; with --max-tokens {} it overflows the {}-token context",
                tokens.len(),
                self.options.max_tokens,
                self.ctx_size
            );
        }
        self.loaded.with_dependent(|model, slot| {
            let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
            if slot.is_none() {
                *slot = Some(self.new_context(model)?);
            }
            let cached = slot.as_mut().expect("made above");
            let result = self.decode(
                model,
                cached,
                &tokens,
                options,
                spans.as_ref(),
                forbidden,
                on_token,
            );
            if result.is_err() {
                // What the cache holds after a failed decode is unknown: start clean next time.
                cached.tokens.clear();
                cached.ctx.clear_kv_cache();
            }
            result
        })
    }

    fn new_context<'m>(&self, model: &'m LlamaModel) -> Result<Cached<'m>> {
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(self.ctx_size))
            .with_n_batch(self.ctx_size)
            .with_n_threads(self.threads)
            .with_n_threads_batch(self.threads)
            // llama.cpp's own timings are what ours are checked against.
            .with_no_perf(false);
        let ctx = model
            .new_context(backend(self.options.verbose)?, params)
            .map_err(|e| anyhow!("creating a llama.cpp context: {e}"))?;
        Ok(Cached {
            ctx,
            tokens: Vec::new(),
        })
    }

    /// Whether a bare year asked for as a date is completed ([`GeneratorOptions::full_dates`]).
    pub fn completes_dates(&self) -> bool {
        self.options.full_dates
    }

    /// Whether earlier-or-later choices are decided by the documents' years
    /// ([`GeneratorOptions::option_dates`]).
    pub fn decides_by_dates(&self) -> bool {
        self.options.option_dates
    }

    /// Whether more-or-fewer choices are decided by the documents' counts
    /// ([`GeneratorOptions::option_counts`]).
    pub fn decides_by_counts(&self) -> bool {
        self.options.option_counts
    }

    /// Whether height-or-population comparisons are decided by the documents' measures
    /// ([`GeneratorOptions::option_measures`]).
    pub fn decides_by_measures(&self) -> bool {
        self.options.option_measures
    }

    /// Whether a "yes" to two things being in a place is checked against the documents
    /// ([`GeneratorOptions::shared_place`]).
    pub fn checks_places(&self) -> bool {
        self.options.shared_place
    }

    /// Whether bare numbers become the documents' number words
    /// ([`GeneratorOptions::number_words`]).
    pub fn writes_number_words(&self) -> bool {
        self.options.number_words
    }

    /// Whether an answer echoing its question is given again ([`GeneratorOptions::answer_again`]).
    pub fn answers_echoes_again(&self) -> bool {
        self.options.answer_again
    }

    /// Whether answers record [`Generation::yes_no_prior`].
    pub fn records_yes_no_prior(&self) -> bool {
        self.options.yes_no_prior
    }

    /// The yes-token's logit minus the no-token's as the first token after `prompt`, nothing
    /// generated; none for a model without both tokens.
    pub fn yes_no_margin(&self, prompt: &Prompt) -> Result<Option<f32>> {
        let tokens = self.tokenize(prompt)?;
        if tokens.is_empty() {
            bail!("the prompt is empty");
        }
        self.loaded.with_dependent(|model, slot| {
            let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
            if slot.is_none() {
                *slot = Some(self.new_context(model)?);
            }
            let cached = slot.as_mut().expect("made above");
            let result = cached
                .evaluate(&tokens, self.options.reuse_prefix)
                .map(|(batch, _)| {
                    let logits = cached.ctx.get_logits_ith(batch.n_tokens() - 1);
                    self.yes_no.margin(logits)
                });
            if result.is_err() {
                cached.tokens.clear();
                cached.ctx.clear_kv_cache();
            }
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_broken_model_is_one_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.gguf");
        let nan = GeneratorOptions {
            yes_no_bias: f32::NAN,
            ..Default::default()
        };
        let err = Generator::load(&missing, &nan).err().unwrap();
        assert!(
            format!("{err:#}").contains("--yes-no-bias must be a finite"),
            "{err:#}"
        );
        let err = Generator::load(&missing, &GeneratorOptions::default())
            .err()
            .unwrap();
        assert!(format!("{err:#}").contains("no generator model"), "{err:#}");
        let junk = dir.path().join("junk.gguf");
        std::fs::write(&junk, b"not a gguf at all").unwrap();
        let err = Generator::load(&junk, &GeneratorOptions::default())
            .err()
            .unwrap();
        assert!(format!("{err:#}").contains("not a GGUF file"), "{err:#}");
    }
}
