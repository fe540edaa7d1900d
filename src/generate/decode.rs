//! Greedy decoding of one answer after an evaluated prompt, and what it cost.

use std::time::Instant;

use anyhow::{anyhow, Result};
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use serde::Serialize;

use super::answer_text::AnswerText;
use super::cache::Cached;
use super::extractive::Spans;
use super::facts;
use super::options::{self, OptionChoice};
use super::Generator;
use crate::progress::ms_since;

/// One answer and what it cost. `prompt_eval_ms` and `generation_ms` are measured around the
/// llama.cpp calls here; `llama_*` are llama.cpp's own counters for the same work.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Generation {
    pub text: String,
    pub prompt_tokens: usize,
    /// Prompt tokens whose KV state was reused from the previous prompt, not evaluated.
    pub reused_tokens: usize,
    pub generated_tokens: usize,
    /// Why generation stopped: "eog", "newline", "max_tokens", "stopped" or "yes_no" (decided
    /// after the facts).
    pub stop: &'static str,
    /// The yes-token's logit minus the no-token's, when the answer opened with yes or no.
    pub yes_no_margin: Option<f32>,
    /// What the model wrote about the question before its yes or no (with `yes_no_facts`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub yes_no_facts: Option<String>,
    /// The same margin for the question asked with no documents (with `yes_no_prior`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub yes_no_prior: Option<f32>,
    /// How the answer was chosen between the question's two options, when it named one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub option_choice: Option<OptionChoice>,
    /// The answer's tokens as generated (what [`Generator::answer_again`] forbids one of).
    #[serde(skip)]
    pub tokens: Vec<LlamaToken>,
    pub prompt_eval_ms: f64,
    pub generation_ms: f64,
    pub tokens_per_second: f64,
    pub llama_prompt_eval_ms: f64,
    pub llama_eval_ms: f64,
    pub llama_eval_tokens: usize,
    pub llama_tokens_per_second: f64,
}

impl Generation {
    /// This answer followed by `again`, generated after it: `again`'s text where `kept`, the
    /// costs of both.
    pub fn and_again(mut self, again: Generation, kept: bool) -> Generation {
        self.generation_ms += again.prompt_eval_ms;
        self.add_decoding(&again);
        if kept {
            self.text = again.text;
            self.tokens = again.tokens;
            self.stop = again.stop;
        }
        self
    }

    /// This answer, generated after `first` for the same question from another prompt: its
    /// own text, the prompts and costs of both.
    pub fn after(mut self, first: &Generation) -> Generation {
        self.prompt_tokens += first.prompt_tokens;
        self.reused_tokens += first.reused_tokens;
        self.prompt_eval_ms += first.prompt_eval_ms;
        self.add_decoding(first);
        self
    }

    /// `other`'s generated tokens and llama.cpp's counts added to this one's.
    fn add_decoding(&mut self, other: &Generation) {
        self.generated_tokens += other.generated_tokens;
        self.generation_ms += other.generation_ms;
        self.tokens_per_second = per_second(self.generated_tokens, self.generation_ms);
        self.llama_prompt_eval_ms += other.llama_prompt_eval_ms;
        self.llama_eval_ms += other.llama_eval_ms;
        self.llama_eval_tokens += other.llama_eval_tokens;
        self.llama_tokens_per_second = per_second(self.llama_eval_tokens, self.llama_eval_ms);
    }
}

/// A token the answer may not have at one place: the greedy choice there is the next best.
#[derive(Debug, Clone, Copy)]
pub(super) struct Forbidden {
    /// Which answer token (0: the first).
    pub at: usize,
    pub token: LlamaToken,
}

impl Generator {
    /// Evaluates what of `tokens` the cache does not hold yet, then decodes the answer.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn decode(
        &self,
        model: &LlamaModel,
        cached: &mut Cached,
        tokens: &[LlamaToken],
        options: Option<&[String; 2]>,
        spans: Option<&Spans>,
        forbidden: Option<Forbidden>,
        mut on_token: impl FnMut(&str) -> bool,
    ) -> Result<Generation> {
        // The question's options where the answer may be decided between them.
        let choice =
            options.filter(|_| self.options.option_bias.is_some() || self.options.option_facts);
        cached.ctx.reset_timings();
        let started = Instant::now();
        let (mut batch, reused) = cached.evaluate(tokens, self.options.reuse_prefix)?;
        let prompt_eval_ms = ms_since(started);
        let vocab = model.vocab();

        let started = Instant::now();
        let mut sampler = LlamaSampler::greedy();
        let mut answer = AnswerText::default();
        // The answer's pieces as generated, for the extractive check.
        let mut pieces = Vec::new();
        let mut generated = 0;
        let mut answer_tokens = Vec::new();
        let mut yes_no_margin = None;
        let mut yes_no_facts = None;
        let bias = self.options.yes_no_bias;
        let stop = loop {
            let at = batch.n_tokens() - 1;
            let mut token = sampler.sample(&cached.ctx, at);
            if let Some(forbidden) = forbidden.filter(|f| f.at == generated && f.token == token) {
                token = next_best(cached.ctx.get_logits_ith(at), forbidden.token);
            }
            if let Some(spans) = spans {
                token = spans.pick(
                    token,
                    cached.ctx.get_logits_ith(at),
                    &pieces,
                    |t| vocab.token_to_piece(t, false, None),
                    |t| vocab.is_eog(t),
                );
            }
            if generated == 0 && self.options.yes_no_facts && self.yes_no.says_yes_or_no(token) {
                let (text, after) = facts::write(model, cached, facts::CLOSING)?;
                batch = after;
                let logits = cached.ctx.get_logits_ith(batch.n_tokens() - 1);
                if let Some(decided) = self.yes_no.decide(logits, bias) {
                    yes_no_facts = Some(text);
                    yes_no_margin = decided.margin;
                    // The answer is the yes or the no alone: what follows it is commentary.
                    let piece = vocab.token_to_piece(decided.token, false, None);
                    answer.push(&piece, &mut |text: &str| {
                        if choice.is_none() {
                            on_token(text);
                        }
                    });
                    generated += 1;
                    break "yes_no";
                }
            } else if generated == 0 {
                let logits = cached.ctx.get_logits_ith(at);
                let choice = self.yes_no.choose(token, logits, bias);
                token = choice.token;
                yes_no_margin = choice.margin;
            }
            sampler.accept(token);
            if vocab.is_eog(token) {
                break "eog";
            }
            generated += 1;
            answer_tokens.push(token);
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
            cached
                .ctx
                .decode(&mut batch)
                .map_err(|e| anyhow!("decoding: {e}"))?;
            cached.tokens.push(token);
        };
        let mut text = answer.finish();
        let mut option_choice = None;
        if let Some(options) = choice {
            if let Some(greedy) = options::named(&text, options) {
                let decided = if self.options.option_facts {
                    options::margin_after_facts(model, cached, tokens, options)?
                } else {
                    options::margin(model, cached, tokens, options)?.map(|m| (m, None))
                };
                if let Some((margin, facts)) = decided {
                    let bias = self.options.option_bias.unwrap_or(0.0);
                    let chosen = options::choose(margin, bias);
                    let greedy_answer = std::mem::replace(&mut text, options[chosen].clone());
                    option_choice = Some(OptionChoice {
                        options: options.clone(),
                        margin,
                        greedy_answer,
                        greedy,
                        chosen,
                        facts,
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
            yes_no_facts,
            yes_no_prior: None,
            option_choice,
            tokens: answer_tokens,
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

/// The most likely token other than `not`.
fn next_best(logits: &[f32], not: LlamaToken) -> LlamaToken {
    let best = logits
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != not.0 as usize)
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map_or(0, |(i, _)| i);
    LlamaToken(i32::try_from(best).unwrap_or(0))
}

fn per_second(count: usize, ms: f64) -> f64 {
    if ms > 0.0 {
        count as f64 * 1000.0 / ms
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generation(text: &str, tokens: usize, ms: f64) -> Generation {
        Generation {
            text: text.into(),
            prompt_tokens: tokens,
            reused_tokens: tokens / 2,
            generated_tokens: 4,
            prompt_eval_ms: ms,
            generation_ms: ms / 2.0,
            llama_prompt_eval_ms: ms,
            llama_eval_ms: ms / 2.0,
            llama_eval_tokens: 4,
            ..Default::default()
        }
    }

    #[test]
    fn an_answer_after_another_counts_both_prompts_and_keeps_its_own_text() {
        let first = generation("Black Prince", 60, 100.0);
        let second = generation("Pemberton", 220, 400.0).after(&first);
        assert_eq!(second.text, "Pemberton");
        assert_eq!(second.prompt_tokens, 280);
        assert_eq!(second.reused_tokens, 140);
        assert_eq!(second.generated_tokens, 8);
        assert_eq!(second.prompt_eval_ms, 500.0);
        assert_eq!(second.generation_ms, 250.0);
        assert_eq!(second.tokens_per_second, 8.0 * 1000.0 / 250.0);
        assert_eq!(second.llama_eval_tokens, 8);
        assert_eq!(second.llama_prompt_eval_ms + second.llama_eval_ms, 750.0);
    }

    #[test]
    fn an_answer_again_counts_its_prompt_as_generation_and_replaces_the_text_only_if_kept() {
        let again = || generation("Pemberton", 60, 100.0);
        let kept = generation("Marlow", 60, 100.0).and_again(again(), true);
        assert_eq!(kept.text, "Pemberton");
        assert_eq!(kept.prompt_tokens, 60);
        assert_eq!(kept.generated_tokens, 8);
        assert_eq!(kept.generation_ms, 50.0 + 100.0 + 50.0);
        let dropped = generation("Marlow", 60, 100.0).and_again(again(), false);
        assert_eq!(dropped.text, "Marlow");
        assert_eq!(dropped.generation_ms, kept.generation_ms);
    }
}
