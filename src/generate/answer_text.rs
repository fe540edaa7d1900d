//! The answer's text as decoding produces it, piece by piece.

/// The answer assembled from token pieces: bytes are held back until they form whole UTF-8
/// characters, leading whitespace is skipped, and the first line break after some text ends
/// the answer.
#[derive(Default)]
pub(super) struct AnswerText {
    text: String,
    pending: Vec<u8>,
}

impl AnswerText {
    /// Adds a piece, passing the newly completed text to `on_text`; true once a line break ends
    /// the answer.
    pub(super) fn push(&mut self, piece: &[u8], on_text: &mut impl FnMut(&str)) -> bool {
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

    pub(super) fn finish(mut self) -> String {
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
}
