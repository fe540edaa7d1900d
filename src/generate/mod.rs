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

pub mod extractive;
pub mod gguf;
pub mod options;
pub mod prompt;
pub mod yes_no;

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use crate::progress::ms_since;
use anyhow::{anyhow, bail, Context, Result};
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use serde::Serialize;

use extractive::Spans;
pub use prompt::{Prompt, PromptSpec, PromptStyle};
use yes_no::YesNoTokens;

pub const DEFAULT_LLM: &str = "data/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
pub const DEFAULT_MAX_TOKENS: usize = 32;
/// Context window used unless `--ctx-size` says otherwise (capped by what the model was trained
/// on): ten HotpotQA paragraphs and the instructions need about 2,000 tokens.
pub const DEFAULT_CTX_SIZE: u32 = 4096;
/// Chosen on the fullwiki questions (`eval/answers/tune.sh yes-no`).
pub const DEFAULT_YES_NO_BIAS: f32 = 2.2;

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
    /// An answer naming one of the two options a question ends with ("..., A or B?") is the
    /// first option only if its log-probability beats the second's by more than this; `None`
    /// (the default: on the fullwiki questions no bias beat greedy answers by more than one
    /// question of 67) keeps the greedy answer. See [`options`].
    pub option_bias: Option<f32>,
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
            option_bias: None,
            extractive: false,
            yes_no_prior: false,
        }
    }
}

/// One answer and what it cost. `prompt_eval_ms` and `generation_ms` are measured around the
/// llama.cpp calls here; `llama_*` are llama.cpp's own counters for the same work.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Generation {
    pub text: String,
    pub prompt_tokens: usize,
    /// Prompt tokens whose KV state was reused from the previous prompt, not evaluated.
    pub reused_tokens: usize,
    pub generated_tokens: usize,
    /// Why generation stopped: "eog", "newline" or "max_tokens".
    pub stop: &'static str,
    /// The yes-token's logit minus the no-token's, when the answer opened with yes or no.
    pub yes_no_margin: Option<f32>,
    /// The same margin for the question asked with no documents (with `yes_no_prior`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub yes_no_prior: Option<f32>,
    /// How the answer was chosen between the question's two options, when it named one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub option_choice: Option<OptionChoice>,
    pub prompt_eval_ms: f64,
    pub generation_ms: f64,
    pub tokens_per_second: f64,
    pub llama_prompt_eval_ms: f64,
    pub llama_eval_ms: f64,
    pub llama_eval_tokens: usize,
    pub llama_tokens_per_second: f64,
}

/// An answer decided between a question's two options ([`options`]).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct OptionChoice {
    pub options: [String; 2],
    /// The first option's log-probability minus the second's, each as the answer's opening.
    pub margin: f32,
    /// The greedy answer, the option it named and the one answered (0: first, 1: second).
    pub greedy_answer: String,
    pub greedy: usize,
    pub chosen: usize,
}

/// What stays in the model's context between prompts: the context and the tokens its KV cache
/// holds, in order (sequence 0, positions 0..).
struct Cached<'model> {
    ctx: LlamaContext<'model>,
    tokens: Vec<LlamaToken>,
}

impl Cached<'_> {
    /// Keeps the first `len` tokens in the KV cache and drops the rest, `tokens` in step. A
    /// model whose memory cannot drop a tail (a recurrent one) is emptied instead: false.
    fn keep(&mut self, len: usize) -> bool {
        let dropped = self
            .ctx
            .clear_kv_cache_seq(Some(0), Some(len as u32), None)
            .unwrap_or(false);
        if dropped {
            self.tokens.truncate(len);
        } else {
            self.ctx.clear_kv_cache();
            self.tokens.clear();
        }
        dropped
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
        let tokens = self.tokenize(prompt)?;
        let spans = self
            .options
            .extractive
            .then(|| Spans::of(prompt.messages.iter().map(|m| m.content.as_str())));
        if tokens.is_empty() {
            bail!("the prompt is empty");
        }
        let needed = tokens.len() + self.options.max_tokens;
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
            let result = self.decode(model, cached, &tokens, options, spans.as_ref(), on_token);
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

    /// Evaluates what of `tokens` the cache does not hold yet (at least the last token, whose
    /// logits give the first answer token): the batch, its last row holding those logits, and
    /// how many tokens were reused.
    fn evaluate(
        &self,
        cached: &mut Cached,
        tokens: &[LlamaToken],
    ) -> Result<(LlamaBatch<'static>, usize)> {
        let shared = if self.options.reuse_prefix {
            shared_prefix(&cached.tokens, tokens)
        } else {
            0
        };
        let mut reused = shared.min(tokens.len() - 1);
        // Models whose memory cannot drop a tail start from an empty cache.
        if !cached.keep(reused) {
            reused = 0;
        }
        let fresh = &tokens[reused..];
        let mut batch = LlamaBatch::new(fresh.len(), 1);
        let last = fresh.len() - 1;
        for (i, &token) in fresh.iter().enumerate() {
            batch.add(token, (reused + i) as i32, &[0], i == last)?;
        }
        cached
            .ctx
            .decode(&mut batch)
            .map_err(|e| anyhow!("evaluating the prompt: {e}"))?;
        cached.tokens.extend_from_slice(fresh);
        Ok((batch, reused))
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
            let result = self.evaluate(cached, &tokens).map(|(batch, _)| {
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

    /// Evaluates what of `tokens` the cache does not hold yet, then decodes the answer.
    fn decode(
        &self,
        model: &LlamaModel,
        cached: &mut Cached,
        tokens: &[LlamaToken],
        options: Option<&[String; 2]>,
        spans: Option<&Spans>,
        mut on_token: impl FnMut(&str) -> bool,
    ) -> Result<Generation> {
        let choice = options.zip(self.options.option_bias);
        cached.ctx.reset_timings();
        let started = Instant::now();
        let (mut batch, reused) = self.evaluate(cached, tokens)?;
        let prompt_eval_ms = ms_since(started);
        let ctx = &mut cached.ctx;
        let vocab = model.vocab();

        let started = Instant::now();
        let mut sampler = LlamaSampler::greedy();
        let mut answer = AnswerText::default();
        // The answer's pieces as generated, for the extractive check.
        let mut pieces = Vec::new();
        let mut generated = 0;
        let mut yes_no_margin = None;
        let stop = loop {
            let at = batch.n_tokens() - 1;
            let mut token = sampler.sample(ctx, at);
            if let Some(spans) = spans {
                token = spans.pick(
                    token,
                    ctx.get_logits_ith(at),
                    &pieces,
                    |t| vocab.token_to_piece(t, false, None),
                    |t| vocab.is_eog(t),
                );
            }
            if generated == 0 {
                let logits = ctx.get_logits_ith(at);
                let choice = self.yes_no.choose(token, logits, self.options.yes_no_bias);
                token = choice.token;
                yes_no_margin = choice.margin;
            }
            sampler.accept(token);
            if vocab.is_eog(token) {
                break "eog";
            }
            generated += 1;
            let mut wanted = true;
            let piece = vocab.token_to_piece(token, false, None);
            pieces.extend_from_slice(&piece);
            let streamed = &mut |text: &str| {
                if choice.is_none() {
                    wanted &= on_token(text);
                }
            };
            if answer.push(&piece, streamed) {
                break "newline";
            }
            if !wanted {
                break "stopped";
            }
            if generated >= self.options.max_tokens {
                break "max_tokens";
            }
            batch.clear();
            batch.add(token, cached.tokens.len() as i32, &[0], true)?;
            ctx.decode(&mut batch)
                .map_err(|e| anyhow!("decoding: {e}"))?;
            cached.tokens.push(token);
        };
        let mut text = answer.finish();
        let mut option_choice = None;
        if let Some((options, bias)) = choice {
            if let Some(greedy) = options::named(&text, options) {
                if let Some(margin) = option_margin(model, cached, tokens, options)? {
                    let chosen = options::choose(margin, bias);
                    let greedy_answer = std::mem::replace(&mut text, options[chosen].clone());
                    option_choice = Some(OptionChoice {
                        options: options.clone(),
                        margin,
                        greedy_answer,
                        greedy,
                        chosen,
                    });
                }
            }
            if !text.is_empty() {
                on_token(&text);
            }
        }
        let generation_ms = ms_since(started);
        let timings = cached.ctx.timings();
        let llama_eval_tokens = usize::try_from(timings.n_eval()).unwrap_or(0);
        Ok(Generation {
            text,
            prompt_tokens: tokens.len(),
            reused_tokens: reused,
            generated_tokens: generated,
            stop,
            yes_no_margin,
            yes_no_prior: None,
            option_choice,
            prompt_eval_ms,
            generation_ms,
            tokens_per_second: per_second(generated, generation_ms),
            llama_prompt_eval_ms: timings.t_p_eval_ms(),
            llama_eval_ms: timings.t_eval_ms(),
            llama_eval_tokens,
            llama_tokens_per_second: per_second(llama_eval_tokens, timings.t_eval_ms()),
        })
    }
}

/// The log-probability of the first option as the answer's opening minus the second's, each
/// read by evaluating the option after the prompt (its last token again, for the first option
/// token's logits). The cache is left holding the prompt. None where the model's memory cannot
/// drop a tail, or an option is no tokens.
fn option_margin(
    model: &LlamaModel,
    cached: &mut Cached,
    prompt: &[LlamaToken],
    options: &[String; 2],
) -> Result<Option<f32>> {
    let last = prompt.len() - 1;
    let mut log_prob = [0.0f32; 2];
    for (side, option) in options.iter().enumerate() {
        let answer = model.vocab().tokenize(option.as_bytes(), false, false);
        if answer.is_empty() || !cached.keep(last) {
            return Ok(None);
        }
        let inputs: Vec<LlamaToken> = std::iter::once(prompt[last])
            .chain(answer[..answer.len() - 1].iter().copied())
            .collect();
        let mut batch = LlamaBatch::new(inputs.len(), 1);
        for (i, &token) in inputs.iter().enumerate() {
            batch.add(token, (last + i) as i32, &[0], true)?;
        }
        cached
            .ctx
            .decode(&mut batch)
            .map_err(|e| anyhow!("scoring an option: {e}"))?;
        cached.tokens.extend_from_slice(&inputs);
        for (i, &token) in answer.iter().enumerate() {
            log_prob[side] += log_softmax_at(cached.ctx.get_logits_ith(i as i32), token);
        }
    }
    cached.keep(prompt.len());
    Ok(Some(log_prob[0] - log_prob[1]))
}

/// The log-probability of `token` under `logits`.
fn log_softmax_at(logits: &[f32], token: LlamaToken) -> f32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = logits.iter().map(|&l| (l - max).exp()).sum();
    logits[token.0 as usize] - max - sum.ln()
}

/// How many tokens two sequences share from the start.
fn shared_prefix(a: &[LlamaToken], b: &[LlamaToken]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

fn per_second(count: usize, ms: f64) -> f64 {
    if ms > 0.0 {
        count as f64 * 1000.0 / ms
    } else {
        0.0
    }
}

/// The answer assembled from token pieces: bytes are held back until they form whole UTF-8
/// characters, leading whitespace is skipped, and the first line break after some text ends
/// the answer.
#[derive(Default)]
struct AnswerText {
    text: String,
    pending: Vec<u8>,
}

impl AnswerText {
    /// Adds a piece, passing the newly completed text to `on_text`; true once a line break ends
    /// the answer.
    fn push(&mut self, piece: &[u8], on_text: &mut impl FnMut(&str)) -> bool {
        self.pending.extend_from_slice(piece);
        let complete = match std::str::from_utf8(&self.pending) {
            Ok(s) => s.len(),
            // An incomplete character at the end waits for the next piece.
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => self.pending.len(),
        };
        let bytes: Vec<u8> = self.pending.drain(..complete).collect();
        let mut new = String::from_utf8_lossy(&bytes).into_owned();
        if self.text.is_empty() {
            // Leading blank lines and spaces are not the answer.
            new = new.trim_start().to_string();
        }
        // Past the trim, any line break comes after some text and ends the answer.
        let ended = new.find('\n').map(|i| new.truncate(i)).is_some();
        if !new.is_empty() {
            on_text(&new);
            self.text.push_str(&new);
        }
        ended
    }

    fn finish(mut self) -> String {
        if !self.pending.is_empty() {
            let rest = String::from_utf8_lossy(&self.pending).into_owned();
            self.text.push_str(&rest);
        }
        self.text.trim().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(pieces: &[&[u8]]) -> (String, String, bool) {
        let mut answer = AnswerText::default();
        let mut streamed = String::new();
        let mut ended = false;
        for piece in pieces {
            if answer.push(piece, &mut |s| streamed.push_str(s)) {
                ended = true;
                break;
            }
        }
        (answer.finish(), streamed, ended)
    }

    #[test]
    fn answers_stop_at_the_first_line_break_after_text() {
        let (text, streamed, ended) = feed(&[b"\n", b" Paris", b" is\nmore", b"never"]);
        assert_eq!(text, "Paris is");
        assert_eq!(streamed, "Paris is");
        assert!(ended);
        let (text, _, ended) = feed(&[b"yes"]);
        assert_eq!((text.as_str(), ended), ("yes", false));
    }

    #[test]
    fn characters_split_across_tokens_are_joined() {
        let e_acute = "é".as_bytes();
        let (text, streamed, _) = feed(&[b"Caf", &e_acute[..1], &e_acute[1..], b" noir"]);
        assert_eq!(text, "Café noir");
        assert_eq!(streamed, "Café noir");
    }

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
