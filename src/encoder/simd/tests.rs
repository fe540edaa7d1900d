//! Each backend's operations against their documented scalar meaning, tails and reductions
//! above all: on an AVX-512 machine this checks the AVX-512 implementation itself; elsewhere
//! the portable backends, which every kernel test also runs through, at its width.

use super::probe::{each, Probe};
use super::Simd;

/// 0..32 as floats, with the sign alternating and a few large values, so that sums, maxima and
/// masks show which lanes took part.
fn inputs() -> Vec<f32> {
    (0..32)
        .map(|i| {
            let x = (i as f32 + 1.0) * if i % 2 == 0 { 1.0 } else { -1.0 };
            if i % 7 == 3 {
                x * 1000.0
            } else {
                x
            }
        })
        .collect()
}

/// Every tail length: what `load_first` reads, what `store_first` writes (and leaves), and the
/// reductions of the loaded vector; each result against its scalar meaning, as failures.
struct Tails;

impl Probe for Tails {
    type Out = Vec<String>;
    unsafe fn run<S: Simd>(&self) -> Vec<String> {
        let xs = inputs();
        let mut failures = Vec::new();
        for n in 0..=S::LANES + 1 {
            // Loaded from the end of a buffer holding exactly `n` values (any further read
            // would show in a sanitiser, and here in the values of the lanes past `n`).
            let mut loaded = vec![0f32; S::LANES];
            S::store(loaded.as_mut_ptr(), S::load_first(xs[..n].as_ptr(), n));
            let want: Vec<f32> = (0..S::LANES)
                .map(|i| if i < n { xs[i] } else { 0.0 })
                .collect();
            if loaded != want {
                failures.push(format!("load_first {n}: {loaded:?}"));
            }
            let mut out = vec![-7f32; S::LANES + 2];
            S::store_first(out.as_mut_ptr(), n, S::load(xs.as_ptr()));
            let want: Vec<f32> = (0..S::LANES + 2)
                .map(|i| if i < n.min(S::LANES) { xs[i] } else { -7.0 })
                .collect();
            if out != want {
                failures.push(format!("store_first {n}: {out:?}"));
            }
        }
        let v = S::load(xs.as_ptr());
        let lanes = &xs[..S::LANES];
        let sum: f32 = lanes.iter().sum();
        if (S::reduce_add(v) - sum).abs() > 1e-3 {
            failures.push(format!("reduce_add {} != {sum}", S::reduce_add(v)));
        }
        let max = lanes.iter().copied().fold(f32::MIN, f32::max);
        if S::reduce_max(v) != max {
            failures.push(format!("reduce_max {} != {max}", S::reduce_max(v)));
        }
        failures
    }
}

/// The arithmetic, lane by lane, on values that exercise signs, rounding ties and the range
/// `exp` uses.
struct Arithmetic;

impl Probe for Arithmetic {
    type Out = Vec<String>;
    unsafe fn run<S: Simd>(&self) -> Vec<String> {
        let a: Vec<f32> = (0..S::LANES).map(|i| i as f32 * 0.75 - 5.5).collect();
        let b: Vec<f32> = (0..S::LANES).map(|i| 3.25 - i as f32 * 0.5).collect();
        let (va, vb) = (S::load(a.as_ptr()), S::load(b.as_ptr()));
        let get = |v: S::V| {
            let mut out = vec![0f32; S::LANES];
            S::store(out.as_mut_ptr(), v);
            out
        };
        let mut failures = Vec::new();
        let mut check = |name: &str, got: Vec<f32>, want: &dyn Fn(f32, f32) -> f32, tol: f32| {
            for (i, g) in got.iter().enumerate() {
                let w = want(a[i], b[i]);
                if (g - w).abs() > tol * w.abs().max(1.0) {
                    failures.push(format!("{name} lane {i}: {g} != {w}"));
                }
            }
        };
        check("add", get(S::add(va, vb)), &|a, b| a + b, 0.0);
        check("sub", get(S::sub(va, vb)), &|a, b| a - b, 0.0);
        check("mul", get(S::mul(va, vb)), &|a, b| a * b, 0.0);
        check("max", get(S::max(va, vb)), &|a, b| a.max(b), 0.0);
        check("min", get(S::min(va, vb)), &|a, b| a.min(b), 0.0);
        check(
            "fmadd",
            get(S::fmadd(va, vb, va)),
            &|a, b| a.mul_add(b, a),
            0.0,
        );
        check(
            "fnmadd",
            get(S::fnmadd(va, vb, va)),
            &|a, b| (-a).mul_add(b, a),
            0.0,
        );
        check("recip", get(S::recip(vb)), &|_, b| 1.0 / b, 1e-6);
        check("round", get(S::round(va)), &|a, _| a.round_ties_even(), 0.0);
        let n = S::round(vb);
        check(
            "scale_pow2",
            get(S::scale_pow2(va, n)),
            &|a, b| a * 2f32.powi(b.round_ties_even() as i32),
            0.0,
        );
        check(
            "zero_unless_above",
            get(S::zero_unless_above(va, vb, 0.5)),
            &|a, b| if b > 0.5 { a } else { 0.0 },
            0.0,
        );
        check("splat", get(S::splat(2.5)), &|_, _| 2.5, 0.0);
        check("zero", get(S::zero()), &|_, _| 0.0, 0.0);
        failures
    }
}

#[test]
fn every_backend_loads_stores_and_reduces_its_tails_exactly() {
    for (isa, failures) in each(&Tails) {
        assert!(failures.is_empty(), "{isa:?}: {failures:#?}");
    }
}

#[test]
fn every_backend_computes_lane_by_lane() {
    for (isa, failures) in each(&Arithmetic) {
        assert!(failures.is_empty(), "{isa:?}: {failures:#?}");
    }
}

/// The register transpose: lane `j` of row `i` becomes lane `i` of row `j`, every lane.
struct Transpose;

impl Probe for Transpose {
    type Out = Vec<String>;
    unsafe fn run<S: Simd>(&self) -> Vec<String> {
        let n = S::LANES;
        let values: Vec<f32> = (0..n * n).map(|i| i as f32).collect();
        let mut rows: Vec<S::V> = (0..n).map(|i| S::load(values[i * n..].as_ptr())).collect();
        S::transpose(&mut rows);
        let mut out = vec![0f32; n * n];
        for (i, &row) in rows.iter().enumerate() {
            S::store(out[i * n..].as_mut_ptr(), row);
        }
        (0..n * n)
            .filter(|&k| out[k] != values[k % n * n + k / n])
            .map(|k| format!("lane {} of row {}: {}", k % n, k / n, out[k]))
            .collect()
    }
}

#[test]
fn transpose_swaps_rows_and_lanes_on_every_backend() {
    for (isa, failures) in each(&Transpose) {
        assert!(failures.is_empty(), "{isa:?}: {failures:?}");
    }
}
