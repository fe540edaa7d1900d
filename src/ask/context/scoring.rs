//! How a sentence is scored against the question: the weights of its parts, and the words
//! the lexical part counts.

/// How a sentence's score is made (chosen on the fullwiki questions, eval/answers/); as a flag,
/// `dense,lexical,rank,first,link`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SentenceWeights {
    pub dense: f32,
    pub lexical: f32,
    /// Times 1 / rank of the sentence's paragraph.
    pub rank: f32,
    pub first: f32,
    /// Added to every sentence of a paragraph once a kept sentence names its title. Runs
    /// recorded before it existed had none.
    #[serde(default)]
    pub link: f32,
}

impl Default for SentenceWeights {
    fn default() -> Self {
        Self {
            dense: 1.0,
            lexical: 1.0,
            rank: 0.3,
            first: 0.15,
            link: 0.3,
        }
    }
}

impl std::str::FromStr for SentenceWeights {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<f32> = s
            .split(',')
            .map(|p| p.trim().parse::<f32>())
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{s:?}: {e}"))?;
        match parts[..] {
            [dense, lexical, rank, first, link] if parts.iter().all(|w| w.is_finite()) => {
                Ok(Self {
                    dense,
                    lexical,
                    rank,
                    first,
                    link,
                })
            }
            _ => Err(format!(
                "{s:?} is not five numbers: dense,lexical,rank,first,link"
            )),
        }
    }
}

impl std::fmt::Display for SentenceWeights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{},{},{},{},{}",
            self.dense, self.lexical, self.rank, self.first, self.link
        )
    }
}

/// The question's words that carry its meaning: lower-cased, three letters or more, not among
/// the commonest English words. A relevance signal, not an answer's normalisation (that is
/// `eval::hotpot::scores::normalize_answer`, the official script's): it splits as
/// [`crate::words::alphanumeric`] does, and stems, so that related words meet.
pub fn content_words(text: &str) -> Vec<String> {
    const STOP: [&str; 40] = [
        "the", "and", "for", "are", "was", "were", "which", "what", "who", "whom", "whose", "when",
        "where", "how", "that", "this", "with", "from", "has", "have", "had", "did", "does", "not",
        "but", "its", "his", "her", "their", "they", "them", "than", "then", "also", "both",
        "same", "into", "about", "there", "been",
    ];
    let mut words: Vec<String> = crate::words::alphanumeric(text)
        .filter(|w| w.chars().count() >= 3)
        .map(str::to_lowercase)
        .filter(|w| !STOP.contains(&w.as_str()))
        .map(|w| stem(&w))
        .collect();
    words.sort();
    words.dedup();
    words
}

/// Porter's English stem cut to six characters: the stem matches "air" with "aired", the cut
/// "directed" with "director", which Porter leaves apart.
fn stem(word: &str) -> String {
    let stemmer = rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English);
    stemmer.stem(word).chars().take(6).collect()
}

/// The share of `question` words found in `text`.
pub fn lexical_overlap(question: &[String], text: &str) -> f32 {
    if question.is_empty() {
        return 0.0;
    }
    let found = content_words(text);
    let hits = question.iter().filter(|w| found.contains(w)).count();
    hits as f32 / question.len() as f32
}

/// A sentence's score from its parts; `rank` counts from 1.
pub fn sentence_score(
    weights: &SentenceWeights,
    cosine: f32,
    overlap: f32,
    rank: usize,
    first: bool,
) -> f32 {
    weights.dense * cosine
        + weights.lexical * overlap
        + weights.rank / rank as f32
        + if first { weights.first } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_add_their_parts() {
        let w = SentenceWeights {
            dense: 1.0,
            lexical: 0.5,
            rank: 0.2,
            first: 0.1,
            link: 0.0,
        };
        assert!((sentence_score(&w, 0.6, 0.5, 2, true) - (0.6 + 0.25 + 0.1 + 0.1)).abs() < 1e-6);
        assert!((sentence_score(&w, 0.6, 0.0, 1, false) - 0.8).abs() < 1e-6);
    }

    #[test]
    fn weights_parse_from_five_numbers() {
        let w: SentenceWeights = "1,0.5,0.25,0,0.3".parse().unwrap();
        assert_eq!(
            (w.dense, w.lexical, w.rank, w.first, w.link),
            (1.0, 0.5, 0.25, 0.0, 0.3)
        );
        assert_eq!(w.to_string().parse::<SentenceWeights>().unwrap(), w);
        assert!("1,2,3,4".parse::<SentenceWeights>().is_err());
        assert!("1,2,3,4,x".parse::<SentenceWeights>().is_err());
        assert!("1,2,3,4,inf".parse::<SentenceWeights>().is_err());
    }

    #[test]
    fn overlap_counts_stemmed_content_words() {
        let question = content_words("Who directed the film Sinister?");
        assert_eq!(question, vec!["direct", "film", "sinist"]);
        assert!(
            (lexical_overlap(&question, "He is a director of Sinister.") - 2.0 / 3.0).abs() < 1e-6
        );
        assert_eq!(lexical_overlap(&[], "anything"), 0.0);
        // Porter's stem before the cut: "air" and "aired" meet, six letters alone would not.
        let question = content_words("What was the episode's air date?");
        assert_eq!(
            lexical_overlap(&question, "It first aired on May 21."),
            1.0 / 3.0
        );
    }
}
