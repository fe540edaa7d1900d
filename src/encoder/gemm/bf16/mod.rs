//! The bf16 kernel family, where the CPU has AVX-512 BF16: one `vdpbf16ps` does 32
//! multiply-adds (pairs of bf16 products added into 16 f32 lanes) where an FMA does 16, and the
//! weights take half the memory. Weights are rounded to bf16 once at load, activations at each
//! call (both to nearest, ties to even); the products of two bf16 values are exact in f32, the
//! sums, bias, GELU, residual, layer norms and softmax all stay f32.

pub(super) mod amx;

use candle_core::{bail, Result, Tensor};

use super::{convert_rows, first_lanes, PackedLinear, PanelSource, Tile, Weights, PANEL, VECS};
use amx::{amx_supported, BLOCK_ROWS, STEP_PAIRS};

/// Input features per `vdpbf16ps` lane: the bf16 layouts go in pairs.
pub(super) const PAIR: usize = 2;

/// One bf16 weight panel row: 2 consecutive input features for each of 64 output columns,
/// column by column (`[c * 2 + feature]`), the order `vdpbf16ps` multiplies them in.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(super) struct PairRow([u16; PAIR * PANEL]);

/// Whether this CPU runs the bf16 kernel ([`PackedLinear::new_bf16`]) and `RAG_MAX_ISA` allows it.
pub fn bf16_supported() -> bool {
    crate::encoder::cpu::has(crate::encoder::cpu::Feature::Avx512Bf16)
}

/// Pairs per row of `in_dim` input features, padded with zeros to whole AMX steps so that both
/// bf16 kernels read one layout.
fn padded_pairs(in_dim: usize) -> usize {
    in_dim.div_ceil(PAIR).next_multiple_of(STEP_PAIRS)
}

/// Weights packed for the bf16 kernels, and which of them runs.
pub(super) struct Bf16Weights {
    /// `[panel][padded_pairs(in_dim)]`, zero beyond `in_dim` and `out_dim`.
    pub(super) panels: Vec<PairRow>,
    /// AMX tiles, else `vdpbf16ps`.
    pub(super) amx: bool,
}

/// `v` rounded to the nearest bf16 (ties to even), as its bits.
fn bf16_bits(v: f32) -> u16 {
    half::bf16::from_f32(v).to_bits()
}

impl PackedLinear {
    /// Like [`Self::new`], with the weights rounded to bf16; each call rounds its input rows
    /// likewise. On AMX tiles where the CPU has them, else `vdpbf16ps`. Needs
    /// [`bf16_supported`].
    pub fn new_bf16(weight: &Tensor, bias: &Tensor) -> Result<Self> {
        Self::new_bf16_on(weight, bias, amx_supported())
    }

    /// [`Self::new_bf16`] on the kernel asked for (`amx` needs [`amx_supported`]).
    pub(super) fn new_bf16_on(weight: &Tensor, bias: &Tensor, amx: bool) -> Result<Self> {
        if !bf16_supported() || (amx && !amx_supported()) {
            bail!("bf16 projections need AVX-512 BF16, which this CPU lacks");
        }
        let (in_dim, weight, bias) = Self::load(weight, bias)?;
        let pairs = padded_pairs(in_dim);
        let mut panels = vec![PairRow([0; PAIR * PANEL]); bias.len() / PANEL * pairs];
        for (o, row) in weight.iter().enumerate() {
            let (panel, lane) = (o / PANEL, o % PANEL);
            for (i, &w) in row.iter().enumerate() {
                panels[panel * pairs + i / PAIR].0[lane * PAIR + i % PAIR] = bf16_bits(w);
            }
        }
        Ok(Self {
            in_dim,
            out_dim: weight.len(),
            weights: Weights::Bf16(Bf16Weights { panels, amx }),
            bias,
        })
    }
}

/// Input rows rounded to bf16 for the kernels: `[row][pair]`, each pair of features one `u32`
/// (the even feature in the low half), zero past `in_dim` and past the last row up to a whole
/// AMX block of rows.
pub(super) struct Bf16Rows {
    pub(super) pairs: Vec<u32>,
    /// Pairs per row, [`padded_pairs`].
    pub(super) stride: usize,
}

impl Bf16Rows {
    /// SAFETY: needs `bf16_supported()`.
    pub(super) unsafe fn new(xs: &[f32], in_dim: usize) -> Self {
        let stride = padded_pairs(in_dim);
        let rows = xs.len() / in_dim;
        let mut pairs = vec![0; rows.next_multiple_of(BLOCK_ROWS) * stride];
        // Nothing is kept per row.
        convert_rows(
            xs,
            in_dim,
            &mut pairs,
            stride,
            &mut vec![(); rows],
            |x, out, _| {
                // SAFETY: as for `new`; `out` holds at least `x.len()` rounded up to pairs.
                unsafe { convert_row(x, out) };
            },
        );
        Self { pairs, stride }
    }
}

/// Rounds `x` to bf16 pairs in `out` (`x.len()` rounded up to pairs).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn convert_row(x: &[f32], out: &mut [u32]) {
    use std::arch::x86_64::*;
    let out = out.as_mut_ptr().cast::<u16>();
    for first in (0..x.len()).step_by(32) {
        let n = x.len() - first;
        let low = _mm512_maskz_loadu_ps(first_lanes(n), x.as_ptr().add(first));
        let high_lanes = first_lanes(n.saturating_sub(16));
        let high = _mm512_maskz_loadu_ps(high_lanes, x.as_ptr().add(first + 16));
        // The first argument fills the upper 16 bf16 lanes.
        let bf16 = _mm512_cvtne2ps_pbh(high, low);
        // Whole pairs: an odd tail's partner is the zero the masked load gave.
        let pairs = n.min(32).div_ceil(PAIR);
        let mask = if pairs >= 16 { !0 } else { (1u16 << pairs) - 1 };
        let bits = std::mem::transmute::<__m512bh, __m512i>(bf16);
        _mm512_mask_storeu_epi32(out.add(first).cast(), mask, bits);
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn convert_row(_: &[f32], _: &mut [u32]) {
    unreachable!("bf16 projections are only built where bf16_supported() holds")
}

/// Pointers to a tile's bf16 inputs, all of their features.
pub(super) struct Bf16Source {
    pub(super) xs: *const u32,
    pub(super) stride: usize,
    /// The panel's first row.
    pub(super) weights: *const PairRow,
}

#[cfg(target_arch = "x86_64")]
impl PanelSource for Bf16Source {
    /// Stores the sums in f32, short of the bias.
    #[target_feature(enable = "avx512f,avx512bf16")]
    #[inline(never)]
    unsafe fn accumulate<const R: usize>(tile: &Tile<Self>) {
        use std::arch::x86_64::*;
        // The same 512 bits read as 32 bf16 values.
        use std::mem::transmute;
        let s = &tile.source;
        let mut acc = [[_mm512_setzero_ps(); VECS]; R];
        for pair in 0..s.stride {
            let w = s.weights.add(pair).cast::<__m512i>();
            let wv: [__m512bh; VECS] = [
                transmute::<__m512i, __m512bh>(_mm512_load_si512(w)),
                transmute::<__m512i, __m512bh>(_mm512_load_si512(w.add(1))),
                transmute::<__m512i, __m512bh>(_mm512_load_si512(w.add(2))),
                transmute::<__m512i, __m512bh>(_mm512_load_si512(w.add(3))),
            ];
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = *s.xs.add(r * s.stride + pair);
                let x = transmute::<__m512i, __m512bh>(_mm512_set1_epi32(x as i32));
                for (a, &w) in acc.iter_mut().zip(&wv) {
                    *a = _mm512_dpbf16_ps(*a, x, w);
                }
            }
        }
        tile.store(&acc);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{
        assert_elementwise_close, assert_rows_close, epilogue_cases, exact, random, ENCODER_SHAPES,
        SHAPES,
    };
    use super::*;
    use candle_core::Device;

    /// `x W^T + b` with `x` and `W` rounded to bf16 as the layer rounds them, the products and
    /// sums in f64.
    fn bf16_reference(x: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
        let round = |rows: Vec<Vec<f32>>| -> Vec<Vec<f64>> {
            rows.iter()
                .map(|r| {
                    r.iter()
                        .map(|&v| half::bf16::from_f32(v).to_f64())
                        .collect()
                })
                .collect()
        };
        let (x, w) = (
            round(x.to_vec2::<f32>().unwrap()),
            round(w.to_vec2::<f32>().unwrap()),
        );
        let b = b.to_vec1::<f32>().unwrap();
        let mut out = Vec::new();
        for row in &x {
            for (w, &b) in w.iter().zip(&b) {
                let dot: f64 = row.iter().zip(w).map(|(a, b)| a * b).sum();
                out.push((dot + f64::from(b)) as f32);
            }
        }
        Tensor::from_vec(out, (x.len(), b.len()), &Device::Cpu).unwrap()
    }

    /// Both bf16 kernels against the same rounding done in scalar code: they must agree to f32
    /// rounding, so a wrong pair layout, padding (odd widths: a pair's zero partner; rows short
    /// of an AMX block) or conversion shows.
    #[test]
    fn bf16_projection_matches_scalar_rounded_reference() {
        if !bf16_supported() {
            return crate::skip::skip(
                concat!(
                    module_path!(),
                    "::bf16_projection_matches_scalar_rounded_reference"
                ),
                "this CPU has no AVX-512 BF16; the bf16 GEMM is not used here",
            );
        }
        for (rows, in_dim, out_dim) in SHAPES {
            let x = random((rows, in_dim), rows as u64);
            let w = random((out_dim, in_dim), 7);
            let b = random((1, out_dim), 9).squeeze(0).unwrap();
            let linear = bf16_reference(&x, &w, &b);
            let residual = random((rows, out_dim), 11);
            for amx in kernels() {
                let packed = PackedLinear::new_bf16_on(&w, &b, amx).unwrap();
                let label = format!("{rows}x{in_dim}->{out_dim}, amx {amx}");
                for (ours, theirs) in epilogue_cases(&packed, &x, &linear, &residual) {
                    assert_elementwise_close(&ours, &theirs, &label);
                }
            }
        }
    }

    /// The bf16 kernels this CPU runs: `vdpbf16ps`, and AMX where it has it.
    fn kernels() -> Vec<bool> {
        if amx_supported() {
            vec![false, true]
        } else {
            eprintln!("note: this CPU has no AMX; only the vdpbf16ps kernel is tested");
            vec![false]
        }
    }

    /// What the rounding costs: on random data, each row of the bf16 projection pointing the
    /// same way as the f32 one's.
    #[test]
    fn bf16_projection_is_close_to_f32() {
        if !bf16_supported() {
            return crate::skip::skip(
                concat!(module_path!(), "::bf16_projection_is_close_to_f32"),
                "this CPU has no AVX-512 BF16; the bf16 GEMM is not used here",
            );
        }
        for (rows, in_dim, out_dim) in ENCODER_SHAPES {
            let x = random((rows, in_dim), 3);
            let w = random((out_dim, in_dim), 5);
            let b = random((1, out_dim), 6).squeeze(0).unwrap();
            let exact = exact(&x, &w, &b);
            for amx in kernels() {
                let packed = PackedLinear::new_bf16_on(&w, &b, amx).unwrap();
                let label = format!("{rows}x{in_dim}->{out_dim}, amx {amx}");
                assert_rows_close(&packed.forward(&x).unwrap(), &exact, 0.01, 0.9999, &label);
            }
        }
    }
}
