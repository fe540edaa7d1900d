//! A calibrated choice between the two options a question names ("Which is older, A or B?").
//! Small instruct models favour the option named first: on the fullwiki tuning questions the
//! 1.5B default answered the first option for 8 questions whose answer was the second, and the
//! reverse twice. When the greedy answer names exactly one of the options, the answer is
//! decided instead by the model's log-probability of each option as the whole opening of its
//! answer: the first option only if it beats the second by more than a bias, and the answer is
//! then that option as the question wrote it.

use anyhow::{anyhow, Result};
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;
use serde::{Deserialize, Serialize};

use super::cache::Cached;
use super::facts;

/// An answer decided between a question's two options (this module).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OptionChoice {
    pub options: [String; 2],
    /// The first option's log-probability minus the second's, each as the answer's opening.
    pub margin: f32,
    /// The greedy answer, the option it named and the one answered (0: first, 1: second).
    pub greedy_answer: String,
    pub greedy: usize,
    pub chosen: usize,
    /// What the model wrote about the options before the margin was read (`--option-facts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facts: Option<String>,
}

/// The two options of a question ending "..., A or B?", leading articles and enclosing quotes
/// dropped (the model writes "Leonberger" for "the Leonberger", and titles without their
/// quotes; exact match ignores both either way). None
/// for any other question: the first option must follow a comma, so that where it starts is
/// known, and the second may hold no comma.
pub fn parse(question: &str) -> Option<[String; 2]> {
    let body = question.trim().strip_suffix('?')?.trim_end();
    let split = body.rfind(" or ")?;
    let (head, second) = (&body[..split], &body[split + " or ".len()..]);
    let first = &head[head.rfind(',')? + 1..];
    if second.contains(',') {
        return None;
    }
    let first = bare(first);
    let second = bare(second);
    if first.is_empty() || second.is_empty() || words(first) == words(second) {
        return None;
    }
    Some([first.to_string(), second.to_string()])
}

/// Which option an answer names: 0 or 1 when its words hold exactly one option's words (or
/// are part of exactly one option), none when it names neither or both.
pub fn named(answer: &str, options: &[String; 2]) -> Option<usize> {
    let answer = words(answer);
    if answer.is_empty() {
        return None;
    }
    let names = |option: &String| {
        let option = words(option);
        contains(&answer, &option) || contains(&option, &answer)
    };
    match (names(&options[0]), names(&options[1])) {
        (true, false) => Some(0),
        (false, true) => Some(1),
        _ => None,
    }
}

/// The option the biased margin picks: the first when its log-probability beats the
/// second's by more than `bias` (a positive bias corrects a first-position preference).
pub fn choose(margin: f32, bias: f32) -> usize {
    usize::from(margin <= bias)
}

/// An option without a leading article, or without the quotes around it.
fn bare(text: &str) -> &str {
    let text = text.trim();
    for (open, close) in [('"', '"'), ('“', '”')] {
        if let Some(inner) = text.strip_prefix(open).and_then(|t| t.strip_suffix(close)) {
            return inner.trim();
        }
    }
    for article in ["the ", "The ", "a ", "A ", "an ", "An "] {
        if let Some(rest) = text.strip_prefix(article) {
            return rest.trim_start();
        }
    }
    text
}

/// Lower-cased alphanumeric words ([`crate::words::alphanumeric`]), articles dropped. Split at
/// every character that is not a letter or digit, where exact match's normalisation
/// (`eval::hotpot::scores::normalize_answer`) drops ASCII punctuation and so joins "Jean-Paul"
/// into one word: here "Jean Paul" names the option "Jean-Paul". No stems or stop words (unlike `ask::context::content_words`): an answer
/// must name an option, not merely be related to it.
pub(super) fn words(text: &str) -> Vec<String> {
    crate::words::alphanumeric(text)
        .map(str::to_lowercase)
        .filter(|w| !matches!(w.as_str(), "a" | "an" | "the"))
        .collect()
}

/// Whether `needle` occurs in `haystack` as a run of whole words.
pub(super) fn contains(haystack: &[String], needle: &[String]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// The log-probability of the first option as the answer's opening minus the second's, each
/// read by evaluating the option after the prompt (its last token again, for the first option
/// token's logits). The cache is left holding the prompt. None where the model's memory cannot
/// drop a tail, or an option is no tokens.
pub(super) fn margin(
    model: &LlamaModel,
    cached: &mut Cached,
    prompt: &[LlamaToken],
    options: &[String; 2],
) -> Result<Option<f32>> {
    margin_after(model, cached, prompt, options, "")
}

/// The facts' step for a question's options: after the evaluated prompt, the model writes
/// what the documents say ([`facts::write`]), closing with "So the answer (A or B) is:", and
/// the options' margin is read after that (each option after a space), as yes/no answers are
/// decided after theirs. On the fullwiki option questions it fixed as many answers as it broke
/// (`eval/answers/README.md`), so it is off by default. The cache is left holding the prompt.
/// None as for [`margin`].
pub(super) fn margin_after_facts(
    model: &LlamaModel,
    cached: &mut Cached,
    prompt: &[LlamaToken],
    options: &[String; 2],
) -> Result<Option<(f32, Option<String>)>> {
    if !cached.keep(prompt.len()) {
        return Ok(None);
    }
    let closing = format!("\nSo the answer ({} or {}) is:", options[0], options[1]);
    let (facts, _) = facts::write(model, cached, &closing)?;
    let written = cached.tokens.clone();
    let margin = margin_after(model, cached, &written, options, " ")?;
    cached.keep(prompt.len());
    Ok(margin.map(|m| (m, Some(facts))))
}

/// [`margin`] with each option after `lead`.
fn margin_after(
    model: &LlamaModel,
    cached: &mut Cached,
    prompt: &[LlamaToken],
    options: &[String; 2],
    lead: &str,
) -> Result<Option<f32>> {
    let last = prompt.len() - 1;
    let mut log_prob = [0.0f32; 2];
    for (side, option) in options.iter().enumerate() {
        let text = format!("{lead}{option}");
        let answer = model.vocab().tokenize(text.as_bytes(), false, false);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(a: &str, b: &str) -> [String; 2] {
        [a.to_string(), b.to_string()]
    }

    #[test]
    fn options_follow_the_last_comma_and_end_the_question() {
        assert_eq!(
            parse("Which dog is a giant breed, the  Leonberger or the Basset Hound?"),
            Some(pair("Leonberger", "Basset Hound"))
        );
        assert_eq!(
            parse("Who was born first, Ed Wood, or Scott Derrickson ? "),
            None,
            "an empty first option"
        );
        assert_eq!(
            parse("Who was born first, Ed Wood or Scott Derrickson ?"),
            Some(pair("Ed Wood", "Scott Derrickson"))
        );
        assert_eq!(
            parse("Which came first, \"Paper Trail\" or “If Tomorrow Comes...”?"),
            Some(pair("Paper Trail", "If Tomorrow Comes..."))
        );
        for other in [
            "Were Scott Derrickson and Ed Wood of the same nationality?",
            "Is Ed Wood or Scott Derrickson older?",
            "Which film came first, Gimme Shelter or LaLee's Kin, the documentary?",
            "Which is older, the band or the Band?",
            "Who was born first, Ed Wood or Scott Derrickson",
        ] {
            assert_eq!(parse(other), None, "{other}");
        }
    }

    #[test]
    fn an_answer_names_one_option_or_none() {
        let options = pair("Leonberger", "Basset Hound");
        assert_eq!(named("The Leonberger", &options), Some(0));
        assert_eq!(
            named("The Leonberger is a giant dog breed.", &options),
            Some(0)
        );
        assert_eq!(named("Basset", &options), Some(1), "part of an option");
        assert_eq!(named("basset hounds", &options), None, "not whole words");
        assert_eq!(named("Leonberger, not the Basset Hound", &options), None);
        assert_eq!(named("Newfoundland", &options), None);
        assert_eq!(named("", &options), None);
    }

    #[test]
    fn the_bias_moves_the_line_between_the_options() {
        assert_eq!(choose(1.0, 0.0), 0);
        assert_eq!(choose(-0.5, 0.0), 1);
        assert_eq!(choose(1.0, 1.5), 1, "a first-option preference corrected");
        assert_eq!(choose(1.5, 1.5), 1, "a tie goes to the second");
        assert_eq!(choose(-1.0, -1.5), 0);
    }
}
