//! Semantic textual similarity, the ESE paper's intrinsic benchmark (its Table 1 and Figure 3):
//! Spearman's correlation (x100) between the cosine similarity of two sentences' embeddings and
//! the human scores, on STS12-16, STS-B test and SICK-R test, for every layer x size of an
//! encoder. STS12-16 follow SentEval's "all" setting as AnglE and SimCSE report it: every subset
//! of a year pooled into one list of pairs, pairs without a gold score left out.
//!
//! A size k is the first k dimensions of a layer's pooled vector, L2-normalised again (the ESE
//! way). With `pca`, rows for a post-hoc PCA per layer are added beside them: the top k
//! principal components, L2-normalised again. That PCA is fitted on the very sentences being
//! evaluated (all datasets together, each distinct sentence once), which gives it the best case
//! a post-hoc reduction can have: no domain shift between what it was fitted on and what it
//! reduces.

pub mod data;
pub mod report;
pub mod run;
pub mod stats;

use std::fmt;

use serde::Serialize;

pub use data::{StsDataset, StsPairs};
pub use report::StsReport;
pub use run::{default_dims, evaluate, evaluate_for_model_card, StsOptions};
pub use stats::spearman;

/// How a layer's vectors are cut down to a size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Reduction {
    /// The first k dimensions (ESE); always evaluated.
    #[cfg_attr(feature = "cli", value(skip))]
    Truncate,
    /// The top k principal components of the layer's vectors.
    Pca,
}

impl fmt::Display for Reduction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Reduction::Truncate => "truncation",
            Reduction::Pca => "PCA",
        })
    }
}
