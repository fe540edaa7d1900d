//! Where encoding time goes, op by op: wall time summed per op while [`enable`]d, for
//! `examples/encode_profile.rs` (eval/encode/profile.sh). Off by default, when a span costs one
//! relaxed atomic load.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// The ops an encoding batch is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Tokenise,
    /// Padding the batch into id and mask tensors, packing the real tokens together.
    Padding,
    /// Word, position and type look-ups and their sum (their layer norm counts as `LayerNorm`).
    Embeddings,
    /// The projections' matrix products (with their fused epilogues where the kernel has them).
    Gemm,
    /// Bias and GELU applied in a pass of their own (candle's GEMM has no epilogue).
    BiasGelu,
    /// Bias applied in a pass of its own.
    Bias,
    /// The residual add in a pass of its own.
    Residual,
    /// Softmax attention from the QKV projection to the context.
    Attention,
    LayerNorm,
    /// Pooling, the optional head and the copy out of the tensors.
    Pooling,
}

impl Op {
    pub const ALL: [Op; 10] = [
        Op::Tokenise,
        Op::Padding,
        Op::Embeddings,
        Op::Gemm,
        Op::BiasGelu,
        Op::Bias,
        Op::Residual,
        Op::Attention,
        Op::LayerNorm,
        Op::Pooling,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Op::Tokenise => "tokenise",
            Op::Padding => "padding",
            Op::Embeddings => "embeddings",
            Op::Gemm => "gemm",
            Op::BiasGelu => "bias_gelu",
            Op::Bias => "bias",
            Op::Residual => "residual",
            Op::Attention => "attention",
            Op::LayerNorm => "layer_norm",
            Op::Pooling => "pooling",
        }
    }
}

static ENABLED: AtomicBool = AtomicBool::new(false);
static NANOS: [AtomicU64; Op::ALL.len()] = [const { AtomicU64::new(0) }; Op::ALL.len()];
static CALLS: [AtomicU64; Op::ALL.len()] = [const { AtomicU64::new(0) }; Op::ALL.len()];

/// Starts counting (from zero).
pub fn enable() {
    for (nanos, calls) in NANOS.iter().zip(&CALLS) {
        nanos.store(0, Ordering::Relaxed);
        calls.store(0, Ordering::Relaxed);
    }
    ENABLED.store(true, Ordering::Relaxed);
}

/// Stops counting and returns each op's summed seconds and number of calls.
pub fn take() -> Vec<(Op, f64, u64)> {
    ENABLED.store(false, Ordering::Relaxed);
    Op::ALL
        .iter()
        .map(|&op| {
            let i = op as usize;
            let seconds = NANOS[i].load(Ordering::Relaxed) as f64 * 1e-9;
            (op, seconds, CALLS[i].load(Ordering::Relaxed))
        })
        .collect()
}

/// Runs `f`, counting its wall time against `op` while profiling is on.
#[inline]
pub(crate) fn time<T>(op: Op, f: impl FnOnce() -> T) -> T {
    if !ENABLED.load(Ordering::Relaxed) {
        return f();
    }
    let started = Instant::now();
    let out = f();
    let i = op as usize;
    NANOS[i].fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    CALLS[i].fetch_add(1, Ordering::Relaxed);
    out
}
