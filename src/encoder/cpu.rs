//! Which instruction sets the encoder's kernels may use: what the CPU has, capped by
//! `RAG_MAX_ISA` (as oneDNN's `ONEDNN_MAX_CPU_ISA` caps it). The cap lets an AVX-512 machine run,
//! test and time the AVX2 path (the one most laptops and many cloud machines take), or candle's
//! generic one, without another CPU: `RAG_MAX_ISA=avx2` leaves out AVX-512 and everything
//! built on it (VNNI, BF16, AMX), `RAG_MAX_ISA=none` every hand-written kernel.
//!
//! Every kernel family asks [`has`] rather than the CPU, so the cap holds for all of them at
//! once; the llama.cpp generator and faiss keep their own detection.

use std::sync::OnceLock;

use anyhow::{bail, Result};

/// The environment variable that caps the encoder's instruction sets.
pub const MAX_ISA_VAR: &str = "RAG_MAX_ISA";

/// An instruction set level of the encoder's kernels, narrowest first: the cap, and what runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MaxIsa {
    /// No hand-written kernel: candle's generic code, at the crate's baseline x86-64.
    None,
    /// AVX2 and FMA.
    Avx2,
    /// AVX-512 and its extensions (VNNI, BF16, AMX): no cap.
    Avx512,
}

impl MaxIsa {
    fn parse(value: &str) -> Result<Self> {
        Ok(match value.to_ascii_lowercase().as_str() {
            "none" => Self::None,
            "avx2" => Self::Avx2,
            "avx512" | "" => Self::Avx512,
            other => {
                bail!("{MAX_ISA_VAR}={other:?}: expected avx512 (no cap), avx2 or none")
            }
        })
    }
}

/// The cap `RAG_MAX_ISA` sets, read once; an unknown value is an error. The binary checks it at
/// start, so that a misspelt cap stops the run instead of being ignored.
pub fn max_isa() -> Result<MaxIsa> {
    cap().clone().map_err(anyhow::Error::msg)
}

/// `RAG_MAX_ISA` parsed, once.
fn cap() -> &'static std::result::Result<MaxIsa, String> {
    static CAP: OnceLock<std::result::Result<MaxIsa, String>> = OnceLock::new();
    CAP.get_or_init(|| match std::env::var(MAX_ISA_VAR) {
        Ok(value) => MaxIsa::parse(&value).map_err(|e| e.to_string()),
        Err(_) => Ok(MaxIsa::Avx512),
    })
}

/// The widest set the f32 kernels run on here, under the cap (the one they choose): what a
/// benchmark records beside its numbers (`avx2` on an AVX-512 machine capped with
/// `RAG_MAX_ISA=avx2`).
pub fn kernels_in_use() -> MaxIsa {
    use super::simd::Isa;
    match Isa::detect() {
        Some(Isa::Avx512) => MaxIsa::Avx512,
        Some(Isa::Avx2) => MaxIsa::Avx2,
        _ => MaxIsa::None,
    }
}

/// The CPU features the kernels are chosen by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::encoder) enum Feature {
    /// AVX2 with FMA: the 8-lane kernels.
    Avx2Fma,
    /// AVX-512 F: the 16-lane kernels.
    Avx512F,
    /// AVX-512 F, BW and VNNI: the int8 `vpdpbusd` kernel.
    Avx512Vnni,
    /// AVX-512 F and BF16: the bf16 `vdpbf16ps` kernel (and AMX, which needs it too).
    Avx512Bf16,
}

impl Feature {
    fn needs(self) -> MaxIsa {
        match self {
            Self::Avx2Fma => MaxIsa::Avx2,
            Self::Avx512F | Self::Avx512Vnni | Self::Avx512Bf16 => MaxIsa::Avx512,
        }
    }
}

/// Whether the kernels may use `feature`: the CPU has it and the cap allows it. (A cap that
/// does not parse caps nothing here; the binary has refused it before any kernel runs.)
pub(in crate::encoder) fn has(feature: Feature) -> bool {
    if *cap().as_ref().unwrap_or(&MaxIsa::Avx512) < feature.needs() {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as cpu;
        match feature {
            Feature::Avx2Fma => cpu!("avx2") && cpu!("fma"),
            Feature::Avx512F => cpu!("avx512f"),
            Feature::Avx512Vnni => cpu!("avx512f") && cpu!("avx512bw") && cpu!("avx512vnni"),
            Feature::Avx512Bf16 => cpu!("avx512f") && cpu!("avx512bf16"),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_parse_and_order_and_a_misspelt_one_is_refused() {
        assert_eq!(MaxIsa::parse("AVX2").unwrap(), MaxIsa::Avx2);
        assert_eq!(MaxIsa::parse("none").unwrap(), MaxIsa::None);
        assert_eq!(MaxIsa::parse("avx512").unwrap(), MaxIsa::Avx512);
        assert!(MaxIsa::None < MaxIsa::Avx2 && MaxIsa::Avx2 < MaxIsa::Avx512);
        let err = MaxIsa::parse("avx-2").unwrap_err().to_string();
        assert!(
            err.contains("RAG_MAX_ISA") && err.contains("avx-2"),
            "{err}"
        );
    }

    #[test]
    fn the_cap_holds_for_every_feature_above_it() {
        let cap = max_isa().unwrap();
        for feature in [
            Feature::Avx2Fma,
            Feature::Avx512F,
            Feature::Avx512Vnni,
            Feature::Avx512Bf16,
        ] {
            if feature.needs() > cap {
                assert!(!has(feature), "{feature:?} allowed under {cap:?}");
            }
        }
    }
}
