//! The f32 kernel family: weights packed in panels of 64 output columns, one FMA per product,
//! the sums kept in f32 (exact up to rounding). A panel is stored strip by strip, a strip being
//! the columns one register tile covers (all 64 on AVX-512, 16 on AVX2), each strip one row of
//! its width per input feature, so that a tile reads each strip's weights as one sequential
//! run. Read as 16-column rows 256 bytes apart (one panel row per feature), the AVX2 strips
//! fell on a quarter of L1's sets; with the input tiles interleaved too ([`with_tile_rows`]),
//! encoding ran 1.22x as fast on a 2-core Zen 3 (eval/encode/README.md). AVX-512 reads its
//! inputs in place: its one strip per panel never had the AVX2 strips' conflicts, and there
//! the interleave cost more than it saved (f32 encoding 0.965x on a Zen 4).

use candle_core::{Result, Tensor};

use std::cell::RefCell;

use super::{Input, PackedLinear, PanelSource, Tile, Weights, PANEL, TILE_ROWS};
#[cfg(test)]
use crate::encoder::simd::portable::Portable;
#[cfg(target_arch = "x86_64")]
use crate::encoder::simd::{Avx2, Avx512};
use crate::encoder::simd::{Isa, Simd};

/// 64 consecutive weights of a panel (one row of a 64-column strip, four of a 16-column one),
/// aligned so that loads never split a cache line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(super) struct PanelRow([f32; PANEL]);

/// Pointers to a tile's f32 inputs over one block of input features.
pub(super) struct F32Source {
    /// The tile's first row: in [`with_tile_rows`]' interleaved tiles where it made them
    /// (feature `i` of row `r` at `i * TILE_ROWS + r`), else in place.
    pub(super) xs: *const f32,
    pub(super) in_dim: usize,
    /// The panel's first weight (`in_dim * PANEL` of them, strip by strip).
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
        let width = strip_cols(isa);
        let mut flat = vec![0.0; n_panels * in_dim * PANEL];
        for (o, row) in weight.iter().enumerate() {
            let (panel, lane) = (o / PANEL, o % PANEL);
            let strip = panel * in_dim * PANEL + lane / width * in_dim * width;
            for (i, &w) in row.iter().enumerate() {
                flat[strip + i * width + lane % width] = w;
            }
        }
        let panels = flat
            .chunks_exact(PANEL)
            .map(|run| PanelRow(run.try_into().expect("chunks of PANEL")))
            .collect();
        Ok(Self {
            in_dim,
            out_dim: weight.len(),
            weights: Weights::F32 { panels, isa },
            bias,
        })
    }
}

/// Where the tile of row `row` starts ([`F32Source::xs`]) for `isa`'s kernel, of the chunk
/// from row `chunk` on: `tiles` from [`with_tile_rows`] for that chunk, `xs` the whole input.
pub(super) fn tile_start(
    isa: Isa,
    xs: &[f32],
    tiles: &[f32],
    in_dim: usize,
    chunk: usize,
    row: usize,
) -> *const f32 {
    if interleaves(isa) {
        tiles[(row - chunk) * in_dim..].as_ptr()
    } else {
        xs[row * in_dim..].as_ptr()
    }
}

/// Whether `isa`'s kernel reads its inputs interleaved ([`with_tile_rows`]; [`strips`]'
/// `INTERLEAVED`).
fn interleaves(isa: Isa) -> bool {
    match isa {
        Isa::Avx2 => true,
        Isa::Avx512 => false,
        #[cfg(test)]
        Isa::Portable8 => true,
        #[cfg(test)]
        Isa::Portable16 => false,
    }
}

thread_local! {
    /// [`with_tile_rows`]' buffer, kept between calls: a chunk's rows are at most 576 KiB.
    static TILE_ROWS_BUFFER: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on rows `rows` of an f32 input rearranged for the kernel: each register tile's
/// `TILE_ROWS` rows interleaved feature by feature (`[tile][feature][row]`, rows past the
/// input zero), so that a step's six broadcasts read one run of 24 bytes that the tile's
/// steps walk in order, instead of six rows a row's width apart, where the kernel reads them so
/// ([`interleaves`]). Other inputs get an empty slice.
pub(super) fn with_tile_rows<T>(
    input: &Input,
    in_dim: usize,
    rows: std::ops::Range<usize>,
    f: impl FnOnce(&[f32]) -> T,
) -> T {
    let Input::F32 { xs, isa, .. } = input else {
        return f(&[]);
    };
    if !interleaves(*isa) {
        return f(&[]);
    }
    TILE_ROWS_BUFFER.with_borrow_mut(|tiles| {
        let xs = &xs[rows.start * in_dim..rows.end * in_dim];
        // A vector's worth of slack: `interleave` stores whole vectors (see there).
        tiles.resize(
            rows.len().div_ceil(TILE_ROWS) * TILE_ROWS * in_dim + 16,
            0.0,
        );
        // SAFETY: the layer was packed for `isa`, which the CPU has; `tiles` holds the tiles
        // and the slack.
        unsafe {
            match isa {
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2 => interleave_avx2(xs, in_dim, tiles),
                #[cfg(not(target_arch = "x86_64"))]
                Isa::Avx2 => unreachable!("no x86 set is detected elsewhere"),
                #[cfg(test)]
                Isa::Portable8 => interleave::<Portable<8>>(xs, in_dim, tiles),
                Isa::Avx512 => unreachable!("read in place"),
                #[cfg(test)]
                Isa::Portable16 => unreachable!("read in place"),
            }
        }
        f(tiles)
    })
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn interleave_avx2(xs: &[f32], in_dim: usize, tiles: &mut [f32]) {
    interleave::<Avx2>(xs, in_dim, tiles)
}

/// [`with_tile_rows`]' rearrangement on `S`: a tile's rows `LANES` features at a time,
/// transposed in registers ([`Simd::transpose`]; the rows past the tile's zero), each feature's
/// vector stored whole at its place: its lanes past `TILE_ROWS` (zeros) land where the next
/// feature's (or tile's) go, which are stored after them. One value at a time this took 4% of
/// encoding on AVX2.
///
/// # Safety
/// Needs `S`'s instruction set; `tiles` holds `xs`' rows rounded up to whole tiles and
/// `LANES` more floats.
#[inline(always)]
unsafe fn interleave<S: Simd>(xs: &[f32], in_dim: usize, tiles: &mut [f32]) {
    let tile_len = TILE_ROWS * in_dim;
    assert!(
        S::LANES >= TILE_ROWS && tiles.len() >= xs.len().div_ceil(tile_len) * tile_len + S::LANES
    );
    for (t, rows) in xs.chunks(tile_len).enumerate() {
        let height = rows.len() / in_dim;
        let tile = tiles.as_mut_ptr().add(t * tile_len);
        for first in (0..in_dim).step_by(S::LANES) {
            let width = S::LANES.min(in_dim - first);
            let mut v = [S::zero(); 16];
            let v = &mut v[..S::LANES];
            for (r, v) in v.iter_mut().enumerate().take(height) {
                *v = S::load_first(rows.as_ptr().add(r * in_dim + first), width);
            }
            S::transpose(v);
            for (i, &v) in v.iter().enumerate().take(width) {
                S::store(tile.add((first + i) * TILE_ROWS), v);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl PanelSource for F32Source {
    unsafe fn accumulate<const R: usize>(tile: &Tile<Self>) {
        match tile.source.isa {
            Isa::Avx512 => accumulate_avx512::<R>(tile),
            Isa::Avx2 => accumulate_avx2::<R>(tile),
            #[cfg(test)]
            Isa::Portable16 => strips::<Portable<16>, R, 4, false>(tile),
            #[cfg(test)]
            Isa::Portable8 => strips::<Portable<8>, R, 2, true>(tile),
        }
    }

    fn isa(&self) -> Isa {
        self.isa
    }
}

/// The columns of one register tile on `isa`: [`strips`]' `V * LANES`.
fn strip_cols(isa: Isa) -> usize {
    match isa {
        Isa::Avx512 => PANEL,
        Isa::Avx2 => 16,
        #[cfg(test)]
        Isa::Portable16 => PANEL,
        #[cfg(test)]
        Isa::Portable8 => 16,
    }
}

/// The whole 64-column panel in one strip: 6 rows x 4 vectors are 24 of the 32 registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline(never)]
unsafe fn accumulate_avx512<const R: usize>(tile: &Tile<F32Source>) {
    strips::<Avx512, R, 4, false>(tile);
}

/// The panel in strips of 16 columns: 6 rows x 2 vectors are 12 of the 16 registers, leaving
/// two for the weights and one for the broadcast input.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline(never)]
unsafe fn accumulate_avx2<const R: usize>(tile: &Tile<F32Source>) {
    strips::<Avx2, R, 2, true>(tile);
}

/// Stores (or adds to, for a later block of features) the first `R` rows' sums over the
/// tile's block of features, for its strip of `V` vectors of `S` (the panel's valid columns of
/// it; the last vector of a row is masked to them), its inputs interleaved or in place as
/// `INTERLEAVED` says (constant steps for the interleaved ones).
///
/// # Safety
/// Needs `S`'s instruction set; `tile` as [`PanelSource::accumulate`] needs it, its strip
/// `V * S::LANES` wide.
#[inline(always)]
unsafe fn strips<S: Simd, const R: usize, const V: usize, const INTERLEAVED: bool>(
    tile: &Tile<F32Source>,
) {
    let s = &tile.source;
    debug_assert_eq!(INTERLEAVED, interleaves(s.isa));
    let (feature_step, row_step) = if INTERLEAVED {
        (TILE_ROWS, 1)
    } else {
        (1, s.in_dim)
    };
    let width = V * S::LANES;
    for first in (0..tile.cols).step_by(width) {
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
        let weights = s.weights.add(first * s.in_dim);
        for i in s.depth.clone() {
            // Whole vectors: the panel is zero beyond the valid columns.
            let w = weights.add(i * width);
            let mut wv = [S::zero(); V];
            for (v, wv) in wv.iter_mut().enumerate() {
                *wv = S::load(w.add(v * S::LANES));
            }
            let x = s.xs.add(i * feature_step);
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = S::splat(*x.add(r * row_step));
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
