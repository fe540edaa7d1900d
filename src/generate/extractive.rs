//! Extractive decoding: every answer stays a span of the prompt's own text (ASCII case aside)
//! or a yes or a no. HotpotQA's answers are spans of its paragraphs, and every right answer
//! the 1.5B default gave on the fullwiki tuning questions was a span of its prompt; a small
//! model that leaves the documents mid-answer ("Teresa Teng also sings in ...") is wrong
//! wherever it goes. So each answer token is the greedy one where it keeps the answer a span,
//! else the most likely token that does. An answer the model writes as a span anyway is
//! unchanged. Off by default (`--extractive`): where the prompt lacks the answer, a model that
//! knows it (a Dutch player's nationality, from a paragraph naming only his club) is forced
//! onto a wrong span ("D"). On the fullwiki questions that cost about as many answers as the
//! constraint mended, and more on the distractor ones (eval/answers/README.md).

use llama_cpp_2::token::LlamaToken;
use memchr::memmem;

/// Answers allowed whatever the prompt says: comparison questions are answered yes or no.
const ALWAYS: [&[u8]; 2] = [b"yes", b"no"];

/// The text an answer may copy from, lower-cased.
#[derive(Debug, Clone)]
pub struct Spans {
    text: Vec<u8>,
}

impl Spans {
    /// The spans of these texts (a prompt's turns); none crosses from one text to the next.
    pub fn of<'a>(texts: impl IntoIterator<Item = &'a str>) -> Self {
        let mut text = Vec::new();
        for t in texts {
            text.extend(t.bytes().map(|b| b.to_ascii_lowercase()));
            text.push(b'\n');
        }
        Self { text }
    }

    /// Whether an answer whose pieces so far are `so_far`, followed by `piece`, still reads as
    /// the start of a span. Leading whitespace is not the answer and a line break ends it, as
    /// the generator reads answers.
    pub fn allows(&self, so_far: &[u8], piece: &[u8]) -> bool {
        let whole: Vec<u8> = so_far
            .iter()
            .chain(piece)
            .map(|b| b.to_ascii_lowercase())
            .collect();
        let start = whole
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .unwrap_or(whole.len());
        let answer = whole[start..].split(|&b| b == b'\n').next().unwrap_or(&[]);
        answer.is_empty()
            || ALWAYS.iter().any(|word| word.starts_with(answer))
            || memmem::find(&self.text, answer).is_some()
    }

    /// The answer's next token: `greedy` where it is allowed, else the most likely allowed
    /// token under `logits`. Ending the turn is always allowed; a token with no text (a
    /// control token) only where it ends the turn.
    pub fn pick(
        &self,
        greedy: LlamaToken,
        logits: &[f32],
        so_far: &[u8],
        piece: impl Fn(LlamaToken) -> Vec<u8>,
        ends_turn: impl Fn(LlamaToken) -> bool,
    ) -> LlamaToken {
        let allowed = |token: LlamaToken| {
            if ends_turn(token) {
                return true;
            }
            let piece = piece(token);
            !piece.is_empty() && self.allows(so_far, &piece)
        };
        if allowed(greedy) {
            return greedy;
        }
        let mut order: Vec<i32> = (0..i32::try_from(logits.len()).unwrap_or(i32::MAX)).collect();
        order.sort_unstable_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]));
        order
            .into_iter()
            .map(LlamaToken)
            .find(|&token| allowed(token))
            .unwrap_or(greedy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans() -> Spans {
        Spans::of([
            "Doc 1(Title: Teresa Teng) Teresa Teng sang in Cantonese.",
            "Who sang?",
        ])
    }

    #[test]
    fn an_answer_may_grow_only_along_the_text() {
        let s = spans();
        assert!(s.allows(b"", b" Teresa"));
        assert!(s.allows(b" Teresa", b" Teng"));
        assert!(s.allows(b"teresa teng", b" sang"), "case aside");
        assert!(!s.allows(b"Teresa Teng", b" also"));
        assert!(!s.allows(b"", b"Paris"));
        // No span crosses from one turn to the next.
        assert!(!s.allows(b"Cantonese.", b" Who"));
        assert!(s.allows(b"", b"Who sang"));
    }

    #[test]
    fn yes_no_whitespace_and_line_breaks() {
        let s = spans();
        assert!(s.allows(b"", b" Yes"));
        assert!(s.allows(b"N", b"o"));
        assert!(!s.allows(b"No", b"pe"));
        assert!(
            s.allows(b"", b"\n "),
            "leading whitespace is not the answer"
        );
        assert!(
            s.allows(b"Teresa Teng", b"\nalso"),
            "a line break ends the answer"
        );
    }

    #[test]
    fn the_most_likely_allowed_token_is_picked() {
        let s = spans();
        let pieces: [&[u8]; 5] = [b" also", b" Teng", b"", b" sang", b"<eos>"];
        let piece = |t: LlamaToken| pieces[t.0 as usize].to_vec();
        let ends_turn = |t: LlamaToken| t.0 == 4;
        let logits = [9.0, 1.0, 8.0, 5.0, 2.0];
        // " also" leaves the text and "" is a control token: " sang" is the best of the rest.
        let picked = s.pick(LlamaToken(0), &logits, b"Teresa Teng", piece, ends_turn);
        assert_eq!(picked, LlamaToken(3));
        // An allowed greedy token is kept.
        let picked = s.pick(LlamaToken(1), &logits, b"Teresa", piece, ends_turn);
        assert_eq!(picked, LlamaToken(1));
        // Where nothing else is allowed, the turn ends.
        let picked = s.pick(LlamaToken(0), &logits, b"Cantonese.", piece, ends_turn);
        assert_eq!(picked, LlamaToken(4));
    }
}
