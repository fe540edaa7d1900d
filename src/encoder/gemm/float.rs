//! The f32 kernel family: weights packed as panel rows of 64 output columns, one FMA per
//! product, the sums kept in f32 (exact up to rounding).

use candle_core::{Result, Tensor};

use super::{PackedLinear, PanelSource, Tile, Weights, PANEL};
#[cfg(test)]
use crate::encoder::simd::portable::Portable;
#[cfg(target_arch = "x86_64")]
use crate::encoder::simd::{Avx2, Avx512};
use crate::encoder::simd::{Isa, Simd};

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
    pub(super) isa: Isa,
}

impl PackedLinear {
    /// From `weight` `[out, in]` (PyTorch's layout) and `bias` `[out]`, for the widest
    /// instruction set this CPU has (`supported()` must hold).
    pub fn new(weight: &Tensor, bias: &Tensor) -> Result<Self> {
        match Isa::detect() {
            Some(isa) => Self::new_for(weight, bias, isa),
            None => candle_core::bail!("the packed f32 projection needs AVX-512 or AVX2 with FMA"),
        }
    }

    /// As [`Self::new`], for the kernel of `isa`, which the CPU must have.
    pub(super) fn new_for(weight: &Tensor, bias: &Tensor, isa: Isa) -> Result<Self> {
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
            weights: Weights::F32 { panels, isa },
            bias,
        })
    }
}

#[cfg(target_arch = "x86_64")]
impl PanelSource for F32Source {
    unsafe fn accumulate<const R: usize>(tile: &Tile<Self>) {
        match tile.source.isa {
            Isa::Avx512 => accumulate_avx512::<R>(tile),
            Isa::Avx2 => accumulate_avx2::<R>(tile),
            #[cfg(test)]
            Isa::Portable16 => strips::<Portable<16>, R, 4>(tile),
            #[cfg(test)]
            Isa::Portable8 => strips::<Portable<8>, R, 2>(tile),
        }
    }

    fn isa(&self) -> Isa {
        self.isa
    }
}

/// The whole 64-column panel in one strip: 6 rows x 4 vectors are 24 of the 32 registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline(never)]
unsafe fn accumulate_avx512<const R: usize>(tile: &Tile<F32Source>) {
    strips::<Avx512, R, 4>(tile);
}

/// The panel in strips of 16 columns: 6 rows x 2 vectors are 12 of the 16 registers, leaving
/// two for the weights and one for the broadcast input.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline(never)]
unsafe fn accumulate_avx2<const R: usize>(tile: &Tile<F32Source>) {
    strips::<Avx2, R, 2>(tile);
}

/// Stores (or adds to, for a later block of features) the first `R` rows' sums over the
/// tile's block of features, in strips of `V` vectors of `S` across the panel's valid
/// columns; the last vector of a row is masked to them.
///
/// # Safety
/// Needs `S`'s instruction set; `tile` as [`PanelSource::accumulate`] needs it.
#[inline(always)]
unsafe fn strips<S: Simd, const R: usize, const V: usize>(tile: &Tile<F32Source>) {
    let s = &tile.source;
    for first in (0..tile.cols).step_by(V * S::LANES) {
        let live = |v: usize| tile.cols.saturating_sub(first + v * S::LANES);
        let mut acc = [[S::zero(); V]; R];
        if s.depth.start > 0 {
            for (r, acc) in acc.iter_mut().enumerate() {
                for (v, a) in acc.iter_mut().enumerate() {
                    let at = tile.out.add(r * tile.out_dim + first + v * S::LANES);
                    *a = S::load_first(at, live(v));
                }
            }
        }
        for i in s.depth.clone() {
            // Whole vectors: the panel is zero beyond the valid columns.
            let w = s.weights.add(i * PANEL + first);
            let mut wv = [S::zero(); V];
            for (v, wv) in wv.iter_mut().enumerate() {
                *wv = S::load(w.add(v * S::LANES));
            }
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = S::splat(*s.xs.add(r * s.in_dim + i));
                for (a, &w) in acc.iter_mut().zip(&wv) {
                    *a = S::fmadd(x, w, *a);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            for (v, &a) in acc.iter().enumerate() {
                let at = tile.out.add(r * tile.out_dim + first + v * S::LANES);
                S::store_first(at, live(v), a);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{epilogue_cases, exact, random};
    use super::super::DEPTH_BLOCK;
    use super::*;
    use crate::encoder::kernels::tests::max_abs_diff;

    /// Every tile height (1..6 leftover rows), both the row-split and the panel-split
    /// schedules, a last panel narrower than 64 and one narrower than a vector, last panels
    /// whose tail vector follows full ones, odd widths, and
    /// inputs wider than one block of features (sums carried between blocks); with each
    /// epilogue, on every backend: portable at 16 lanes (AVX-512's whole-panel tiles) and 8
    /// (AVX2's strips), and each instruction set the CPU has.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn packed_projection_matches_candle_matmul() {
        for isa in Isa::testable() {
            matches_candle_matmul_on(isa);
        }
    }

    #[cfg(target_arch = "x86_64")]
    fn matches_candle_matmul_on(isa: Isa) {
        for (rows, in_dim, out_dim) in [
            (1, 7, 5),
            (5, 33, 70),
            (13, 64, 64),
            (250, 96, 136),
            (601, 40, 200),
            (37, 2 * DEPTH_BLOCK + 41, 70),
            // Last panels 27 and 37 wide: a tail vector after full ones, at 16 and at 8 lanes.
            (3, 19, 27),
            (7, 45, PANEL + 37),
        ] {
            let x = random((rows, in_dim), rows as u64);
            let w = random((out_dim, in_dim), 7);
            let b = random((1, out_dim), 9).squeeze(0).unwrap();
            let packed = PackedLinear::new_for(&w, &b, isa).unwrap();
            let residual = random((rows, out_dim), 11);
            for (ours, theirs) in epilogue_cases(&packed, &x, &exact(&x, &w, &b), &residual) {
                assert_eq!(ours.dims(), theirs.dims());
                let diff = max_abs_diff(&ours, &theirs);
                let case = format!("{isa:?} {rows}x{in_dim}->{out_dim}");
                assert!(diff < 1e-4, "{case}: max diff {diff}");
            }
        }
    }
}
