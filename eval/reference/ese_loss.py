"""The AnglE / Espresso (ESE) training losses in plain PyTorch, as `rag train`
implements them, for the PyTorch side of eval/training/train_speed.py.

Why a copy rather than `import angle_emb`: angle_emb 0.6.0 pulls bitsandbytes, peft, datasets
and a Trainer subclass at import time, none of which the loss needs. The four loss functions
below are verbatim copies of angle_emb/loss.py (0.6.0); `angle_loss_c` is AngleLoss.__call__
for dataset format 'C' (triplets) and `angle_loss_pairs` formats 'A' / 'B'; `align` is
AngleTrainer.compute_distillation_loss. eval/reference/make_loss_fixtures.py imports the real
angle_emb code and asserts that every function here gives the same value, so this module is
checked against the reference each time the fixture is written.

Two places where `rag train` fixes what angle_emb leaves loose, on purpose:
- `pca_target` uses the exact SVD in float64 (angle_emb: torch.svd_lowrank, randomised) and
  sklearn's svd_flip sign convention on U, so the target is deterministic across calls.
- `ese_loss` takes the pooled outputs of the transformer layers 1..n (not the embedding
  output): students are layers 1..n-1 with weight 1 / (1 + ln i). angle_emb's
  AngleESETrainer.compute_loss indexes `hidden_states`, whose entry 0 is the embedding output,
  so run on a Hugging Face model it trains embeddings + layers 1..n-2 as students instead.
  Given the list [X_1, ..., X_n] (as here) the two formulas are identical.
"""

import math
from typing import List, Optional, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

# Defaults of angle_emb 0.6.0 AngleLoss.
ANGLE_DEFAULTS = dict(cosine_w=0.0, ibn_w=1.0, cln_w=1.0, angle_w=0.02,
                      cosine_tau=20.0, ibn_tau=20.0, angle_tau=20.0, angle_pooling="sum")


# ---- verbatim from angle_emb 0.6.0 loss.py -------------------------------------------------

def categorical_crossentropy_loss(y_true: torch.Tensor, y_pred: torch.Tensor,
                                  from_logits: bool = True) -> torch.Tensor:
    if from_logits:
        return -(F.log_softmax(y_pred, dim=1) * y_true).sum(dim=1)
    return -(torch.log(y_pred, dim=1) * y_true).sum(dim=1)


def cosine_loss(y_true: torch.Tensor, y_pred: torch.Tensor, tau: float = 20.0) -> torch.Tensor:
    """CoSENT on zigzag pairs (rows 2j, 2j+1 form pair j; label y_true[2j, 0])."""
    y_true = y_true[::2, 0]
    y_true = (y_true[:, None] < y_true[None, :]).float()
    y_pred = F.normalize(y_pred, p=2, dim=1)
    y_pred = torch.sum(y_pred[::2] * y_pred[1::2], dim=1) * tau
    y_pred = y_pred[:, None] - y_pred[None, :]
    y_pred = (y_pred - (1 - y_true) * 1e12).view(-1)
    zero = torch.Tensor([0]).to(y_pred.device)
    y_pred = torch.concat((zero, y_pred), dim=0)
    return torch.logsumexp(y_pred, dim=0)


def angle_loss(y_true: torch.Tensor, y_pred: torch.Tensor, tau: float = 1.0,
               pooling_strategy: str = "sum") -> torch.Tensor:
    """AnglE's angle term: complex division of the two halves of each pair (zigzag rows)."""
    y_true = y_true[::2, 0]
    y_true = (y_true[:, None] < y_true[None, :]).float()

    y_pred_re, y_pred_im = torch.chunk(y_pred, 2, dim=1)
    a = y_pred_re[::2]
    b = y_pred_im[::2]
    c = y_pred_re[1::2]
    d = y_pred_im[1::2]

    z = torch.sum(c**2 + d**2, dim=1, keepdim=True)
    re = (a * c + b * d) / z
    im = (b * c - a * d) / z

    dz = torch.sum(a**2 + b**2, dim=1, keepdim=True)**0.5
    dw = torch.sum(c**2 + d**2, dim=1, keepdim=True)**0.5
    re /= (dz / dw)
    im /= (dz / dw)

    y_pred = torch.concat((re, im), dim=1)
    if pooling_strategy == "sum":
        pooling = torch.sum(y_pred, dim=1)
    elif pooling_strategy == "mean":
        pooling = torch.mean(y_pred, dim=1)
    else:
        raise ValueError(f"Unsupported pooling strategy: {pooling_strategy}")
    y_pred = torch.abs(pooling) * tau  # absolute delta angle
    y_pred = y_pred[:, None] - y_pred[None, :]
    y_pred = (y_pred - (1 - y_true) * 1e12).view(-1)
    zero = torch.Tensor([0]).to(y_pred.device)
    y_pred = torch.concat((zero, y_pred), dim=0)
    return torch.logsumexp(y_pred, dim=0)


def in_batch_negative_loss(y_true: torch.Tensor, y_pred: torch.Tensor, tau: float = 20.0,
                           negative_weights: float = 0.0) -> torch.Tensor:
    """In-batch negatives on zigzag pairs; only pairs labelled 1 are positives."""
    device = y_true.device

    def make_target_matrix(y_true: torch.Tensor):
        idxs = torch.arange(0, y_pred.shape[0]).int().to(device)
        y_true = y_true.int()
        idxs_1 = idxs[None, :]
        idxs_2 = (idxs + 1 - idxs % 2 * 2)[:, None]

        idxs_1 *= y_true.T
        idxs_1 += (y_true.T == 0).int() * -2

        idxs_2 *= y_true
        idxs_2 += (y_true == 0).int() * -1

        y_true = (idxs_1 == idxs_2).float()
        return y_true

    neg_mask = make_target_matrix(y_true == 0)

    y_true = make_target_matrix(y_true)

    y_pred = F.normalize(y_pred, dim=1, p=2)
    similarities = y_pred @ y_pred.T
    similarities = similarities - torch.eye(y_pred.shape[0]).to(device) * 1e12
    similarities = similarities * tau

    if negative_weights > 0:
        similarities += neg_mask * negative_weights

    return categorical_crossentropy_loss(y_true, similarities, from_logits=True).mean()


def contrastive_with_negative_loss(text: torch.Tensor, pos: torch.Tensor,
                                   neg: Optional[torch.Tensor] = None,
                                   tau: float = 20.0) -> torch.Tensor:
    """Cross-entropy of each query against all positives (and hard negatives) in the batch."""
    target = torch.cat((pos, neg), dim=0) if neg is not None else pos  # (2B, D)
    q_norm = torch.nn.functional.normalize(text, p=2, dim=1)  # (B, D)
    t_norm = torch.nn.functional.normalize(target, p=2, dim=1)  # (2B, D)
    scores = torch.mm(q_norm, t_norm.transpose(0, 1)) * tau  # (B, 2B)
    labels = torch.tensor(range(len(scores)), dtype=torch.long, device=scores.device)
    return nn.CrossEntropyLoss()(scores, labels)


# ---- AngleLoss (angle_emb 0.6.0 angle.py), split into its terms ---------------------------

def interleave(query: torch.Tensor, positive: torch.Tensor,
               negative: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Rows in the order angle_emb's collator feeds the model: q0, p0, n0, q1, p1, n1, ..."""
    parts = (query, positive) if negative is None else (query, positive, negative)
    return torch.stack(parts, dim=1).reshape(-1, query.shape[-1])


def triplet_pairs(query, positive, negative):
    """AngleLoss format 'C': zigzag (q, p) pairs labelled 1, then (q, n) pairs labelled 0."""
    fea_dim = query.shape[-1]
    positive_inputs = torch.stack((query, positive), dim=1).reshape(-1, fea_dim)
    positive_labels = torch.ones_like(positive_inputs[:, :1]).long()
    negative_inputs = torch.stack((query, negative), dim=1).reshape(-1, fea_dim)
    negative_labels = torch.zeros_like(negative_inputs[:, :1]).long()
    return (torch.cat((positive_inputs, negative_inputs), dim=0),
            torch.cat((positive_labels, negative_labels), dim=0))


def angle_terms_c(query, positive, negative, ibn_tau=20.0, angle_tau=20.0, cosine_tau=20.0,
                  angle_pooling="sum"):
    """The four unweighted terms of AngleLoss format 'C': ibn, cln, angle, cosine."""
    pairs, labels = triplet_pairs(query, positive, negative)
    return {
        "ibn": contrastive_with_negative_loss(query, positive, tau=ibn_tau),
        "cln": contrastive_with_negative_loss(query, positive, negative, tau=ibn_tau),
        "angle": angle_loss(labels, pairs, angle_tau, pooling_strategy=angle_pooling),
        "cosine": cosine_loss(labels, pairs, cosine_tau),
    }


def angle_loss_c(outputs: torch.Tensor, cosine_w=0.0, ibn_w=1.0, cln_w=1.0, angle_w=0.02,
                 cosine_tau=20.0, ibn_tau=20.0, angle_tau=20.0, angle_pooling="sum"):
    """AngleLoss(dataset_format='C')(labels, outputs); outputs interleaved q, p, n rows.
    Terms with weight 0 are skipped, as in angle_emb (their cost included)."""
    query, positive, negative = outputs[::3], outputs[1::3], outputs[2::3]
    loss = 0.0
    cll = 0.0
    if ibn_w > 0:
        cll += ibn_w * contrastive_with_negative_loss(query, positive, tau=ibn_tau)
    if cln_w > 0:
        cll += cln_w * contrastive_with_negative_loss(query, positive, negative, tau=ibn_tau)
    if cll > 0:
        loss += cll / 2
    if angle_w > 0 or cosine_w > 0:
        pairs, labels = triplet_pairs(query, positive, negative)
        if angle_w > 0:
            loss += angle_w * angle_loss(labels, pairs, angle_tau, pooling_strategy=angle_pooling)
        if cosine_w > 0:
            loss += cosine_w * cosine_loss(labels, pairs, cosine_tau)
    return loss


def angle_loss_pairs(outputs: torch.Tensor, labels: Optional[torch.Tensor] = None,
                     cosine_w=0.0, ibn_w=1.0, angle_w=0.02, cosine_tau=20.0, ibn_tau=20.0,
                     angle_tau=20.0, angle_pooling="sum"):
    """Pair batches, rows zigzag (text1, text2). Without labels: AngleLoss format 'B' (query,
    positive): in-batch negatives only. With labels [2B, 1] (each pair's label on both rows):
    format 'A': cosine + ibn + angle, each when its weight is > 0."""
    if labels is None:
        return contrastive_with_negative_loss(outputs[::2], outputs[1::2], neg=None, tau=ibn_tau)
    loss = 0.0
    if cosine_w > 0:
        loss += cosine_w * cosine_loss(labels, outputs, cosine_tau)
    if ibn_w > 0:
        loss += ibn_w * in_batch_negative_loss(labels, outputs, ibn_tau)
    if angle_w > 0:
        loss += angle_w * angle_loss(labels, outputs, angle_tau, pooling_strategy=angle_pooling)
    return loss


# ---- Espresso -------------------------------------------------------------------------------

def align(x: torch.Tensor, y: torch.Tensor, mse_weight: float = 1.0,
          temperature: float = 1.0) -> torch.Tensor:
    """AngleTrainer.compute_distillation_loss: MSE + T * KL(batchmean) of softmax(x/T) to
    softmax(y/T)."""
    loss = 0.0
    if mse_weight > 0:
        loss += mse_weight * nn.MSELoss()(x, y)
    if temperature > 0:
        loss += nn.KLDivLoss(reduction="batchmean")(
            F.log_softmax(x / temperature, dim=-1),
            F.softmax(y / temperature, dim=-1)) * temperature
    return loss


def svd_flip_u(u: torch.Tensor, vt: Optional[torch.Tensor] = None):
    """sklearn's svd_flip(u, vt, u_based_decision=True): in each column of u, the entry of
    largest magnitude (first one on ties) becomes positive; vt's rows follow."""
    rows = torch.argmax(u.abs(), dim=0)
    signs = torch.sign(u[rows, torch.arange(u.shape[1])])
    u = u * signs[None, :]
    return (u, vt * signs[:, None]) if vt is not None else (u, None)


@torch.no_grad()
def pca_basis(x: torch.Tensor, k: int):
    """(U_k, S_k) of A = softmax(X^T X / sqrt(d), dim=-1), X [batch, d]: exact SVD in float64,
    sklearn sign convention on U. Row order of X does not matter: X^T X sums over rows."""
    m = x.detach().to(torch.float64)
    a = F.softmax(m.T @ m / m.shape[-1] ** 0.5, dim=-1)
    # One thread for the SVD: MKL's multi-threaded SVD of a d x d matrix this small is no
    # faster (384: 23 ms on 1 thread, 26 ms on 2) and, when any other process holds a core,
    # its spinning threads make a call take seconds (measured: 4 s instead of 23 ms).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        u, s, vt = torch.linalg.svd(a)
    finally:
        torch.set_num_threads(threads)
    u, _ = svd_flip_u(u, vt)
    return u[:, :k], s[:k]


@torch.no_grad()
def pca_target(x: torch.Tensor, k: int) -> torch.Tensor:
    """PCA_k(X) = X (U_k S_k), detached, in x's dtype (the exact-SVD pca_compress)."""
    u_k, s_k = pca_basis(x, k)
    return (x.detach().to(torch.float64) @ (u_k * s_k[None, :])).to(x.dtype)


def ese_loss(layers: Sequence[torch.Tensor], k: int, kl_temperature: float = 1.0,
             angle_kwargs: Optional[dict] = None, parts: Optional[dict] = None):
    """AngleESETrainer.compute_loss with exact PCA. layers = [X_1, ..., X_n], the pooled
    outputs of transformer layers 1..n, rows interleaved q, p, n. If `parts` is a dict it is
    filled with the unweighted pieces (floats), for fixtures and debugging."""
    kw = angle_kwargs or {}
    n = len(layers)
    last = layers[-1]
    full = angle_loss_c(last, **kw)
    slim = last[:, :k]
    slim_angle = angle_loss_c(slim, **kw)
    slim_align = align(slim, pca_target(last, k), temperature=kl_temperature)
    loss = full + slim_angle + slim_align
    students = []
    student_sum = 0.0
    for i in range(1, n):  # layer i = 1..n-1 is layers[i - 1]
        x = layers[i - 1][:, :k]
        s_angle = angle_loss_c(x, **kw)
        s_align = align(x, pca_target(layers[i - 1], k), temperature=kl_temperature)
        weight = 1.0 / (1.0 + math.log(i))
        student_sum = student_sum + weight * (s_angle + s_align)
        if parts is not None:
            students.append({"layer": i, "weight": weight, "angle": float(s_angle.detach()),
                             "align": float(s_align.detach())})
    if n > 1:
        loss = loss + student_sum / (n - 1)
    if parts is not None:
        parts.update({"angle_full": float(full.detach()), "angle_k": float(slim_angle.detach()),
                      "align_k": float(slim_align.detach()), "students": students})
    return loss


def mrl_dims(d: int, start: int = 8) -> List[int]:
    """8, 16, 32, ... up to d, plus d itself when it is not a power of two."""
    dims, m = [], start
    while m <= d:
        dims.append(m)
        m *= 2
    if not dims or dims[-1] != d:
        dims.append(d)
    return dims


def mrl_loss(last: torch.Tensor, dims: Sequence[int], angle_kwargs: Optional[dict] = None):
    """Matryoshka baseline: sum over m in dims of AnglE(X_n[:, :m])."""
    kw = angle_kwargs or {}
    return sum(angle_loss_c(last[:, :m], **kw) for m in dims)
