//! What the examples share: their positional arguments (the corpus, the model, then their own,
//! each with a default) and the paragraphs they encode.

use std::path::PathBuf;
use std::str::FromStr;

use anyhow::{bail, Context, Result};
use rag::corpus::ParagraphStream;
use rag::encoder::Precision;

/// The command line's positional arguments.
pub struct Args(Vec<String>);

impl Args {
    pub fn from_env() -> Self {
        Self(std::env::args().skip(1).collect())
    }

    /// Argument `i`, or `default` where it is not given.
    pub fn get(&self, i: usize, default: &str) -> String {
        self.0.get(i).cloned().unwrap_or(default.to_string())
    }

    /// Argument `i` parsed, or `default`'s value; an error names the argument.
    pub fn parsed<T: FromStr>(&self, i: usize, default: &str, name: &str) -> Result<T>
    where
        T::Err: std::error::Error + Send + Sync + 'static,
    {
        self.get(i, default).parse().context(name.to_string())
    }

    /// CORPUS (argument 0): the HotpotQA distractor sample by default.
    pub fn corpus(&self) -> PathBuf {
        PathBuf::from(self.get(
            0,
            "../shared/data/hotpotqa/hotpot_dev_distractor_sample.json",
        ))
    }

    /// MODEL_DIR (argument 1): the default encoder.
    pub fn model_dir(&self) -> PathBuf {
        PathBuf::from(self.get(1, "data/models/all-MiniLM-L6-v2"))
    }

    /// PRECISION (argument `i`): f32, int8 or bf16.
    pub fn precision(&self, i: usize, default: &str) -> Result<Precision> {
        Ok(match self.get(i, default).as_str() {
            "f32" => Precision::F32,
            "int8" => Precision::Int8,
            "bf16" => Precision::Bf16,
            other => bail!("PRECISION: f32, int8 or bf16, not {other}"),
        })
    }
}

/// The first `count` distinct paragraphs of `corpus`, as `{title}: {text}`.
pub fn paragraphs(corpus: &PathBuf, count: usize) -> Result<Vec<String>> {
    ParagraphStream::open(std::slice::from_ref(corpus), false)
        .take(count)
        .map(|p| p.map(|p| p.render("{title}: {text}")))
        .collect()
}
