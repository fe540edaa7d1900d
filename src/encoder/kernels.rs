//! Fused CPU kernels for the inference path. Profiling the encoder showed candle spending more
//! time in scalar `erf` (GELU) and `exp` (softmax) from libm than in its GEMMs; these versions
//! use branch-free polynomial approximations that the compiler vectorises, run on all cores, and
//! fuse the attention mask into the softmax. Both are accurate to a few float ulps of the exact
//! functions (tested below), far inside what the reference-vector tests allow. Training keeps
//! candle's differentiable ops.

use candle_core::{bail, CpuStorage, CustomOp1, CustomOp2, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

/// `exp(x)` for f32 by range reduction to `r` in [-ln2/2, ln2/2] and a degree-6 polynomial.
#[inline(always)]
fn exp_approx(x: f32) -> f32 {
    let x = x.clamp(-87.3, 88.7);
    // Round to nearest by the 1.5 * 2^23 trick: `f32::round` is a libm call that stops the
    // loop from vectorising.
    const SHIFTER: f32 = 12_582_912.0;
    let n = (x * std::f32::consts::LOG2_E + SHIFTER) - SHIFTER;
    // ln 2 split in two so that x - n*ln2 stays exact.
    let r = x - n * 0.693_145_75 - n * 1.428_606_8e-6;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (0.166_666_67 + r * (0.041_666_668 + r * (0.008_333_334 + r * 0.001_388_889)))));
    let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
    p * scale
}

/// `erf(x)` by Abramowitz & Stegun 7.1.26: |error| < 1.5e-7 in exact arithmetic.
#[inline(always)]
fn erf_approx(x: f32) -> f32 {
    let sign = if x < 0.0 { -1.0 } else { 1.0 };
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t
        * (0.254_829_6
            + t * (-0.284_496_74 + t * (1.421_413_8 + t * (-1.453_152_1 + t * 1.061_405_4))));
    sign * (1.0 - poly * exp_approx(-a * a))
}

#[inline(always)]
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf_approx(x * std::f32::consts::FRAC_1_SQRT_2))
}

fn contiguous_f32<'a>(storage: &'a CpuStorage, layout: &Layout) -> Result<&'a [f32]> {
    let data = storage.as_slice::<f32>()?;
    match layout.contiguous_offsets() {
        Some((start, end)) => Ok(&data[start..end]),
        None => bail!("fused kernels need contiguous f32 input"),
    }
}

const CHUNK: usize = 16 * 1024;

/// Runs `body` compiled for AVX-512 or AVX2+FMA when the CPU has them (the crate itself targets
/// baseline x86-64), so the loops above vectorise wide.
#[inline(always)]
fn wide<R>(body: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f")]
        unsafe fn avx512<R>(body: impl FnOnce() -> R) -> R {
            body()
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2<R>(body: impl FnOnce() -> R) -> R {
            body()
        }
        if is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports the enabled features (checked just above).
            return unsafe { avx512(body) };
        }
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            // SAFETY: as above.
            return unsafe { avx2(body) };
        }
    }
    body()
}

/// Exact (erf) GELU, as Hugging Face's "gelu".
struct Gelu;

impl CustomOp1 for Gelu {
    fn name(&self) -> &'static str {
        "rag-gelu-erf"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let src = contiguous_f32(storage, layout)?;
        let mut dst = vec![0f32; src.len()];
        dst.par_chunks_mut(CHUNK)
            .zip(src.par_chunks(CHUNK))
            .for_each(|(d, s)| wide(|| d.iter_mut().zip(s).for_each(|(d, &s)| *d = gelu(s))));
        Ok((CpuStorage::F32(dst), layout.shape().clone()))
    }
}

pub fn gelu_erf(xs: &Tensor) -> Result<Tensor> {
    xs.contiguous()?.apply_op1_no_bwd(&Gelu)
}

/// `softmax(scores + bias)` over the last dimension, with scores `[batch, heads, q, k]` and the
/// additive mask bias `[batch, 1, 1, k]`.
struct MaskedSoftmax;

impl CustomOp2 for MaskedSoftmax {
    fn name(&self) -> &'static str {
        "rag-masked-softmax"
    }

    fn cpu_fwd(
        &self,
        scores: &CpuStorage,
        scores_layout: &Layout,
        bias: &CpuStorage,
        bias_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (batch, heads, queries, keys) = scores_layout.shape().dims4()?;
        if bias_layout.shape().elem_count() != batch * keys {
            bail!("mask bias does not match the attention scores");
        }
        let src = contiguous_f32(scores, scores_layout)?;
        let bias = contiguous_f32(bias, bias_layout)?;
        let rows_per_batch = heads * queries;
        let mut dst = vec![0f32; src.len()];
        dst.par_chunks_mut(keys)
            .zip(src.par_chunks(keys))
            .enumerate()
            .for_each(|(row, (d, s))| {
                let b = &bias[(row / rows_per_batch) * keys..][..keys];
                wide(|| softmax_row(d, s, b))
            });
        Ok((CpuStorage::F32(dst), scores_layout.shape().clone()))
    }
}

#[inline(always)]
fn softmax_row(d: &mut [f32], s: &[f32], b: &[f32]) {
    let mut max = f32::NEG_INFINITY;
    for ((d, &s), &b) in d.iter_mut().zip(s).zip(b) {
        *d = s + b;
        max = max.max(*d);
    }
    // Kept apart from the sum so this loop has no loop-carried dependency and vectorises.
    for d in d.iter_mut() {
        *d = exp_approx(*d - max);
    }
    let inv = 1.0 / d.iter().sum::<f32>();
    d.iter_mut().for_each(|d| *d *= inv);
}

pub fn masked_softmax(scores: &Tensor, bias: &Tensor) -> Result<Tensor> {
    scores
        .contiguous()?
        .apply_op2_no_bwd(&bias.contiguous()?, &MaskedSoftmax)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, D};

    #[test]
    fn exp_and_erf_match_libm() {
        let mut worst_exp = 0f32;
        let mut worst_erf = 0f32;
        for i in -40_000..=40_000 {
            let x = i as f32 / 1000.0;
            worst_exp = worst_exp.max(((exp_approx(x) - x.exp()) / x.exp()).abs());
            let exact = libm_erf(x);
            worst_erf = worst_erf.max((erf_approx(x) - exact).abs());
        }
        assert!(worst_exp < 1e-6, "exp relative error {worst_exp}");
        // The approximation itself is within 1.5e-7; f32 rounding of its terms adds a little.
        assert!(worst_erf < 6e-7, "erf error {worst_erf}");
    }

    /// The oracle: candle's scalar f64 erf, the one its own `gelu_erf` uses.
    fn libm_erf(x: f32) -> f32 {
        candle_core::cpu::erf::erf_f64(x as f64) as f32
    }

    #[test]
    fn fused_ops_match_candle() {
        let device = Device::Cpu;
        let x = Tensor::randn(0f32, 3.0, (4, 3, 5, 7), &device).unwrap();
        let ours = gelu_erf(&x).unwrap();
        let theirs = x.gelu_erf().unwrap();
        let diff = (ours - theirs).unwrap().abs().unwrap().max_all().unwrap();
        assert!(diff.to_scalar::<f32>().unwrap() < 1e-5);

        let mask = Tensor::new(&[[1f32, 1., 1., 1., 1., 0., 0.], [1., 1., 1., 1., 1., 1., 1.], [1., 0., 0., 0., 0., 0., 0.], [1., 1., 0., 0., 0., 0., 0.]], &device).unwrap();
        let bias = ((mask - 1.0).unwrap() * 1e4).unwrap().reshape((4, 1, 1, 7)).unwrap();
        let ours = masked_softmax(&x, &bias).unwrap();
        let theirs = candle_nn::ops::softmax(&x.broadcast_add(&bias).unwrap(), D::Minus1).unwrap();
        let diff = (ours - theirs).unwrap().abs().unwrap().max_all().unwrap();
        assert!(diff.to_scalar::<f32>().unwrap() < 1e-6);
    }
}
