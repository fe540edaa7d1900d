//! HotpotQA: retrieval recall of the supporting paragraphs and, with a generator, exact match
//! and F1 of the answers, over a grid of depth x dimension. [`plan`] says what a run covers
//! and builds the index it needs, [`run`] answers the questions and resumes where it stopped,
//! [`record`] is what a run keeps on disk (`eval/runs/<name>/`), [`scores`] the metrics and
//! [`report`] what people read; [`hits`] splits a run's
//! retrieval over the shards of a sharded index, and [`recorded`] reads the rankings an
//! earlier run recorded instead of searching again.

pub mod hits;
pub mod plan;
pub mod record;
pub mod recorded;
pub mod report;
pub mod run;
pub mod scores;
pub mod settings;

pub use plan::index_with_depths;
pub use record::{read_predictions, Cell, Prediction, RunConfig, PREDICTIONS_FILE};
pub use run::{run, RunOptions};
