use super::*;
use crate::vectors::cosine;

fn tiny(pooling: Pooling) -> (tempfile::TempDir, Encoder) {
    let dir = tempfile::tempdir().unwrap();
    tiny::TinyBert {
        pooling,
        ..Default::default()
    }
    .write(dir.path())
    .unwrap();
    let encoder = Encoder::load(dir.path(), &EncoderOptions::default()).unwrap();
    (dir, encoder)
}

const TEXTS: [&str; 4] = [
    "the river of the city",
    "who was in the film?",
    "a",
    "what is the longest river in the world, and which city is on it? it is the nile.",
];

#[test]
fn padding_does_not_change_a_vector() {
    let (_dir, encoder) = tiny(Pooling::Mean);
    let together = encoder.encode(&TEXTS, &[3]).unwrap().remove(0);
    for (i, text) in TEXTS.iter().enumerate() {
        let alone = encoder.encode(&[text], &[3]).unwrap().remove(0);
        let c = cosine(alone.row(0), together.row(i));
        assert!(c > 0.99999, "text {i}: cosine {c}");
    }
}

#[test]
fn one_pass_yields_every_depth_and_shallow_loads_match() {
    let (dir, encoder) = tiny(Pooling::Cls);
    let all = encoder.encode(&TEXTS, &[1, 2, 3]).unwrap();
    assert_eq!(all.len(), 3);
    for row in 0..TEXTS.len() {
        let norm: f32 = all[0].row(row).iter().map(|x| x * x).sum();
        assert!((norm - 1.0).abs() < 1e-4);
        // Depths really differ.
        assert!(cosine(all[0].row(row), all[2].row(row)) < 0.999);
    }
    let shallow = Encoder::load(
        dir.path(),
        &EncoderOptions {
            max_layers: Some(2),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(shallow.depth(), 2);
    let two = shallow.encode(&TEXTS, &[2]).unwrap().remove(0);
    for row in 0..TEXTS.len() {
        assert!(cosine(two.row(row), all[1].row(row)) > 0.99999);
    }
    assert!(shallow.encode(&TEXTS, &[3]).is_err());
    assert!(shallow.encode(&TEXTS, &[0]).is_err());
}

/// The int8 projections stay close to f32 at every depth, and are really in use (not
/// bit-identical to f32).
#[test]
fn int8_vectors_stay_close_to_f32() {
    if !Precision::Int8.available() {
        return crate::skip::skip(
            concat!(module_path!(), "::int8_vectors_stay_close_to_f32"),
            "this CPU has neither AVX-512 VNNI nor AVX2; --precision int8 is refused here",
        );
    }
    let (dir, exact) = tiny(Pooling::Mean);
    let int8 = Encoder::load(
        dir.path(),
        &EncoderOptions {
            precision: Precision::Int8,
            ..Default::default()
        },
    )
    .unwrap();
    let depths = [1, 2, 3];
    let (exact, int8) = (
        exact.encode(&TEXTS, &depths).unwrap(),
        int8.encode(&TEXTS, &depths).unwrap(),
    );
    for (depth, (a, b)) in depths.iter().zip(exact.iter().zip(&int8)) {
        for row in 0..TEXTS.len() {
            let c = cosine(a.row(row), b.row(row));
            assert!(c > 0.995, "depth {depth}, text {row}: cosine {c}");
        }
    }
    assert_ne!(exact[2].data, int8[2].data);
}

#[test]
fn pooling_comes_from_the_checkpoint_and_can_be_overridden() {
    let (dir, mean) = tiny(Pooling::Mean);
    assert_eq!(mean.pooling, Pooling::Mean);
    let cls = Encoder::load(
        dir.path(),
        &EncoderOptions {
            pooling: Some(Pooling::Cls),
            ..Default::default()
        },
    )
    .unwrap();
    let a = mean.encode(&TEXTS[..1], &[3]).unwrap().remove(0);
    let b = cls.encode(&TEXTS[..1], &[3]).unwrap().remove(0);
    assert!(cosine(a.row(0), b.row(0)) < 0.999);
}

#[test]
fn queries_get_the_prefix() {
    let dir = tempfile::tempdir().unwrap();
    tiny::TinyBert::default().write(dir.path()).unwrap();
    let prefixed = Encoder::load(
        dir.path(),
        &EncoderOptions {
            query_prefix: Some("query: ".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let q = prefixed
        .encode_queries(&["the city"], &[3])
        .unwrap()
        .remove(0);
    let manual = prefixed
        .encode(&["query: the city"], &[3])
        .unwrap()
        .remove(0);
    assert!(cosine(q.row(0), manual.row(0)) > 0.99999);
}

#[test]
fn prepared_inference_matches_the_composite_path_training_uses() {
    let (dir, encoder) = tiny(Pooling::Mean);
    let config: Config = files::read_json(&dir.path().join("config.json")).unwrap();
    let weights = [dir.path().join("model.safetensors")];
    // SAFETY: the test's own file, not written while mapped.
    let vb =
        unsafe { VarBuilder::from_mmaped_safetensors(&weights, DType::F32, &Device::Cpu) }.unwrap();
    let composite = BertModel::load(vb, &config, None).unwrap();
    let ids = encoder.tokenize(&TEXTS).unwrap();
    let inputs = BatchInputs::new(ids.iter().map(Vec::as_slice), &Device::Cpu).unwrap();
    let pooled = |model: &BertModel| {
        let states = model
            .forward(
                &inputs.input_ids,
                &inputs.token_type_ids,
                &inputs.attention_mask,
                3,
            )
            .unwrap();
        let pooled = Pooling::Mean.pool(&states, &inputs.attention_mask).unwrap();
        Matrix::from_vec(
            TEXTS.len(),
            32,
            pooled.flatten_all().unwrap().to_vec1().unwrap(),
        )
    };
    let (fast, slow) = (pooled(encoder.model()), pooled(&composite));
    for row in 0..TEXTS.len() {
        assert!(cosine(fast.row(row), slow.row(row)) > 0.99999, "text {row}");
    }
}

/// Encoding pools the packed states directly; it must give what pooling the padded
/// layout gives, for both poolings and at every depth.
#[test]
fn packed_pooling_matches_padded_pooling() {
    let (_dir, encoder) = tiny(Pooling::Mean);
    let ids = encoder.tokenize(&TEXTS).unwrap();
    let inputs = BatchInputs::new(ids.iter().map(Vec::as_slice), &Device::Cpu).unwrap();
    let (batch, seq) = inputs.input_ids.dims2().unwrap();
    let packed = encoder
        .model()
        .forward_packed(
            &inputs.input_ids,
            &inputs.token_type_ids,
            &inputs.attention_mask,
            3,
        )
        .unwrap()
        .expect("a prepared GELU model runs packed");
    let padded = packed.padded(batch, seq).unwrap();
    for pooling in [Pooling::Mean, Pooling::Cls] {
        for depth in 1..=3 {
            let rows = |t: Tensor| {
                Matrix::from_vec(batch, 32, t.flatten_all().unwrap().to_vec1().unwrap())
            };
            let direct = rows(
                pooling
                    .pool_packed(&packed.layers[depth - 1], &packed.starts, &packed.lengths)
                    .unwrap(),
            );
            let via_padding = rows(
                pooling
                    .pool(&padded[depth - 1], &inputs.attention_mask)
                    .unwrap(),
            );
            for row in 0..batch {
                assert!(
                    cosine(direct.row(row), via_padding.row(row)) > 0.99999,
                    "{pooling} pooling, depth {depth}, text {row}"
                );
                assert!((direct.row(row)[0] - via_padding.row(row)[0]).abs() < 1e-5);
            }
        }
    }
}

#[test]
fn missing_model_directory_is_a_clear_error() {
    let err = Encoder::load(Path::new("/nonexistent/model"), &EncoderOptions::default())
        .err()
        .unwrap();
    assert!(err.to_string().contains("/nonexistent/model"));
}
