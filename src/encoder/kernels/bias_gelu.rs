//! `gelu(x + bias)` in one pass, the epilogue candle's GEMM leaves to the caller: profiling the
//! encoder showed candle spending more time in scalar `erf` from libm than in its big GEMMs.

use candle_core::{CpuStorage, CustomOp2, Layout, Result, Shape, Tensor};

use super::map_rows_with_bias;
use super::math::gelu;
use super::multiversion;

multiversion! {
    fn bias_gelu_row(out: &mut [f32], xs: &[f32], bias: &[f32]) {
        for ((o, &x), &b) in out.iter_mut().zip(xs).zip(bias) {
            *o = gelu(x + b);
        }
    }
}

/// `gelu(x + bias)` with the exact (erf) GELU that Hugging Face calls "gelu", in one pass.
struct BiasGelu;

impl CustomOp2 for BiasGelu {
    fn name(&self) -> &'static str {
        "rag-bias-gelu"
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xs_layout: &Layout,
        bias: &CpuStorage,
        bias_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        // One row a work item, as this kernel has always split its work.
        map_rows_with_bias((xs, xs_layout), (bias, bias_layout), |_| 1, bias_gelu_row)
    }
}

/// `gelu(xs + bias)` for `xs` `[.., width]` and `bias` `[width]`.
pub fn bias_gelu(xs: &Tensor, bias: &Tensor) -> Result<Tensor> {
    xs.contiguous()?
        .apply_op2_no_bwd(&bias.contiguous()?, &BiasGelu)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoder::kernels::tests::max_abs_diff;
    use candle_core::Device;

    #[test]
    fn bias_gelu_matches_candle() {
        let device = Device::Cpu;
        let x = Tensor::randn(0f32, 3.0, (4, 3, 8), &device).unwrap();
        let bias = Tensor::randn(0f32, 1.0, 8, &device).unwrap();
        let ours = bias_gelu(&x, &bias).unwrap();
        let theirs = x.broadcast_add(&bias).unwrap().gelu_erf().unwrap();
        assert!(max_abs_diff(&ours, &theirs) < 1e-5);
    }
}
