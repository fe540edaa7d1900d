//! Evaluation: [`hotpot`], the RAG benchmark (retrieval recall and answer exact match on
//! HotpotQA over depth x size), and [`sts`], the intrinsic one (STS Spearman per layer x size);
//! [`heatmap`] draws both's grids.

pub mod heatmap;
pub mod hotpot;
pub mod sts;
