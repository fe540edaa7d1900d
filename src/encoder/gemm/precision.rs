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
    /// Weights per output column and activations per token in 8-bit integers (AVX-512 VNNI):
    /// faster, at a small cost in agreement with f32.
    Int8,
}

impl Precision {
    /// Whether this CPU can encode at this precision.
    pub fn available(self) -> bool {
        match self {
            Self::F32 => true,
            Self::Int8 => super::int8::int8_supported(),
        }
    }

    /// The fastest precision this CPU can encode at: int8 where it has AVX-512 VNNI, else f32.
    pub fn fastest_available() -> Self {
        if Self::Int8.available() {
            Self::Int8
        } else {
            Self::F32
        }
    }
}
