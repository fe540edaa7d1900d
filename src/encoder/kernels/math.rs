//! The approximations the kernels are built on: `exp`, `erf` and the exact GELU as branch-free
//! polynomials that the compiler vectorises, where libm's scalar calls do not. They are
//! accurate to a few float ulps of the exact functions (tested below), far inside what the
//! reference-vector tests allow.

/// Where `exp` stops being a normal f32: below it the approximations return exactly zero.
const EXP_MIN: f32 = -87.3;
/// ln 2 split in two so that x - n*ln2 stays exact.
const LN2_HI: f32 = 0.693_145_75;
const LN2_LO: f32 = 1.428_606_8e-6;
/// Taylor coefficients of `exp(r)` for r^6 down to r^2 (those of r and 1 are 1).
const EXP_POLY: [f32; 5] = [
    0.001_388_889,
    0.008_333_334,
    0.041_666_668,
    0.166_666_67,
    0.5,
];

/// `exp(x)` for f32 by range reduction to `r` in [-ln2/2, ln2/2] and a degree-6 polynomial.
#[inline(always)]
pub(super) fn exp_approx(x: f32) -> f32 {
    let x = x.clamp(EXP_MIN, 88.7);
    // Round to nearest by the 1.5 * 2^23 trick: `f32::round` is a libm call that stops the
    // loop from vectorising.
    const SHIFTER: f32 = 12_582_912.0;
    let n = (x * std::f32::consts::LOG2_E + SHIFTER) - SHIFTER;
    let r = x - n * LN2_HI - n * LN2_LO;
    let [c6, c5, c4, c3, c2] = EXP_POLY;
    let p = 1.0 + r * (1.0 + r * (c2 + r * (c3 + r * (c4 + r * (c5 + r * c6)))));
    let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
    // Below the clamp the true value is (nearly) zero; returning 2^-126-ish instead would seed
    // denormals downstream (masked attention scores in training), which slow every FMA that
    // touches them a hundredfold.
    if x <= EXP_MIN {
        0.0
    } else {
        p * scale
    }
}

/// Abramowitz & Stegun 7.1.26: `erf(x) = 1 - t (a1 + t (a2 + ..)) exp(-x^2)`, `t = 1/(1 + p x)`.
const ERF_P: f32 = 0.327_591_1;
/// a5 down to a1.
const ERF_POLY: [f32; 5] = [
    1.061_405_4,
    -1.453_152_1,
    1.421_413_8,
    -0.284_496_74,
    0.254_829_6,
];

/// `erf(x)` by Abramowitz & Stegun 7.1.26: |error| < 1.5e-7 in exact arithmetic.
#[inline(always)]
pub(super) fn erf_approx(x: f32) -> f32 {
    let sign = if x < 0.0 { -1.0 } else { 1.0 };
    let a = x.abs();
    let t = 1.0 / (1.0 + ERF_P * a);
    let [a5, a4, a3, a2, a1] = ERF_POLY;
    let poly = t * (a1 + t * (a2 + t * (a3 + t * (a4 + t * a5))));
    sign * (1.0 - poly * exp_approx(-a * a))
}

#[inline(always)]
pub(in crate::encoder) fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf_approx(x * std::f32::consts::FRAC_1_SQRT_2))
}

#[inline(always)]
pub(super) fn softmax_in_place(xs: &mut [f32]) {
    let max = xs.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
    // Kept apart from the sum so this loop has no loop-carried dependency and vectorises.
    for x in xs.iter_mut() {
        *x = exp_approx(*x - max);
    }
    let inv = 1.0 / xs.iter().sum::<f32>();
    xs.iter_mut().for_each(|x| *x *= inv);
}

/// The same approximations on AVX-512 vectors, for the kernels written in intrinsics.
#[cfg(target_arch = "x86_64")]
pub(super) mod vector {
    use super::{ERF_P, ERF_POLY, EXP_MIN, EXP_POLY, LN2_HI, LN2_LO};
    use std::arch::x86_64::*;

    /// [`super::gelu`] on a vector, with the same erf and exp approximations; the division in
    /// the erf is a reciprocal estimate refined by one Newton step (to about 23 bits).
    #[target_feature(enable = "avx512f")]
    pub(in crate::encoder) fn gelu_lanes(x: __m512) -> __m512 {
        let z = _mm512_mul_ps(x, _mm512_set1_ps(std::f32::consts::FRAC_1_SQRT_2));
        let a = _mm512_abs_ps(z);
        let d = _mm512_fmadd_ps(a, _mm512_set1_ps(ERF_P), _mm512_set1_ps(1.0));
        let t = _mm512_rcp14_ps(d);
        let t = _mm512_mul_ps(t, _mm512_fnmadd_ps(d, t, _mm512_set1_ps(2.0)));
        let [a5, a4, a3, a2, a1] = ERF_POLY;
        let mut poly = _mm512_set1_ps(a5);
        for c in [a4, a3, a2, a1] {
            poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(c));
        }
        poly = _mm512_mul_ps(poly, t);
        let gauss = exp_lanes(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), a), a), !0);
        let erf_abs = _mm512_fnmadd_ps(poly, gauss, _mm512_set1_ps(1.0));
        let sign = _mm512_and_si512(_mm512_castps_si512(z), _mm512_set1_epi32(i32::MIN));
        let erf = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(erf_abs), sign));
        let half = _mm512_mul_ps(x, _mm512_set1_ps(0.5));
        _mm512_fmadd_ps(half, erf, half)
    }

    /// [`super::exp_approx`] in the lanes of `live`, zero in the others. `#[inline]` so that
    /// the attention kernel's softmax, in another module, can still inline it.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(in crate::encoder::kernels) fn exp_lanes(x: __m512, live: __mmask16) -> __m512 {
        const NEAREST: i32 = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
        let n = _mm512_roundscale_ps::<NEAREST>(_mm512_mul_ps(
            x,
            _mm512_set1_ps(std::f32::consts::LOG2_E),
        ));
        let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HI), x);
        let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LO), r);
        let [c6, c5, c4, c3, c2] = EXP_POLY;
        let mut p = _mm512_set1_ps(c6);
        for c in [c5, c4, c3, c2, 1.0, 1.0] {
            p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
        }
        // Zero rather than a denormal below `EXP_MIN`, as in `exp_approx`.
        let live = _mm512_mask_cmp_ps_mask::<_CMP_GT_OQ>(live, x, _mm512_set1_ps(EXP_MIN));
        _mm512_maskz_scalef_ps(live, p, n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// The vector GELU of the GEMM epilogue against the scalar one (itself checked against
    /// libm above), far into both tails where exp underflows.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn vector_gelu_matches_scalar() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            return crate::skip::skip(
                concat!(module_path!(), "::vector_gelu_matches_scalar"),
                "no AVX-512 on this CPU",
            );
        }
        use super::vector::gelu_lanes;
        use std::arch::x86_64::*;
        let mut worst = 0f32;
        for block in (-30_000..30_000).step_by(16) {
            let xs: [f32; 16] = std::array::from_fn(|l| (block + l as i32) as f32 / 1000.0);
            let mut ys = [0f32; 16];
            // SAFETY: AVX-512 checked above; both arrays hold one vector.
            unsafe {
                let y = gelu_lanes(_mm512_loadu_ps(xs.as_ptr()));
                _mm512_storeu_ps(ys.as_mut_ptr(), y);
            }
            for (x, y) in xs.iter().zip(ys) {
                worst = worst.max((y - gelu(*x)).abs() / x.abs().max(1.0));
            }
        }
        assert!(worst < 1e-6, "vector GELU differs from scalar by {worst}");
    }

    /// The oracle: candle's scalar f64 erf, the one its own `gelu_erf` uses.
    fn libm_erf(x: f32) -> f32 {
        candle_core::cpu::erf::erf_f64(x as f64) as f32
    }
}
