//! A calibrated choice between "yes" and "no". Small instruct models say "yes" to almost every
//! yes/no question, whatever the evidence (the 1.5B default answered "yes" to all nine "no"
//! questions among the fullwiki tuning questions). When the greedy first token of an answer is
//! a yes or a no, the answer is decided by the margin between the two instead:
//! "yes" only if the best yes-token's logit beats the best no-token's by more than a bias.
//! A bias of 0 is plain greedy decoding.

use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;

/// The spellings that start a yes or a no answer, each kept where the model's vocabulary has it
/// as one token.
const YES: [&str; 6] = ["yes", "Yes", "YES", " yes", " Yes", " YES"];
const NO: [&str; 6] = ["no", "No", "NO", " no", " No", " NO"];

/// A model's single-token yes and no spellings.
#[derive(Debug, Clone, Default)]
pub struct YesNoTokens {
    yes: Vec<LlamaToken>,
    no: Vec<LlamaToken>,
}

/// The first answer token after the choice, and the margin it was decided by (none when the
/// greedy token was neither a yes nor a no).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Choice {
    pub token: LlamaToken,
    pub margin: Option<f32>,
}

impl YesNoTokens {
    pub fn of(model: &LlamaModel) -> Self {
        let single = |words: &[&str]| -> Vec<LlamaToken> {
            let mut tokens: Vec<LlamaToken> = words
                .iter()
                .filter_map(
                    |w| match model.vocab().tokenize(w.as_bytes(), false, false)[..] {
                        [t] => Some(t),
                        _ => None,
                    },
                )
                .collect();
            tokens.sort_unstable_by_key(|t| t.0);
            tokens.dedup();
            tokens
        };
        Self::new(single(&YES), single(&NO))
    }

    pub fn new(yes: Vec<LlamaToken>, no: Vec<LlamaToken>) -> Self {
        Self { yes, no }
    }

    /// The first answer token given the greedy one and the logits it came from: unchanged unless
    /// it is a yes or a no, else the best token of the side the biased margin picks.
    pub fn choose(&self, greedy: LlamaToken, logits: &[f32], bias: f32) -> Choice {
        let unchanged = Choice {
            token: greedy,
            margin: None,
        };
        if !self.says_yes_or_no(greedy) {
            return unchanged;
        }
        self.decide(logits, bias).unwrap_or(unchanged)
    }

    /// Whether `token` opens a yes or a no.
    pub fn says_yes_or_no(&self, token: LlamaToken) -> bool {
        self.yes.contains(&token) || self.no.contains(&token)
    }

    /// The best token of the side the biased margin picks, whatever the greedy token; none for
    /// a model without both.
    pub fn decide(&self, logits: &[f32], bias: f32) -> Option<Choice> {
        let (yes, no, margin) = self.sides(logits)?;
        Some(Choice {
            token: if margin > bias { yes } else { no },
            margin: Some(margin),
        })
    }
}

impl YesNoTokens {
    /// The best yes-token's logit minus the best no-token's, whatever the greedy token; none
    /// for a model without both.
    pub fn margin(&self, logits: &[f32]) -> Option<f32> {
        self.sides(logits).map(|(_, _, margin)| margin)
    }

    fn sides(&self, logits: &[f32]) -> Option<(LlamaToken, LlamaToken, f32)> {
        let (yes, no) = (best(&self.yes, logits)?, best(&self.no, logits)?);
        Some((yes, no, logits[yes.0 as usize] - logits[no.0 as usize]))
    }
}

/// The token of `tokens` with the highest logit.
fn best(tokens: &[LlamaToken], logits: &[f32]) -> Option<LlamaToken> {
    tokens
        .iter()
        .filter(|t| (t.0 as usize) < logits.len())
        .max_by(|a, b| logits[a.0 as usize].total_cmp(&logits[b.0 as usize]))
        .copied()
}

/// Whether `answer` is a yes (true) or a no (false), a full stop after it allowed ("Yes.");
/// none for any other answer.
pub(super) fn said(answer: &str) -> Option<bool> {
    let word = answer.trim().trim_end_matches('.');
    if word.eq_ignore_ascii_case("yes") {
        Some(true)
    } else if word.eq_ignore_ascii_case("no") {
        Some(false)
    } else {
        None
    }
}

/// "yes" (or "no") in the case `answer` opens with: "No" where it was "Yes".
pub(super) fn in_case_of(yes: bool, answer: &str) -> String {
    let word = if yes { "yes" } else { "no" };
    match answer.trim().chars().next() {
        Some(c) if c.is_uppercase() => format!("{}{}", &word[..1].to_uppercase(), &word[1..]),
        _ => word.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> YesNoTokens {
        // Vocabulary of 6: 1 and 2 say yes, 3 and 4 say no, 0 and 5 neither.
        YesNoTokens::new(
            vec![LlamaToken(1), LlamaToken(2)],
            vec![LlamaToken(3), LlamaToken(4)],
        )
    }

    #[test]
    fn a_yes_or_no_answer_is_read_and_written_in_its_case() {
        assert_eq!(
            ["Yes.", " no ", "YES", "Yes, both", "Nope"].map(said),
            [Some(true), Some(false), Some(true), None, None]
        );
        assert_eq!(in_case_of(false, "Yes"), "No");
        assert_eq!(in_case_of(true, "no."), "yes");
    }

    #[test]
    fn other_first_tokens_are_left_alone() {
        let logits = [5.0, 1.0, 0.0, 0.5, 0.0, 0.0];
        let choice = tokens().choose(LlamaToken(0), &logits, 10.0);
        assert_eq!(
            choice,
            Choice {
                token: LlamaToken(0),
                margin: None
            }
        );
    }

    #[test]
    fn the_bias_moves_the_line_between_yes_and_no() {
        // Best yes is token 2 (3.0), best no is token 4 (1.5): margin 1.5.
        let logits = [0.0, 2.0, 3.0, 1.0, 1.5, 0.0];
        let greedy = LlamaToken(2);
        let at = |bias| tokens().choose(greedy, &logits, bias);
        assert_eq!(
            at(0.0),
            Choice {
                token: LlamaToken(2),
                margin: Some(1.5)
            }
        );
        assert_eq!(at(1.4).token, LlamaToken(2));
        assert_eq!(at(1.5).token, LlamaToken(4), "a tie goes to no");
        assert_eq!(at(2.0).token, LlamaToken(4));
        // A negative bias can turn a greedy no into a yes.
        let logits = [0.0, 1.0, 0.0, 2.0, 0.0, 0.0];
        let choice = tokens().choose(LlamaToken(3), &logits, -1.5);
        assert_eq!(
            choice,
            Choice {
                token: LlamaToken(1),
                margin: Some(-1.0)
            }
        );
    }
}
