use super::*;
use candle_core::Device;

pub(super) fn random(shape: (usize, usize), seed: u64) -> Tensor {
    let mut rng = crate::rng::Rng::new(seed);
    let data: Vec<f32> = (0..shape.0 * shape.1)
        .map(|_| (rng.next_u64() % 2001) as f32 / 1000.0 - 1.0)
        .collect();
    Tensor::from_vec(data, shape, &Device::Cpu).unwrap()
}

/// `x W^T + b` by candle.
pub(super) fn exact(x: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
    x.matmul(&w.t().unwrap()).unwrap().broadcast_add(b).unwrap()
}

/// Shapes for the reduced-precision kernels' exactness tests: every tile height, both
/// schedules, inputs not a multiple of 4 (or 2) wide, a last panel narrower than a vector,
/// and a feed-forward-wide input.
pub(super) const SHAPES: [(usize, usize, usize); 6] = [
    (1, 7, 5),
    (5, 33, 70),
    (13, 64, 64),
    (250, 96, 136),
    (601, 41, 200),
    (37, 1536, 70),
];

/// Shapes of the encoder's projections, for what a precision costs against f32.
pub(super) const ENCODER_SHAPES: [(usize, usize, usize); 3] =
    [(64, 384, 384), (30, 1536, 384), (7, 384, 1536)];

/// Every element of `ours` within 1e-4 of `theirs` (relatively, above 1): the same
/// arithmetic up to f32 rounding.
pub(super) fn assert_elementwise_close(ours: &Tensor, theirs: &Tensor, label: &str) {
    assert_eq!(ours.dims(), theirs.dims());
    let ours = ours.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let theirs = theirs.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert!(
            (a - b).abs() <= 1e-4 * b.abs().max(1.0),
            "{label}: element {i} is {a}, expected {b}"
        );
    }
}

/// `ours` against the exact projection: off by less than `share` of its largest output,
/// each row's cosine at least `min_cosine`.
pub(super) fn assert_rows_close(
    ours: &Tensor,
    exact: &Tensor,
    share: f32,
    min_cosine: f32,
    label: &str,
) {
    let largest = exact.abs().unwrap().max_all().unwrap();
    let largest = largest.to_scalar::<f32>().unwrap();
    let diff = kernels::tests::max_abs_diff(ours, exact);
    assert!(diff < share * largest, "{label}: max diff {diff}");
    let ours = ours.to_vec2::<f32>().unwrap();
    for (r, (a, b)) in ours.iter().zip(exact.to_vec2::<f32>().unwrap()).enumerate() {
        let cosine = crate::vectors::cosine(a, &b);
        assert!(cosine >= min_cosine, "{label}: row {r} cosine {cosine}");
    }
}

/// `packed`'s three forwards on `x`, each beside what it should give when `linear` is its
/// plain projection of `x`.
pub(super) fn epilogue_cases(
    packed: &PackedLinear,
    x: &Tensor,
    linear: &Tensor,
    residual: &Tensor,
) -> [(Tensor, Tensor); 3] {
    [
        (packed.forward(x).unwrap(), linear.clone()),
        (packed.forward_gelu(x).unwrap(), linear.gelu_erf().unwrap()),
        (
            packed.forward_residual(x, residual).unwrap(),
            (linear + residual).unwrap(),
        ),
    ]
}

/// Every row converted once, with its own row of the output and its own per-row entry, on
/// one thread and on all (above the threshold); output rows past the input's untouched.
#[test]
fn convert_rows_pairs_each_row_with_its_output_and_entry() {
    for rows in [3, CONVERT_PARALLEL_VALUES / 10 + 5] {
        let (in_dim, stride) = (10, 12);
        let xs: Vec<f32> = (0..rows * in_dim).map(|i| (i / in_dim) as f32).collect();
        let mut out = vec![-1.0f32; (rows + 2) * stride];
        let mut sums = vec![0.0f32; rows];
        convert_rows(&xs, in_dim, &mut out, stride, &mut sums, |x, o, sum| {
            o[..x.len()].copy_from_slice(x);
            *sum = x.iter().sum();
        });
        for r in 0..rows {
            let row = &out[r * stride..(r + 1) * stride];
            assert!(
                row[..in_dim].iter().all(|&v| v == r as f32),
                "{rows}: row {r}"
            );
            assert!(row[in_dim..].iter().all(|&v| v == -1.0), "{rows}: row {r}");
            assert_eq!(sums[r], (r * in_dim) as f32, "{rows}: row {r}");
        }
        assert!(out[rows * stride..].iter().all(|&v| v == -1.0), "{rows}");
    }
}

#[test]
fn wrong_input_width_is_an_error() {
    if !supported() {
        return crate::skip::skip(
            concat!(module_path!(), "::wrong_input_width_is_an_error"),
            "this CPU has neither AVX-512 nor AVX2 with FMA",
        );
    }
    let packed =
        PackedLinear::new(&random((8, 4), 1), &random((1, 8), 2).squeeze(0).unwrap()).unwrap();
    assert!(packed.forward(&random((3, 5), 3)).is_err());
}
