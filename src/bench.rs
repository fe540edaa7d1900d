//! Benchmarks behind the README's speed claims: encoding throughput per depth (paragraphs/s,
//! and with `--fidelity` each precision's cosine to f32) and query latency per retrieval mode,
//! each in one warm process, so that start-up and model loading are not counted. The scripts
//! under eval/encode, eval/precision and eval/retrieval run them.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Result};
use serde::Serialize;

use crate::corpus::{self, ParagraphStream};
use crate::encoder::{Encoder, EncoderOptions, Precision};
use crate::progress::ms_since;
use crate::retrieve::{Mode, Retriever, SearchRequest, Strategy};
use crate::vectors::Matrix;

#[derive(Debug, Clone)]
pub struct EncodeBenchOptions {
    pub corpus: PathBuf,
    pub model_dir: PathBuf,
    pub encoder: EncoderOptions,
    pub limit: usize,
    pub layers: Vec<usize>,
    pub template: String,
    /// Also encode in f32 (untimed) and report how close this precision's vectors are.
    pub fidelity: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct DepthThroughput {
    pub layers: usize,
    pub paragraphs: usize,
    pub tokens: usize,
    pub seconds: f64,
    pub paragraphs_per_s: f64,
    pub tokens_per_s: f64,
    /// With `fidelity`: cosine of each paragraph's vector to its f32 one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cosine_to_f32: Option<Fidelity>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Fidelity {
    pub mean: f32,
    pub min: f32,
}

impl Fidelity {
    /// Row by row, `got` against `want`.
    pub fn of(got: &Matrix, want: &Matrix) -> Self {
        let cosines: Vec<f32> = (0..got.rows)
            .map(|i| crate::vectors::cosine(got.row(i), want.row(i)))
            .collect();
        Self {
            mean: cosines.iter().sum::<f32>() / cosines.len().max(1) as f32,
            min: cosines.iter().copied().fold(f32::INFINITY, f32::min),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct EncodeBench {
    pub model: String,
    pub batch_size: usize,
    pub max_length: usize,
    pub threads: usize,
    /// The widest instruction set the kernels ran on (under `RAG_MAX_ISA`).
    pub kernels: crate::encoder::cpu::MaxIsa,
    pub depths: Vec<DepthThroughput>,
}

/// Encodes the first `limit` distinct paragraphs of a corpus at each depth separately (as a
/// user running `rag index --layers L` would), after one untimed warm-up batch.
pub fn encode_throughput(options: &EncodeBenchOptions) -> Result<EncodeBench> {
    corpus::validate_template(&options.template)?;
    let paragraphs: Vec<_> = ParagraphStream::open(std::slice::from_ref(&options.corpus), false)
        .take(options.limit)
        .collect::<Result<_>>()?;
    if paragraphs.is_empty() {
        bail!("{} has no paragraphs", options.corpus.display());
    }
    let texts: Vec<String> = paragraphs
        .iter()
        .map(|p| p.render(&options.template))
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let encoder = Encoder::load(&options.model_dir, &options.encoder)?;
    encoder.check_depths(&options.layers)?;
    let tokens: usize = encoder.tokenize(&refs)?.iter().map(Vec::len).sum();

    let warm_up = &refs[..refs.len().min(encoder.batch_size)];
    encoder.encode(
        warm_up,
        &[*options.layers.iter().max().expect("at least one depth")],
    )?;

    let reference = options
        .fidelity
        .then(|| {
            let f32 = EncoderOptions {
                precision: Precision::F32,
                ..options.encoder.clone()
            };
            Encoder::load(&options.model_dir, &f32)
        })
        .transpose()?;
    let depths = options
        .layers
        .iter()
        .rev()
        .map(|&depth| {
            let started = Instant::now();
            let vectors = encoder.encode(&refs, &[depth])?.remove(0);
            let seconds = started.elapsed().as_secs_f64();
            let cosine_to_f32 = match &reference {
                Some(reference) => Some(Fidelity::of(
                    &vectors,
                    &reference.encode(&refs, &[depth])?.remove(0),
                )),
                None => None,
            };
            Ok(DepthThroughput {
                layers: depth,
                paragraphs: refs.len(),
                tokens,
                seconds,
                paragraphs_per_s: refs.len() as f64 / seconds,
                tokens_per_s: tokens as f64 / seconds,
                cosine_to_f32,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(EncodeBench {
        model: crate::files::model_name(&options.model_dir),
        batch_size: encoder.batch_size,
        max_length: encoder.max_length,
        threads: rayon::current_num_threads(),
        kernels: crate::encoder::cpu::kernels_in_use(),
        depths,
    })
}

#[derive(Debug, Clone)]
pub struct QueryBenchOptions {
    pub index_dir: PathBuf,
    pub precision: Precision,
    pub questions: PathBuf,
    pub limit: usize,
    pub modes: Vec<Mode>,
    pub hops: u8,
    pub k: usize,
    pub layers: Option<usize>,
    pub dim: Option<usize>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    pub mode: Mode,
    pub hops: u8,
    pub queries: usize,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub mean_ms: f64,
    /// Of the mean: encoding the question, and searching (faiss and/or BM25).
    pub mean_encode_ms: f64,
    pub mean_search_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct QueryBench {
    pub documents: u64,
    pub layers: usize,
    pub dim: usize,
    pub latencies: Vec<Latency>,
}

/// Times `rag search` end to end (encode the question, search, fetch documents) per mode, in a
/// process that has already answered a few warm-up questions.
pub fn query_latency(options: &QueryBenchOptions) -> Result<QueryBench> {
    let retriever = Retriever::open(&options.index_dir, None, options.precision)?;
    let questions: Vec<String> = corpus::read_questions(&options.questions, options.limit)?
        .into_iter()
        .map(|q| q.question)
        .collect();
    if questions.is_empty() {
        bail!("{} has no questions", options.questions.display());
    }
    let cell = retriever
        .index
        .manifest
        .resolve(options.layers, options.dim)?;
    let latencies = options
        .modes
        .iter()
        .map(|&mode| {
            let strategy = Strategy::new(mode, options.hops)?;
            let request = |query: &str| {
                retriever.search(&SearchRequest {
                    query,
                    k: options.k,
                    strategy,
                    layers: Some(cell.layers),
                    dim: Some(cell.dim),
                })
            };
            for q in questions.iter().take(5) {
                request(q)?;
            }
            let (mut encode_ms, mut search_ms) = (0.0, 0.0);
            let mut times = questions
                .iter()
                .map(|q| {
                    let started = Instant::now();
                    let response = request(q)?;
                    encode_ms += response.timings.encode_ms;
                    search_ms += response.timings.search_ms;
                    Ok(ms_since(started))
                })
                .collect::<Result<Vec<f64>>>()?;
            let n = times.len() as f64;
            times.sort_by(f64::total_cmp);
            Ok(Latency {
                mode,
                hops: options.hops,
                queries: times.len(),
                p50_ms: percentile(&times, 0.50),
                p90_ms: percentile(&times, 0.90),
                p99_ms: percentile(&times, 0.99),
                mean_ms: times.iter().sum::<f64>() / n,
                mean_encode_ms: encode_ms / n,
                mean_search_ms: search_ms / n,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(QueryBench {
        documents: retriever.index.len(),
        layers: cell.layers,
        dim: cell.dim,
        latencies,
    })
}

/// Nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&[3.0], 0.9), 3.0);
        assert!(percentile(&[], 0.5).is_nan());
    }
}
