//! The losses `rag train` minimises: `angle`, AnglE on one batch of embeddings, and
//! `objective`, the ESE objective and the baselines that apply it across layers and sizes.

mod angle;
mod objective;

pub use angle::{angle_term, contrastive, cosine_term, AngleLoss, AngleParts, Layout};
pub use objective::{
    align, embedding_distillation, kl_divergence, layer_weight, matryoshka_dims,
    similarity_distillation, LossValue, Method, Objective, Sample,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::compression::pca_target;
    use candle_core::{Device, Result, Tensor};

    /// A tensor from nested rows.
    fn tensor_from_rows(rows: &[Vec<f32>], device: &Device) -> Result<Tensor> {
        let cols = rows.first().map_or(0, Vec::len);
        let flat: Vec<f32> = rows.iter().flatten().copied().collect();
        Tensor::from_vec(flat, (rows.len(), cols), device)
    }

    pub(super) fn t(rows: &[&[f32]]) -> Tensor {
        let rows: Vec<Vec<f32>> = rows.iter().map(|r| r.to_vec()).collect();
        tensor_from_rows(&rows, &Device::Cpu).unwrap()
    }

    pub(super) fn scalar(x: &Tensor) -> f64 {
        x.to_scalar::<f32>().unwrap() as f64
    }

    #[derive(serde::Deserialize)]
    struct Fixture {
        angle_triplet: Vec<TripletCase>,
        angle_pairs: Vec<PairCase>,
        align: Vec<AlignCase>,
        pca: Vec<PcaCase>,
        ese: Vec<EseCase>,
        mrl: Vec<MrlCase>,
    }
    #[derive(serde::Deserialize)]
    struct TripletCase {
        query: Vec<Vec<f32>>,
        positive: Vec<Vec<f32>>,
        negative: Vec<Vec<f32>>,
        ibn: f64,
        cln: f64,
        angle: f64,
        cosine: f64,
        total: f64,
        #[serde(default)]
        grad_query: Option<Vec<Vec<f32>>>,
    }
    #[derive(serde::Deserialize)]
    struct PairCase {
        query: Vec<Vec<f32>>,
        positive: Vec<Vec<f32>>,
        total: f64,
    }
    #[derive(serde::Deserialize)]
    struct AlignCase {
        x: Vec<Vec<f32>>,
        y: Vec<Vec<f32>>,
        temperature: f64,
        total: f64,
    }
    #[derive(serde::Deserialize)]
    struct PcaCase {
        x: Vec<Vec<f32>>,
        k: usize,
        target: Vec<Vec<f32>>,
    }
    #[derive(serde::Deserialize)]
    struct Blocks {
        query: Vec<Vec<f32>>,
        positive: Vec<Vec<f32>>,
        negative: Vec<Vec<f32>>,
    }
    #[derive(serde::Deserialize)]
    struct EseCase {
        layers: Vec<Blocks>,
        compression_size: usize,
        total: f64,
    }
    #[derive(serde::Deserialize)]
    struct MrlCase {
        #[serde(flatten)]
        blocks: Blocks,
        dims: Vec<usize>,
        total: f64,
    }

    fn rows(r: &[Vec<f32>]) -> Tensor {
        tensor_from_rows(r, &Device::Cpu).unwrap()
    }

    fn stacked(b: &Blocks) -> Tensor {
        Tensor::cat(&[rows(&b.query), rows(&b.positive), rows(&b.negative)], 0).unwrap()
    }

    fn close(got: f64, expected: f64, what: &str) {
        assert!(
            (got - expected).abs() <= 1e-4 * expected.abs().max(1.0),
            "{what}: rag {got} vs angle_emb {expected}"
        );
    }

    /// Values computed by PyTorch with angle_emb 0.6's own functions
    /// (eval/reference/make_loss_fixtures.py).
    #[test]
    fn losses_match_the_pytorch_reference() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/loss_reference.json"
        );
        let fixture: Fixture = crate::files::read_json(std::path::Path::new(path)).unwrap();
        let angle = AngleLoss::default();
        for (i, case) in fixture.angle_triplet.iter().enumerate() {
            let q = candle_core::Var::from_tensor(&rows(&case.query)).unwrap();
            let x = Tensor::cat(
                &[q.as_tensor(), &rows(&case.positive), &rows(&case.negative)],
                0,
            )
            .unwrap();
            let parts = angle.parts(&x, &Layout::Triplets).unwrap();
            close(scalar(&parts.ibn), case.ibn, &format!("triplet {i} ibn"));
            close(
                scalar(parts.cln.as_ref().unwrap()),
                case.cln,
                &format!("triplet {i} cln"),
            );
            close(
                scalar(&parts.angle),
                case.angle,
                &format!("triplet {i} angle"),
            );
            close(
                scalar(&parts.cosine),
                case.cosine,
                &format!("triplet {i} cosine"),
            );
            let total = angle.forward(&x, &Layout::Triplets).unwrap();
            close(scalar(&total), case.total, &format!("triplet {i} total"));
            if let Some(expected) = &case.grad_query {
                let grads = total.backward().unwrap();
                let got = grads.get(q.as_tensor()).unwrap().to_vec2::<f32>().unwrap();
                for (g, e) in got.iter().flatten().zip(expected.iter().flatten()) {
                    assert!(
                        (g - e).abs() < 1e-4 * e.abs().max(1.0),
                        "gradient {g} vs {e}"
                    );
                }
            }
        }
        for (i, case) in fixture.angle_pairs.iter().enumerate() {
            let x = Tensor::cat(&[rows(&case.query), rows(&case.positive)], 0).unwrap();
            close(
                scalar(&angle.forward(&x, &Layout::Pairs).unwrap()),
                case.total,
                &format!("pairs {i}"),
            );
        }
        for (i, case) in fixture.align.iter().enumerate() {
            let got = align(&rows(&case.x), &rows(&case.y), case.temperature).unwrap();
            close(scalar(&got), case.total, &format!("align {i}"));
        }
        for (i, case) in fixture.pca.iter().enumerate() {
            let got = pca_target(&rows(&case.x), case.k)
                .unwrap()
                .to_vec2::<f32>()
                .unwrap();
            for (g, e) in got.iter().flatten().zip(case.target.iter().flatten()) {
                assert!(
                    (g - e).abs() < 1e-4 * e.abs().max(1.0),
                    "pca {i}: {g} vs {e}"
                );
            }
        }
        for (i, case) in fixture.ese.iter().enumerate() {
            let objective = Objective {
                mode: Method::Ese,
                angle: angle.clone(),
                compression_size: case.compression_size,
                kl_temperature: 1.0,
                shallow_weight: 1.0,
                distill_weight: 0.0,
                embedding_distill_weight: 0.0,
            };
            let layers: Vec<Tensor> = case.layers.iter().map(stacked).collect();
            let got = objective
                .loss(&layers, &Layout::Triplets, None, None)
                .unwrap()
                .total;
            close(scalar(&got), case.total, &format!("ese {i}"));
            // --shallow-weight scales exactly the shallow layers' terms.
            let total_with = |shallow_weight: f64| {
                let objective = Objective {
                    shallow_weight,
                    ..objective.clone()
                };
                scalar(
                    &objective
                        .loss(&layers, &Layout::Triplets, None, None)
                        .unwrap()
                        .total,
                )
            };
            let (deep_only, paper) = (total_with(0.0), total_with(1.0));
            if case.layers.len() > 1 {
                assert!(
                    (paper - deep_only).abs() > 1e-6,
                    "ese {i}: no shallow terms"
                );
            }
            close(
                total_with(3.0),
                deep_only + 3.0 * (paper - deep_only),
                &format!("ese {i}, shallow weight 3"),
            );
        }
        for (i, case) in fixture.mrl.iter().enumerate() {
            let x = stacked(&case.blocks);
            assert_eq!(case.dims, matryoshka_dims(x.dim(1).unwrap()));
            let objective = Objective {
                mode: Method::Mrl,
                angle: angle.clone(),
                compression_size: 0,
                kl_temperature: 1.0,
                shallow_weight: 1.0,
                distill_weight: 0.0,
                embedding_distill_weight: 0.0,
            };
            let got = objective
                .loss(&[x], &Layout::Triplets, None, None)
                .unwrap()
                .total;
            close(scalar(&got), case.total, &format!("mrl {i}"));
        }
    }
}
