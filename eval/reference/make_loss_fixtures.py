"""Write tests/fixtures/loss_reference.json: expected values of the `rag train` losses
(AnglE on triplets and pairs, Align, the PCA target, the ESE total, the MRL sum) on small
seeded random embeddings, for the Rust loss tests in src/train/.

    eval/.venv/bin/python eval/reference/make_loss_fixtures.py [--angle-dir /tmp/angle]

Where the values come from: angle_emb 0.6.0's own code, imported from --angle-dir (the
unpacked wheel: `pip download --no-deps angle-emb==0.6.0 -d /tmp/angle` and unzip it there).
Its package __init__ imports bitsandbytes, peft, datasets, boltons and transformers' Trainer
at module level although the loss path uses none of them, so those modules are replaced by
empty stand-ins before the import (nothing of them is called; this process never needs the
real transformers). What is then run is angle_emb's code itself:
- loss.py: contrastive_with_negative_loss (ibn, cln), angle_loss, cosine_loss;
- AngleLoss(dataset_format='C' / 'B' / 'A') for the totals;
- AngleTrainer.compute_distillation_loss for Align;
- AngleESETrainer.compute_loss (and compute_student_loss, Pooler, get_pooling) for the ESE
  total, with one method overridden: pca_compress uses the exact float64 SVD with sklearn's
  svd_flip on U instead of torch.svd_lowrank (for a deterministic target).
  The pooled outputs [X_1, ..., X_n] of layers 1..n are fed as the "hidden states" (shape
  [rows, 1, d], pooling 'cls'), so the students are layers 1..n-1 with w_i = 1/(1+ln i).
- MRL has no angle_emb counterpart: it is the sum of angle_emb's AngleLoss('C') over dims.
Every value is also recomputed with eval/reference/ese_loss.py (the losses the PyTorch
speed benchmark trains with) and the two must agree to 1e-10.

Numbers: inputs are float32 values with 3 decimals (exact as written, so Rust reads the same
f32s); expected values are computed in float64 from those inputs and written with 10
significant digits. Odd dimensions are avoided: angle_loss splits each vector into two
halves with torch.chunk and fails on odd widths in angle_emb itself.
"""

import argparse
import json
import math
import sys
import types
from pathlib import Path

import numpy as np
import torch
from sklearn.utils.extmath import svd_flip

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ese_loss  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO_ROOT / "tests" / "fixtures" / "loss_reference.json"
SEED = 20250401
TOL = 1e-10
# Modules angle_emb imports at top level but never uses on the loss path.
STUBBED = ["bitsandbytes", "datasets", "peft", "peft.tuners", "peft.tuners.lora", "boltons",
           "boltons.iterutils", "transformers", "transformers.tokenization_utils_base",
           "transformers.utils"]

ROW_ORDER_NOTE = (
    "ESE/PCA row order: each layer's pooled batch is the interleaved rows q0,p0,n0,q1,p1,n1,... "
    "(angle_emb's collator order); PCA_k and Align are computed on that [3B, d] matrix. "
    "A = softmax(X^T X / sqrt(d)) does not depend on the row order and PCA_k(X) = X U_k S_k is "
    "row-wise, so any order gives the same loss as long as x and target rows match. "
    "PCA: exact float64 SVD of A, softmax over each row (dim=-1), d = X.shape[-1] (the full "
    "width, before slicing to k); sign: sklearn svd_flip on U (largest-|u| entry of each column "
    "positive, first one on ties); target = X @ (U_k * S_k); singular_values and u_k are the "
    "top k. ese layers are the pooled outputs of transformer layers 1..n (not the embedding "
    "output); students are layers 1..n-1 weighted 1/(1+ln i), their sum divided by n-1. "
    "angle_triplet.grad_query = d(total)/d(query). Values computed in float64 from the float32 "
    "inputs with angle_emb 0.6.0's own code (exact SVD in place of svd_lowrank).")


class _Stub(types.ModuleType):
    """A module whose every attribute is a fresh empty class (enough for imports, type hints
    and `class AngleTrainer(Trainer)`)."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = type(name, (), {})
        setattr(self, name, value)
        return value


def load_angle_emb(angle_dir: Path):
    """Import angle_emb from the unpacked wheel in angle_dir, heavy imports stubbed."""
    if not (angle_dir / "angle_emb" / "loss.py").is_file():
        raise SystemExit(
            f"no angle_emb under {angle_dir}: run `pip download --no-deps angle-emb==0.6.0 -d "
            f"{angle_dir}` and unzip the wheel there (python -m zipfile -e WHEEL {angle_dir})")
    for name in STUBBED:
        sys.modules.setdefault(name, _Stub(name))
    sys.path.insert(0, str(angle_dir))
    import angle_emb
    if angle_emb.__version__ != "0.6.0":
        raise SystemExit(f"expected angle_emb 0.6.0, found {angle_emb.__version__}")
    return angle_emb


def make_exact_ese_trainer(angle_emb):
    """AngleESETrainer with the exact-SVD pca_compress, built without Trainer.__init__."""

    class _Model:
        """Returns the given per-layer pooled outputs as hidden states [rows, 1, d]."""

        def __init__(self, layers):
            self.states = tuple(x[:, None, :] for x in layers)

        def __call__(self, **_):
            return types.SimpleNamespace(hidden_states=self.states,
                                         last_hidden_state=self.states[-1])

    class ExactESETrainer(angle_emb.AngleESETrainer):
        def __init__(self, layers, compression_size, kl_temperature=1.0):
            self.pooler = angle_emb.Pooler(_Model(layers), pooling_strategy="cls")
            self.loss_fct = angle_emb.AngleLoss(dataset_format="C")
            self.teacher_name_or_path = None
            self.ese_kl_temperature = kl_temperature
            self.ese_compression_size = compression_size
            self.apply_ese_pca = True
            self.n_layers = len(layers)

        @torch.no_grad()
        def pca_compress(self, m, k):
            return m @ reference_pca(m, k)[1]

    return ExactESETrainer


def reference_pca(x: torch.Tensor, k: int):
    """(A, U_k S_k, U_k, S_k, all singular values) with numpy's exact SVD + sklearn svd_flip."""
    m = x.detach().to(torch.float64)
    a = torch.softmax(m.T @ m / m.shape[-1] ** 0.5, dim=-1)
    u, s, vt = np.linalg.svd(a.numpy())
    u, vt = svd_flip(u.copy(), vt.copy(), u_based_decision=True)
    u_k, s_k = torch.from_numpy(u[:, :k]), torch.from_numpy(s[:k])
    return a, u_k * s_k[None, :], u_k, s_k, s


def pca_conditioned(x, k):
    """Whether the top-k PCA basis of x is well defined: relative gaps of at least 1e-2
    between the first k+1 singular values and a margin of at least 1e-2 between the largest
    and second largest |u| of each column (sign choice). Below that a float32 result may
    legitimately differ (large magnitudes push softmax(X^T X / sqrt d) towards a
    permutation-like matrix whose singular values are all close to 1)."""
    _, _, u_k, _, s = reference_pca(x, k)
    gap = min((s[j] - s[j + 1]) / s[0] for j in range(min(k, len(s) - 1)))
    top2 = np.sort(np.abs(u_k.numpy()), axis=0)[-2:]
    return gap >= 1e-2 and float(np.min(top2[1] - top2[0])) >= 1e-2


def draw_conditioned(rng, draw, k, what, tries=100):
    """draw(rng) -> (value, [matrices]); redraw (deterministically, same rng) until every
    matrix has a well-defined PCA basis."""
    for _ in range(tries):
        value, matrices = draw(rng)
        if all(pca_conditioned(x, k) for x in matrices):
            return value
    raise SystemExit(f"{what}: no well-conditioned draw in {tries} tries; lower the scale")


def same(a, b, what):
    a, b = float(torch.as_tensor(a).detach()), float(torch.as_tensor(b).detach())
    if not math.isclose(a, b, rel_tol=TOL, abs_tol=TOL):
        raise SystemExit(f"mismatch in {what}: angle_emb {a!r} vs ese_loss {b!r}")


def rand(rng, shape, scale=1.0):
    """float64 tensor of float32 values with 3 decimals (what the JSON carries exactly)."""
    values = np.round(rng.standard_normal(shape) * scale, 3).astype(np.float32)
    return torch.from_numpy(values.astype(np.float64))


def inputs_json(t):
    """The 3-decimal values as written by rand(): parsed as f32 they are exactly the float32
    inputs the expected values were computed from."""
    return [[round(v, 3) for v in row] for row in t.tolist()]


def out(v):
    """Expected values: 10 significant digits."""
    if isinstance(v, torch.Tensor):
        v = v.tolist()
    if isinstance(v, list):
        return [out(x) for x in v]
    return float(f"{float(v):.10g}")


def angle_triplet_case(ae, rng, batch, dim, scale, with_grad):
    q, p, n = (rand(rng, (batch, dim), scale) for _ in range(3))
    pairs, labels = ese_loss.triplet_pairs(q, p, n)  # AngleLoss format 'C' zigzag pairs
    terms = {
        "ibn": ae.contrastive_with_negative_loss(q, p, tau=20.0),
        "cln": ae.contrastive_with_negative_loss(q, p, n, tau=20.0),
        "angle": ae.angle_loss(labels, pairs, 20.0, pooling_strategy="sum"),
        "cosine": ae.cosine_loss(labels, pairs, 20.0),
    }
    qg = q.clone().requires_grad_(True)
    total = ae.AngleLoss(dataset_format="C")(None, ese_loss.interleave(qg, p, n))
    (grad,) = torch.autograd.grad(total, qg)
    # cross-checks: the terms against AngleLoss with one weight on, and against ese_loss
    one = dict(cosine_w=0.0, ibn_w=0.0, cln_w=0.0, angle_w=0.0)
    rows = ese_loss.interleave(q, p, n)
    same(2 * ae.AngleLoss(dataset_format="C", **{**one, "ibn_w": 1.0})(None, rows),
         terms["ibn"], "ibn via AngleLoss")
    same(ae.AngleLoss(dataset_format="C", **{**one, "angle_w": 1.0})(None, rows),
         terms["angle"], "angle via AngleLoss")
    same(ae.AngleLoss(dataset_format="C", **{**one, "cosine_w": 1.0})(None, rows),
         terms["cosine"], "cosine via AngleLoss")
    same(total, (terms["ibn"] + terms["cln"]) / 2 + 0.02 * terms["angle"], "triplet total")
    same(total, ese_loss.angle_loss_c(rows), "triplet total (ese_loss)")
    for key, value in ese_loss.angle_terms_c(q, p, n).items():
        same(terms[key], value, f"{key} (ese_loss)")
    case = {"query": inputs_json(q), "positive": inputs_json(p), "negative": inputs_json(n),
            **{key: out(v) for key, v in terms.items()}, "total": out(total)}
    if with_grad:
        case["grad_query"] = out(grad)
    return case


def angle_pairs_case(ae, rng, batch, dim, scale):
    q, p = rand(rng, (batch, dim), scale), rand(rng, (batch, dim), scale)
    rows = ese_loss.interleave(q, p)
    total = ae.AngleLoss(dataset_format="B")(None, rows)
    same(total, ae.contrastive_with_negative_loss(q, p, None, tau=20.0), "pairs total")
    same(total, ese_loss.angle_loss_pairs(rows), "pairs total (ese_loss)")
    return {"query": inputs_json(q), "positive": inputs_json(p), "total": out(total)}


def angle_labelled_case(ae, rng, labels, dim, scale):
    """Format 'A' (text1, text2, label): each pair's label on both of its zigzag rows."""
    batch = len(labels)
    t1, t2 = rand(rng, (batch, dim), scale), rand(rng, (batch, dim), scale)
    rows = ese_loss.interleave(t1, t2)
    lab = torch.tensor(labels, dtype=torch.float64).repeat_interleave(2)[:, None]
    terms = {"ibn": ae.in_batch_negative_loss(lab, rows, 20.0),
             "angle": ae.angle_loss(lab, rows, 20.0, pooling_strategy="sum"),
             "cosine": ae.cosine_loss(lab, rows, 20.0)}
    total = ae.AngleLoss(dataset_format="A")(lab, rows)
    same(total, terms["ibn"] + 0.02 * terms["angle"], "labelled total")
    same(total, ese_loss.angle_loss_pairs(rows, lab), "labelled total (ese_loss)")
    return {"text1": inputs_json(t1), "text2": inputs_json(t2), "labels": list(labels),
            **{key: out(v) for key, v in terms.items()}, "total": out(total)}


def align_case(ae_module, rng, batch, dim, scale):
    x, y = rand(rng, (batch, dim), scale), rand(rng, (batch, dim), scale)
    distill = ae_module.AngleTrainer.compute_distillation_loss  # `self` is unused
    total = distill(None, x, y, mse_weight=1.0, kl_temperature=1.0)
    mse = distill(None, x, y, mse_weight=1.0, kl_temperature=0.0)
    kl = distill(None, x, y, mse_weight=0.0, kl_temperature=1.0)
    same(total, mse + kl, "align total")
    same(total, ese_loss.align(x, y), "align total (ese_loss)")
    return {"x": inputs_json(x), "y": inputs_json(y), "temperature": 1.0,
            "mse": out(mse), "kl": out(kl), "total": out(total)}


def pca_case(rng, batch, dim, k, scale):
    x = draw_conditioned(rng, lambda r: (lambda x: (x, [x]))(rand(r, (batch, dim), scale)),
                         k, f"pca {batch}x{dim}")
    a, us, u_k, s_k, _ = reference_pca(x, k)
    target = x @ us
    if not torch.allclose(a @ a.T @ u_k, u_k * s_k[None, :] ** 2, atol=1e-10):  # A A^T U = U S^2
        raise SystemExit("pca: U_k are not left singular vectors of A")
    ours_u, ours_s = ese_loss.pca_basis(x, k)
    if not (torch.allclose(ours_u, u_k, atol=1e-10) and torch.allclose(ours_s, s_k, atol=1e-10)):
        raise SystemExit("pca: ese_loss.pca_basis differs from numpy SVD + sklearn svd_flip")
    return {"x": inputs_json(x), "k": k, "target": out(target), "singular_values": out(s_k),
            "u_k": out(u_k)}


def ese_case(ae, trainer_cls, rng, n_layers, batch, dim, k, scale):
    def draw(r):
        layers = [[rand(r, (batch, dim), scale) for _ in range(3)] for _ in range(n_layers)]
        rows = [ese_loss.interleave(q, p, n) for q, p, n in layers]
        return (layers, rows), rows

    layers, rows = draw_conditioned(rng, draw, k, f"ese {n_layers} layers {batch}x{dim}")
    labels = -torch.ones(rows[0].shape[0], 1)  # what the collator sets for format 'C'
    total = trainer_cls(rows, k).compute_loss(None, {"labels": labels})
    parts = {}
    same(total, ese_loss.ese_loss(rows, k, parts=parts), "ese total (ese_loss)")
    return {"layers": [{"query": inputs_json(q), "positive": inputs_json(p),
                        "negative": inputs_json(n)} for q, p, n in layers],
            "compression_size": k, "total": out(total),
            "parts": {"angle_full": out(parts["angle_full"]), "angle_k": out(parts["angle_k"]),
                      "align_k": out(parts["align_k"]),
                      "students": [{"layer": s["layer"], "weight": out(s["weight"]),
                                    "angle": out(s["angle"]), "align": out(s["align"])}
                                   for s in parts["students"]]}}


def mrl_case(ae, rng, batch, dim, scale):
    q, p, n = (rand(rng, (batch, dim), scale) for _ in range(3))
    rows = ese_loss.interleave(q, p, n)
    dims = ese_loss.mrl_dims(dim)
    loss_fct = ae.AngleLoss(dataset_format="C")
    total = sum(loss_fct(None, rows[:, :m]) for m in dims)
    same(total, ese_loss.mrl_loss(rows, dims), "mrl total (ese_loss)")
    return {"query": inputs_json(q), "positive": inputs_json(p), "negative": inputs_json(n),
            "dims": dims, "total": out(total)}


def build(angle_emb):
    ae = angle_emb
    trainer_cls = make_exact_ese_trainer(angle_emb)
    rng = np.random.default_rng(SEED)
    return {
        "note": ROW_ORDER_NOTE,
        "source": {"angle_emb": angle_emb.__version__, "torch": torch.__version__,
                   "seed": SEED, "script": "eval/reference/make_loss_fixtures.py"},
        "angle_triplet": [angle_triplet_case(ae, rng, 4, 8, 1.0, with_grad=True),
                          angle_triplet_case(ae, rng, 3, 6, 4.0, with_grad=False)],
        "angle_pairs": [angle_pairs_case(ae, rng, 4, 8, 1.0),
                        angle_pairs_case(ae, rng, 3, 6, 4.0)],
        "angle_labelled": [angle_labelled_case(ae, rng, [1, 0, 1, 0], 8, 1.0)],
        "align": [align_case(angle_emb.angle, rng, 6, 4, 1.0),
                  align_case(angle_emb.angle, rng, 5, 6, 3.0)],
        "pca": [pca_case(rng, 12, 8, 3, 1.0), pca_case(rng, 9, 6, 3, 1.5)],
        "ese": [ese_case(ae, trainer_cls, rng, 3, 4, 8, 4, 1.0),
                ese_case(ae, trainer_cls, rng, 2, 3, 6, 4, 1.5)],
        "mrl": [mrl_case(ae, rng, 3, 16, 1.0), mrl_case(ae, rng, 3, 20, 1.0)],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--angle-dir", type=Path, default=Path("/tmp/angle"),
                        help="directory holding the unpacked angle_emb 0.6.0 package")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    torch.set_default_dtype(torch.float64)
    fixture = build(load_angle_emb(args.angle_dir))
    text = json.dumps(fixture, separators=(",", ":"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n")
    counts = ", ".join(f"{key} {len(v)}" for key, v in fixture.items() if isinstance(v, list))
    print(f"wrote {args.out} ({len(text) / 1024:.1f} KiB): {counts}")


if __name__ == "__main__":
    main()
