//! How the inference projections compute: the choice between the GEMM's kernel families.

use serde::{Deserialize, Serialize};

/// The arithmetic of the inference projections (the GEMMs, about two thirds of encoding).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// Exact: matches the reference implementation to a cosine of 0.9999.
    #[default]
    F32,
    /// Weights and activations rounded to bf16, sums in f32 (AVX-512 BF16): twice the
    /// multiply-adds per instruction, close to f32 (eval/precision/). Encodes in f32 where the
    /// CPU lacks it.
    Bf16,
    /// Weights per output column and activations per token in 8-bit integers (AVX-512 VNNI,
    /// else AVX2): faster with VNNI, at a small cost in agreement with f32.
    Int8,
}

impl Precision {
    /// Whether this CPU can encode at this precision.
    pub fn available(self) -> bool {
        match self {
            Self::F32 => true,
            Self::Bf16 => super::bf16::bf16_supported(),
            Self::Int8 => super::int8::int8_supported(),
        }
    }

    /// The precision an encoder asked for this one gets: itself where the CPU has it; for
    /// bf16 without AVX-512 BF16, f32 (the same arithmetic, unrounded), said on stderr.
    /// Int8 has no fallback: its vectors differ from f32's enough to ask for it explicitly.
    pub fn or_fallback(self) -> Self {
        if self == Self::Bf16 && !self.available() {
            eprintln!("note: this CPU has no AVX-512 BF16; encoding in f32 instead of bf16");
            return Self::F32;
        }
        self
    }

    /// What `rag index` encodes in unless told: bf16 where it runs on AMX tiles (1.86x f32's
    /// throughput at a cosine of 0.99997 to f32's vectors and the same HotpotQA Recall@5,
    /// eval/precision/bf16/), else f32. `vdpbf16ps` alone indexed slower than f32's FMAs on
    /// the one such CPU measured, so it is not the default anywhere.
    pub fn index_default() -> Self {
        if super::bf16::amx::amx_supported() {
            Self::Bf16
        } else {
            Self::F32
        }
    }

    /// The fastest precision this CPU can encode at, as measured on its kind of CPU: int8 where
    /// it has AVX-512 VNNI, and on AVX2 (1.31x f32 on a Zen 3, eval/encode/README.md) except
    /// where 256-bit operations are split in two (a first-generation Zen: `vpmaddubsw` and
    /// `vpmaddwd` issue at the rate of an FMA there, and int8 measured no faster,
    /// eval/encode/int8-avx2.md); else f32.
    pub fn fastest_available() -> Self {
        if super::int8::int8_outpaces_f32() {
            Self::Int8
        } else {
            Self::F32
        }
    }
}
