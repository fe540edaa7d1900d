//! HotpotQA: retrieval recall of the supporting paragraphs and, with a generator, exact match
//! and F1 of the answers, over a grid of depth x dimension. [`settings`] turns what `rag eval`
//! was asked into a run, [`plan`] says what a run covers and builds the index it needs, [`run`]
//! answers the questions and resumes where it stopped, [`record`] is what a run keeps on disk
//! (`eval/runs/<name>/`), [`scores`] the metrics and [`report`] what people read;
//! [`shard_hits`] splits a run's retrieval over the shards of a sharded index (each shard's
//! rankings file, and their merge), and [`rankings_from`] reads the rankings an earlier run
//! recorded instead of searching again (`--rankings-from`).

pub mod plan;
pub mod rankings_from;
pub mod record;
pub mod report;
pub mod run;
pub mod scores;
pub mod settings;
pub mod shard_hits;

pub use plan::index_with_depths;
pub use record::{read_predictions, Prediction, RunCell, RunConfig, PREDICTIONS_FILE};
pub use run::{run, RunOptions};
