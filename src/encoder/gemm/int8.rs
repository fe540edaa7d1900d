//! The int8 kernel family, where the CPU has AVX-512 VNNI: one `vpdpbusd` does 64 multiply-adds
//! where an FMA does 16, and the weights take a quarter of the memory. Weights are quantized
//! per output column at load, activations per row at each call (both symmetric), and the
//! integer sums are scaled back to f32 before the same epilogues as the f32 kernel's. Where the
//! CPU has AVX2 but not VNNI, [`super::int8_avx2`] runs the same layouts and quantization.

use candle_core::{bail, Result, Tensor};

use super::{convert_rows, first_lanes, int8_avx2, PackedLinear, PanelSource, Tile, Weights};
use super::{PANEL, VECS};

/// Input features per `vpdpbusd` lane: the int8 layouts go in groups of this many.
pub(super) const QUAD: usize = 4;
/// The widest int8 input: its sums of up to 255 x 127 per feature still fit an i32, so the
/// int8 kernel needs no depth blocks.
const MAX_INT8_IN: usize = 4096;

/// One int8 weight panel row: 4 consecutive input features for each of 64 output columns,
/// column by column (`[c * 4 + feature]`), the order `vpdpbusd` multiplies them in.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(super) struct QuadRow([i8; QUAD * PANEL]);

/// The int8 kernels, by the instructions they need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Int8Kernel {
    /// AVX-512 F, BW and VNNI: `vpdpbusd`.
    Vnni,
    /// AVX2 and FMA: `vpmaddubsw` and `vpmaddwd` ([`super::int8_avx2`]).
    Avx2,
}

impl Int8Kernel {
    /// Whether this CPU has the instructions of this kernel (and `RAG_MAX_ISA` allows them).
    pub(super) fn runs_here(self) -> bool {
        use crate::encoder::cpu::{has, Feature};
        match self {
            Self::Vnni => has(Feature::Avx512Vnni),
            Self::Avx2 => has(Feature::Avx2Fma),
        }
    }

    /// The fastest int8 kernel this CPU runs, if any.
    pub(super) fn best() -> Option<Self> {
        [Self::Vnni, Self::Avx2].into_iter().find(|k| k.runs_here())
    }
}

/// Whether this CPU's int8 kernel was measured faster than f32 on its kind of CPU (see
/// [`super::Precision::fastest_available`]): VNNI (about 2x), and the AVX2 kernel wherever a
/// 256-bit integer multiply runs at full width (1.31x on a Zen 3); not on the CPUs that split
/// 256-bit operations in two, where it measured no faster.
pub(super) fn int8_outpaces_f32() -> bool {
    match Int8Kernel::best() {
        Some(Int8Kernel::Vnni) => true,
        Some(Int8Kernel::Avx2) => !int8_avx2::splits_256_bit_ops(),
        None => false,
    }
}

/// Whether this CPU runs an int8 kernel ([`PackedLinear::new_int8`]).
pub fn int8_supported() -> bool {
    Int8Kernel::best().is_some()
}

/// The symmetric int8 scale of values whose largest magnitude is `max_abs`, and its inverse,
/// which quantizes (`round(v * inverse)`); both zero for all-zero values, which then quantize
/// to zero and scale back to zero.
pub(super) fn int8_scales(max_abs: f32) -> (f32, f32) {
    if max_abs > 0.0 {
        (max_abs / 127.0, 127.0 / max_abs)
    } else {
        (0.0, 0.0)
    }
}

pub(super) struct Int8Weights {
    /// `[panel][in_dim / 4, rounded up]`, zero beyond `in_dim` and `out_dim`.
    pub(super) panels: Vec<QuadRow>,
    /// Per output column, zero beyond `out_dim`.
    pub(super) scales: Vec<f32>,
    /// Per output column, the sum of its quantized weights: the activations go to the kernel
    /// offset by 128 (`vpdpbusd` takes them unsigned), which adds 128 times this to the sums.
    pub(super) col_sums: Vec<i32>,
    /// The kernel that runs them, chosen at load.
    pub(super) kernel: Int8Kernel,
}

impl PackedLinear {
    /// Like [`Self::new`], with the weights quantized to int8 per output column; each call
    /// quantizes its input rows likewise. Needs [`int8_supported`] and `in <= 4096`.
    pub fn new_int8(weight: &Tensor, bias: &Tensor) -> Result<Self> {
        match Int8Kernel::best() {
            Some(kernel) => Self::new_int8_on(weight, bias, kernel),
            None => {
                bail!("int8 projections need AVX-512 VNNI or AVX2 with FMA; this CPU has neither")
            }
        }
    }

    /// [`Self::new_int8`] for `kernel`, which must run here: tests pick each one in turn.
    pub(super) fn new_int8_on(weight: &Tensor, bias: &Tensor, kernel: Int8Kernel) -> Result<Self> {
        if !kernel.runs_here() {
            bail!("the {kernel:?} int8 kernel does not run on this CPU");
        }
        let (in_dim, weight, bias) = Self::load(weight, bias)?;
        if in_dim > MAX_INT8_IN {
            bail!("int8 projections take at most {MAX_INT8_IN} features, not {in_dim}");
        }
        let quads = in_dim.div_ceil(QUAD);
        let mut panels = vec![QuadRow([0; QUAD * PANEL]); bias.len() / PANEL * quads];
        let mut scales = vec![0.0; bias.len()];
        let mut col_sums = vec![0; bias.len()];
        for (o, row) in weight.iter().enumerate() {
            let (panel, lane) = (o / PANEL, o % PANEL);
            let (scale, inverse) = int8_scales(row.iter().fold(0.0, |m, w| w.abs().max(m)));
            scales[o] = scale;
            for (i, &w) in row.iter().enumerate() {
                let q = (w * inverse).round_ties_even().clamp(-127.0, 127.0) as i8;
                panels[panel * quads + i / QUAD].0[lane * QUAD + i % QUAD] = q;
                col_sums[o] += i32::from(q);
            }
        }
        Ok(Self {
            in_dim,
            out_dim: weight.len(),
            weights: Weights::Int8(Int8Weights {
                panels,
                scales,
                col_sums,
                kernel,
            }),
            bias,
        })
    }
}

/// Input rows quantized for the int8 kernel.
pub(super) struct Int8Rows {
    /// `[row][stride]`, in the kernel's form. VNNI: each value `q + 128` for its quantized `q`
    /// in `-127..=127`, since `vpdpbusd` takes this side unsigned; the padding is 128 (zero).
    /// AVX2: each quad's four `|q|` then its four `q` ([`int8_avx2::quantize_row`]); the
    /// padding is zero.
    pub(super) bytes: Vec<u8>,
    /// Bytes per row: `in_dim` rounded up to whole quads (twice that on AVX2), so that each
    /// quad is one aligned 4-byte broadcast.
    pub(super) stride: usize,
    /// Per row.
    pub(super) scales: Vec<f32>,
}

impl Int8Rows {
    /// SAFETY: needs `kernel.runs_here()`.
    pub(super) unsafe fn new(xs: &[f32], in_dim: usize, kernel: Int8Kernel) -> Self {
        let (stride, zero) = match kernel {
            Int8Kernel::Vnni => (in_dim.next_multiple_of(QUAD), 128),
            Int8Kernel::Avx2 => (2 * in_dim.next_multiple_of(QUAD), 0),
        };
        let rows = xs.len() / in_dim;
        let mut bytes = vec![zero; rows * stride];
        let mut scales = vec![0.0; rows];
        convert_rows(
            xs,
            in_dim,
            &mut bytes,
            stride,
            &mut scales,
            |x, q, scale| {
                // SAFETY: as for `new`; `q` is a row of the kernel's form.
                *scale = unsafe {
                    match kernel {
                        Int8Kernel::Vnni => quantize_row(x, q),
                        Int8Kernel::Avx2 => int8_avx2::quantize_row(x, q),
                    }
                };
            },
        );
        Self {
            bytes,
            stride,
            scales,
        }
    }
}

/// Quantizes `x` into the first `x.len()` bytes of `q` (see [`Int8Rows::bytes`]); returns the
/// scale.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn quantize_row(x: &[f32], q: &mut [u8]) -> f32 {
    use std::arch::x86_64::*;
    let load =
        |first: usize, n: usize| _mm512_maskz_loadu_ps(first_lanes(n), x.as_ptr().add(first));
    // The largest magnitude as the largest sign-cleared bit pattern: an integer max takes one
    // cycle where a float max takes four, and one running max is then no bottleneck.
    let mut max = _mm512_setzero_si512();
    let mut fold = |first, n| {
        let bits = _mm512_castps_si512(load(first, n));
        max = _mm512_max_epu32(max, _mm512_and_si512(bits, _mm512_set1_epi32(i32::MAX)));
    };
    let whole = x.len() / 16 * 16;
    (0..whole).step_by(16).for_each(|first| fold(first, 16));
    fold(whole, x.len() - whole);
    let (scale, inverse) = int8_scales(f32::from_bits(_mm512_reduce_max_epu32(max)));
    let inverse = _mm512_set1_ps(inverse);
    // Saturating packs narrow four vectors to bytes in fewer instructions than four `vpmovdb`
    // (the conversion and narrowing were most of this pass's time); they interleave the four
    // by 128-bit lane, which this permutation undoes. Finite values are within -127..=127
    // already; the packs keep anything else (a NaN) in byte range.
    let order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    let q = q.as_mut_ptr();
    let narrow = |first: usize, n: usize| {
        let v: [__m512i; 4] = std::array::from_fn(|k| {
            const NEAREST: i32 = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
            let v = load(first + 16 * k, n.saturating_sub(16 * k));
            _mm512_cvt_roundps_epi32::<NEAREST>(_mm512_mul_ps(v, inverse))
        });
        let bytes = _mm512_packs_epi16(
            _mm512_packs_epi32(v[0], v[1]),
            _mm512_packs_epi32(v[2], v[3]),
        );
        let bytes = _mm512_xor_si512(
            _mm512_permutexvar_epi32(order, bytes),
            _mm512_set1_epi8(i8::MIN),
        );
        let mask = if n >= 64 { !0 } else { (1 << n) - 1 };
        _mm512_mask_storeu_epi8(q.add(first).cast(), mask, bytes);
    };
    let whole = x.len() / 64 * 64;
    (0..whole).step_by(64).for_each(|first| narrow(first, 64));
    if whole < x.len() {
        narrow(whole, x.len() - whole);
    }
    scale
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn quantize_row(_: &[f32], _: &mut [u8]) -> f32 {
    unreachable!("int8 projections are only built where int8_supported() holds")
}

/// Pointers to a tile's int8 inputs, all of their features.
pub(super) struct Int8Source {
    pub(super) xs: *const u8,
    pub(super) stride: usize,
    /// The tile's first row's.
    pub(super) x_scales: *const f32,
    /// The panel's first row.
    pub(super) weights: *const QuadRow,
    pub(super) quads: usize,
    /// The panel's first column's.
    pub(super) w_scales: *const f32,
    pub(super) col_sums: *const i32,
}

#[cfg(target_arch = "x86_64")]
impl PanelSource for Int8Source {
    /// Stores `s_x * s_w * (sum - 128 * col_sum)`: the sums in f32, short of the bias.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[inline(never)]
    unsafe fn accumulate<const R: usize>(tile: &Tile<Self>) {
        use std::arch::x86_64::*;
        let s = &tile.source;
        let mut acc = [[_mm512_setzero_si512(); VECS]; R];
        for quad in 0..s.quads {
            let w = s.weights.add(quad).cast::<__m512i>();
            let wv = [
                _mm512_load_si512(w),
                _mm512_load_si512(w.add(1)),
                _mm512_load_si512(w.add(2)),
                _mm512_load_si512(w.add(3)),
            ];
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = s.xs.add(r * s.stride + quad * QUAD).cast::<i32>();
                let x = _mm512_set1_epi32(x.read_unaligned());
                for (a, &w) in acc.iter_mut().zip(&wv) {
                    *a = _mm512_dpbusd_epi32(*a, x, w);
                }
            }
        }
        for v in 0..VECS {
            let offset = _mm512_slli_epi32::<7>(_mm512_loadu_si512(s.col_sums.add(v * 16).cast()));
            let w_scale = _mm512_loadu_ps(s.w_scales.add(v * 16));
            for (r, acc) in acc.iter().enumerate() {
                let scale = _mm512_mul_ps(_mm512_set1_ps(*s.x_scales.add(r)), w_scale);
                let sum = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[v], offset));
                tile.store_vector(r, v, _mm512_mul_ps(sum, scale));
            }
        }
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

    /// `x W^T + b` computed the int8 way in plain scalar code: `x`'s rows and `W`'s rows
    /// quantized as the layer does, then exact integer dot products (no zero-point offset).
    fn int8_reference(x: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
        fn quantize(values: &[f32]) -> (f64, Vec<i64>) {
            let max = values.iter().fold(0f32, |m, v| m.max(v.abs()));
            let inverse = if max > 0.0 { 127.0 / max } else { 0.0 };
            let q = values
                .iter()
                .map(|v| (v * inverse).round_ties_even().clamp(-127.0, 127.0) as i64);
            (f64::from(max / 127.0), q.collect())
        }
        let w: Vec<_> = w
            .to_vec2::<f32>()
            .unwrap()
            .iter()
            .map(|r| quantize(r))
            .collect();
        let b = b.to_vec1::<f32>().unwrap();
        let x = x.to_vec2::<f32>().unwrap();
        let mut out = Vec::new();
        for row in &x {
            let (x_scale, qx) = quantize(row);
            for ((w_scale, qw), &b) in w.iter().zip(&b) {
                let dot: i64 = qx.iter().zip(qw).map(|(a, b)| a * b).sum();
                out.push((x_scale * w_scale * dot as f64 + f64::from(b)) as f32);
            }
        }
        Tensor::from_vec(out, (x.len(), b.len()), &Device::Cpu).unwrap()
    }

    /// Every int8 kernel this CPU runs (an AVX-512 VNNI machine tests the AVX2 one too), or
    /// `None` after saying the test is skipped.
    fn kernels_here(test: &str) -> Option<Vec<Int8Kernel>> {
        let kernels: Vec<_> = [Int8Kernel::Vnni, Int8Kernel::Avx2]
            .into_iter()
            .filter(|k| k.runs_here())
            .collect();
        if kernels.is_empty() {
            crate::skip::skip(
                test,
                "this CPU has neither AVX-512 VNNI nor AVX2; no int8 GEMM",
            );
            return None;
        }
        Some(kernels)
    }

    /// The int8 path against the same quantization done in scalar code: it must agree to
    /// rounding, so a wrong panel layout, padding or zero-point correction shows; with an
    /// all-zero input row and an all-zero weight row.
    #[test]
    fn int8_projection_matches_scalar_quantized_reference() {
        let test = concat!(
            module_path!(),
            "::int8_projection_matches_scalar_quantized_reference"
        );
        for kernel in kernels_here(test).unwrap_or_default() {
            matches_scalar_quantized_reference(kernel);
        }
    }

    fn matches_scalar_quantized_reference(kernel: Int8Kernel) {
        for (rows, in_dim, out_dim) in SHAPES {
            let mut x = random((rows, in_dim), rows as u64);
            if rows > 1 {
                let zeros = Tensor::zeros((1, in_dim), candle_core::DType::F32, &Device::Cpu);
                x = x.slice_assign(&[1..2, 0..in_dim], &zeros.unwrap()).unwrap();
            }
            let zeros = Tensor::zeros((1, in_dim), candle_core::DType::F32, &Device::Cpu);
            let w = random((out_dim, in_dim), 7)
                .slice_assign(&[2..3, 0..in_dim], &zeros.unwrap())
                .unwrap();
            let b = random((1, out_dim), 9).squeeze(0).unwrap();
            let packed = PackedLinear::new_int8_on(&w, &b, kernel).unwrap();
            let linear = int8_reference(&x, &w, &b);
            let residual = random((rows, out_dim), 11);
            for (ours, theirs) in epilogue_cases(&packed, &x, &linear, &residual) {
                let label = format!("{kernel:?} {rows}x{in_dim}->{out_dim}");
                assert_elementwise_close(&ours, &theirs, &label);
            }
        }
    }

    /// Inputs and weights all at the ends of the int8 range (every level +-127) with matching
    /// signs, so that every product is 127 x 127: the largest sums any kernel sees, where one
    /// that saturated an intermediate (the AVX2 kernel's i16 pair sums) would come out short.
    #[test]
    fn int8_sums_at_full_range_are_exact() {
        let test = concat!(module_path!(), "::int8_sums_at_full_range_are_exact");
        let (rows, in_dim, out_dim) = (7, 301, 70);
        let sign = |i: usize| {
            if (i * 7 + i / 3) % 5 < 2 {
                -1.0f32
            } else {
                1.0
            }
        };
        let x: Vec<f32> = (0..rows * in_dim)
            .map(|k| sign(k % in_dim) * if k / in_dim % 2 == 0 { 1.0 } else { -0.5 })
            .collect();
        let w: Vec<f32> = (0..out_dim * in_dim)
            .map(|k| sign(k % in_dim) * if k / in_dim % 3 == 0 { -2.0 } else { 2.0 })
            .collect();
        let x = Tensor::from_vec(x, (rows, in_dim), &Device::Cpu).unwrap();
        let w = Tensor::from_vec(w, (out_dim, in_dim), &Device::Cpu).unwrap();
        let b = random((1, out_dim), 9).squeeze(0).unwrap();
        let linear = int8_reference(&x, &w, &b);
        for kernel in kernels_here(test).unwrap_or_default() {
            let packed = PackedLinear::new_int8_on(&w, &b, kernel).unwrap();
            let label = format!("{kernel:?} at full range");
            assert_elementwise_close(&packed.forward(&x).unwrap(), &linear, &label);
        }
    }

    /// What the quantization costs: on random data, the int8 projection within 2% of the
    /// largest output of the f32 one, each row pointing the same way.
    #[test]
    fn int8_projection_is_close_to_f32() {
        let test = concat!(module_path!(), "::int8_projection_is_close_to_f32");
        for kernel in kernels_here(test).unwrap_or_default() {
            for (rows, in_dim, out_dim) in ENCODER_SHAPES {
                let x = random((rows, in_dim), 3);
                let w = random((out_dim, in_dim), 5);
                let b = random((1, out_dim), 6).squeeze(0).unwrap();
                let packed = PackedLinear::new_int8_on(&w, &b, kernel).unwrap();
                let label = format!("{kernel:?} {rows}x{in_dim}->{out_dim}");
                assert_rows_close(
                    &packed.forward(&x).unwrap(),
                    &exact(&x, &w, &b),
                    0.02,
                    0.999,
                    &label,
                );
            }
        }
    }

    #[test]
    fn int8_inputs_too_wide_for_i32_sums_are_an_error() {
        if !int8_supported() {
            return crate::skip::skip(
                concat!(
                    module_path!(),
                    "::int8_inputs_too_wide_for_i32_sums_are_an_error"
                ),
                "this CPU has no int8 GEMM",
            );
        }
        let b = random((1, 8), 2).squeeze(0).unwrap();
        assert!(PackedLinear::new_int8(&random((8, MAX_INT8_IN), 1), &b).is_ok());
        assert!(PackedLinear::new_int8(&random((8, MAX_INT8_IN + 1), 1), &b).is_err());
    }
}
