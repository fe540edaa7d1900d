//! What a search asks for: the question (checked), the scores and hops, the depth and size, and
//! the weights that tune fusion and the second hop.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use super::hops::HopQuery;

/// The second hop's BM25 query rule by default: the whole seed paragraph. On the fullwiki
/// questions the shorter rules were level with it within one question of 240 (title: both@5
/// 90.0 against 89.6, eval/scale/hop_query/), which is not a reason to change a default; on a
/// 1M-document index `title` saved only a sixth of the fusion two-hop time.
pub const DEFAULT_HOP_QUERY: HopQuery = HopQuery::Full;

/// Questions longer than this are refused rather than silently truncated by the tokenizer.
pub const MAX_QUESTION_BYTES: usize = 4096;
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Dense,
    Bm25,
    /// Reciprocal-rank fusion of dense and BM25.
    Hybrid,
    /// Convex combination of dense and BM25 scores, each scaled to [0, 1].
    Fusion,
}

impl Mode {
    /// Every mode, in the order they are listed to people.
    pub const ALL: [Mode; 4] = [Mode::Dense, Mode::Bm25, Mode::Hybrid, Mode::Fusion];
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Dense => "dense",
            Mode::Bm25 => "bm25",
            Mode::Hybrid => "hybrid",
            Mode::Fusion => "fusion",
        })
    }
}

impl Mode {
    /// Whether the mode reads dense vectors (and so has a depth and a size).
    pub fn is_dense(self) -> bool {
        self != Mode::Bm25
    }
}

/// How a question is searched: which scores, and in one hop or two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Strategy {
    pub mode: Mode,
    /// 1: the question alone; 2: also the question joined to each of the first hop's best
    /// paragraphs ([`hops`](super::hops)).
    pub hops: u8,
}

impl Strategy {
    pub fn new(mode: Mode, hops: u8) -> Result<Self> {
        if !(1..=2).contains(&hops) {
            bail!("hops must be 1 or 2 (got {hops})");
        }
        Ok(Self { mode, hops })
    }
}

impl Default for Strategy {
    fn default() -> Self {
        Self {
            mode: Mode::Dense,
            hops: 1,
        }
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.hops {
            1 => write!(f, "{}", self.mode),
            hops => write!(f, "{}-{hops}hop", self.mode),
        }
    }
}

#[derive(Debug, Clone)]
pub struct SearchRequest<'a> {
    pub query: &'a str,
    pub k: usize,
    pub strategy: Strategy,
    pub layers: Option<usize>,
    pub dim: Option<usize>,
}

/// The question, trimmed; refused when empty or longer than [`MAX_QUESTION_BYTES`].
pub fn validate_question(question: &str) -> Result<&str> {
    let trimmed = question.trim();
    if trimmed.is_empty() {
        bail!("the question is empty");
    }
    if trimmed.len() > MAX_QUESTION_BYTES {
        bail!(
            "the question is too long ({} bytes; the limit is {MAX_QUESTION_BYTES})",
            trimmed.len()
        );
    }
    Ok(trimmed)
}

/// The weights of fusion and of the second hop (defaults chosen on the fullwiki questions,
/// eval/answers/).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Tuning {
    /// Dense weight of [`Mode::Fusion`], in [0, 1].
    pub fusion_weight: f32,
    /// First-hop paragraphs that each seed a second-hop search.
    pub hop_beam: usize,
    /// What second-hop evidence counts for beside first-hop evidence ([`hops::merge`](super::hops::merge)).
    pub hop_weight: f32,
    /// What a seed naming a paragraph's title counts for ([`links`](super::links)); 0 turns links off.
    /// Runs recorded before links existed had none.
    #[serde(default)]
    pub link_weight: f32,
    /// BM25 reads questions and second-hop queries as tantivy query syntax rather than as
    /// words (`--bm25-syntax`). Absent in runs recorded before questions were read as words:
    /// those read as off, so that they still match (and resume) the runs of today's default;
    /// what the parser changed there is measured in eval/answers/bm25_plain_text.md.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bm25_syntax: bool,
    /// Candidates an HNSW index visits per dense search (`--ef-search`; `None`: the index's
    /// default; 0: exact search, not through the graph). Unused by a flat index, which is exact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ef_search: Option<usize>,
    /// What of each seed the second hop's BM25 query holds (`--hop-query`). Absent in runs
    /// recorded before the rule: those read as the whole paragraph, as they were run.
    #[serde(default, skip_serializing_if = "HopQuery::is_full")]
    pub hop_query: HopQuery,
}

impl Default for Tuning {
    fn default() -> Self {
        Self {
            fusion_weight: 0.3,
            hop_beam: 2,
            hop_weight: 0.3,
            link_weight: 0.15,
            bm25_syntax: false,
            ef_search: None,
            hop_query: DEFAULT_HOP_QUERY,
        }
    }
}

impl Tuning {
    pub fn check(self) -> Result<Self> {
        if !(0.0..=1.0).contains(&self.fusion_weight) {
            bail!(
                "the fusion weight must be between 0 and 1 (got {})",
                self.fusion_weight
            );
        }
        if self.hop_beam == 0 {
            bail!("the hop beam must be at least 1");
        }
        if !(self.hop_weight.is_finite() && self.hop_weight >= 0.0) {
            bail!("the hop weight must be 0 or more (got {})", self.hop_weight);
        }
        if !(self.link_weight.is_finite() && self.link_weight >= 0.0) {
            bail!(
                "the link weight must be 0 or more (got {})",
                self.link_weight
            );
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs recorded before `bm25_syntax` existed still match (and resume as) a run of the
    /// default, and a default run records nothing new.
    #[test]
    fn bm25_syntax_is_off_in_older_runs_and_recorded_only_when_on() {
        let old = r#"{"fusion_weight":0.3,"hop_beam":2,"hop_weight":0.3,"link_weight":0.15}"#;
        let read: Tuning = serde_json::from_str(old).unwrap();
        let before_hop_queries = Tuning {
            hop_query: HopQuery::Full,
            ..Tuning::default()
        };
        assert_eq!(read, before_hop_queries);
        assert_eq!(serde_json::to_string(&read).unwrap(), old);
        let on = Tuning {
            bm25_syntax: true,
            ..Tuning::default()
        };
        assert!(serde_json::to_string(&on)
            .unwrap()
            .contains("\"bm25_syntax\":true"));
    }

    #[test]
    fn questions_are_checked() {
        assert!(validate_question("  ").is_err());
        assert!(validate_question(&"x".repeat(MAX_QUESTION_BYTES + 1)).is_err());
        assert_eq!(validate_question(" who? ").unwrap(), "who?");
    }
}
