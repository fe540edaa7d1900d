//! The f32 kernel family: weights packed as panel rows of 64 output columns, one FMA per
//! product, the sums kept in f32 (exact up to rounding).

use candle_core::{Result, Tensor};

use super::{PackedLinear, PanelSource, Tile, Weights, PANEL, VECS};

/// One weight panel row: 64 output columns, aligned so that loads never split a cache line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(super) struct PanelRow([f32; PANEL]);

/// Pointers to a tile's f32 inputs over one block of input features.
pub(super) struct F32Source {
    pub(super) xs: *const f32,
    pub(super) in_dim: usize,
    /// The panel's first row.
    pub(super) weights: *const f32,
    pub(super) depth: std::ops::Range<usize>,
}

impl PackedLinear {
    /// From `weight` `[out, in]` (PyTorch's layout) and `bias` `[out]`.
    pub fn new(weight: &Tensor, bias: &Tensor) -> Result<Self> {
        let (in_dim, weight, bias) = Self::load(weight, bias)?;
        let n_panels = bias.len() / PANEL;
        let mut panels = vec![PanelRow([0.0; PANEL]); n_panels * in_dim];
        for (o, row) in weight.iter().enumerate() {
            let (panel, lane) = (o / PANEL, o % PANEL);
            for (i, &w) in row.iter().enumerate() {
                panels[panel * in_dim + i].0[lane] = w;
            }
        }
        Ok(Self {
            in_dim,
            out_dim: weight.len(),
            weights: Weights::F32(panels),
            bias,
        })
    }
}

#[cfg(target_arch = "x86_64")]
impl PanelSource for F32Source {
    #[target_feature(enable = "avx512f")]
    #[inline(never)]
    unsafe fn accumulate<const R: usize>(tile: &Tile<Self>) {
        use std::arch::x86_64::*;
        let s = &tile.source;
        let mut acc = [[_mm512_setzero_ps(); VECS]; R];
        if s.depth.start > 0 {
            for (r, acc) in acc.iter_mut().enumerate() {
                for (v, a) in acc.iter_mut().enumerate() {
                    let at = tile.out.add(r * tile.out_dim + v * 16);
                    *a = _mm512_maskz_loadu_ps(tile.lanes(v * 16), at);
                }
            }
        }
        for i in s.depth.clone() {
            let w = s.weights.add(i * PANEL);
            let wv = [
                _mm512_load_ps(w),
                _mm512_load_ps(w.add(16)),
                _mm512_load_ps(w.add(32)),
                _mm512_load_ps(w.add(48)),
            ];
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = _mm512_set1_ps(*s.xs.add(r * s.in_dim + i));
                for (a, &w) in acc.iter_mut().zip(&wv) {
                    *a = _mm512_fmadd_ps(x, w, *a);
                }
            }
        }
        tile.store(&acc);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{epilogue_cases, exact, random};
    use super::super::{supported, DEPTH_BLOCK};
    use super::*;
    use crate::encoder::kernels::tests::max_abs_diff;

    /// Every tile height (1..6 leftover rows), both the row-split and the panel-split
    /// schedules, a last panel narrower than 64 and one narrower than a vector, odd widths, and
    /// inputs wider than one block of features (sums carried between blocks).
    #[test]
    fn packed_projection_matches_candle_matmul() {
        if !supported() {
            return crate::skip::skip(
                concat!(module_path!(), "::packed_projection_matches_candle_matmul"),
                "this CPU has no AVX-512; the packed GEMM is not used here",
            );
        }
        for (rows, in_dim, out_dim) in [
            (1, 7, 5),
            (5, 33, 70),
            (13, 64, 64),
            (250, 96, 136),
            (601, 40, 200),
            (37, 2 * DEPTH_BLOCK + 41, 70),
        ] {
            let x = random((rows, in_dim), rows as u64);
            let w = random((out_dim, in_dim), 7);
            let b = random((1, out_dim), 9).squeeze(0).unwrap();
            let packed = PackedLinear::new(&w, &b).unwrap();
            let residual = random((rows, out_dim), 11);
            for (ours, theirs) in epilogue_cases(&packed, &x, &exact(&x, &w, &b), &residual) {
                assert_eq!(ours.dims(), theirs.dims());
                let diff = max_abs_diff(&ours, &theirs);
                assert!(diff < 1e-4, "{rows}x{in_dim}->{out_dim}: max diff {diff}");
            }
        }
    }
}
