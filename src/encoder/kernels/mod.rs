//! Fused CPU kernels, as candle custom ops: [`math`] holds the exp / erf / GELU approximations
//! they share, [`attention`] and [`bias_gelu`] the forward-only ops of the encoder's fast path, [`differentiable`]
//! the ops training runs backward through.

mod attention;
mod bias_gelu;
mod differentiable;
mod math;

use candle_core::{bail, CpuStorage, Layout, Result, Shape};
use rayon::prelude::*;

pub use attention::attention;
pub use bias_gelu::bias_gelu;
pub use differentiable::{bias_add, gelu_train, layer_norm, masked_softmax_train};
pub(super) use math::vector::{exp as exp_vector, gelu as gelu_vector};

pub(super) fn contiguous_f32<'a>(storage: &'a CpuStorage, layout: &Layout) -> Result<&'a [f32]> {
    let data = storage.as_slice::<f32>()?;
    match layout.contiguous_offsets() {
        Some((start, end)) => Ok(&data[start..end]),
        None => bail!("fused kernels need contiguous f32 input"),
    }
}

/// `row_op(out, xs, bias)` over the rows of `xs` (contiguous f32, `[.., width]`), in parallel,
/// `rows_per_item(width)` rows a work item, with a `[width]` bias (refused unless it is one row
/// wide): the body of the bias kernels, inference's bias-GELU and training's bias add.
pub(super) fn map_rows_with_bias(
    (xs, xs_layout): (&CpuStorage, &Layout),
    (bias, bias_layout): (&CpuStorage, &Layout),
    rows_per_item: impl Fn(usize) -> usize,
    row_op: impl Fn(&mut [f32], &[f32], &[f32]) + Sync,
) -> Result<(CpuStorage, Shape)> {
    let src = contiguous_f32(xs, xs_layout)?;
    let bias = contiguous_f32(bias, bias_layout)?;
    let width = xs_layout.shape().dims().last().copied().unwrap_or(1);
    if bias.is_empty() || bias.len() != width {
        bail!("a bias of {} for rows of {width}", bias.len());
    }
    let chunk = width * rows_per_item(width);
    let mut out = vec![0f32; src.len()];
    out.par_chunks_mut(chunk)
        .zip(src.par_chunks(chunk))
        .for_each(|(out, xs)| row_op(out, xs, bias));
    Ok((CpuStorage::F32(out), xs_layout.shape().clone()))
}

/// Defines `$name(args)` that runs `$body` compiled for AVX-512 or AVX2+FMA when the CPU has
/// them and `RAG_MAX_ISA` allows it (the crate itself targets baseline x86-64), so the loops inside vectorise wide. The body
/// is instantiated inside each `target_feature` function rather than called through a closure:
/// a closure the inliner declines would run at baseline width.
macro_rules! multiversion {
    ($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $body:block) => {
        $(#[$doc])*
        fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                unsafe fn avx512($($arg: $ty),*) $body
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2($($arg: $ty),*) $body
                use $crate::encoder::cpu::{has, Feature};
                if has(Feature::Avx512F) {
                    // SAFETY: the CPU supports the enabled features (checked just above).
                    return unsafe { avx512($($arg),*) };
                }
                if has(Feature::Avx2Fma) {
                    // SAFETY: as above.
                    return unsafe { avx2($($arg),*) };
                }
            }
            $body
        }
    };
}

/// Lets the kernel modules write `multiversion! { .. }`.
use multiversion;

#[cfg(test)]
pub(super) mod tests {
    use candle_core::Tensor;

    /// The largest element-wise difference of two same-shaped tensors.
    pub(in crate::encoder) fn max_abs_diff(a: &Tensor, b: &Tensor) -> f32 {
        (a - b)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap()
    }
}
