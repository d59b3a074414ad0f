"""Tolerances derived from the arithmetic, not from the machine a test was first run on.

A sum of n terms computed in floating point with unit roundoff u is within gamma(n) = n*u / (1 - n*u) of the exact
sum, relative to the sum of the terms' absolute values (Higham, Accuracy and Stability of Numerical Algorithms,
2nd ed., section 3.1). That holds for every order and blocking, so it covers whatever a BLAS, a thread count or a SIMD
width (ATEN_CPU_CAPABILITY) picks; two computations of one formula differ by at most twice it. This worst case is
about sqrt(n) times the typical error, which leaves room for the terms' absolute values to exceed the result's.

Where a test's claim is "the same formula", it compares in float64 (U64) and the bound is far below any real fault.
Where float32 is the point, the bound below says how far two float32 computations may drift, and why.
"""
import torch

U32, U64 = 2.0 ** -24, 2.0 ** -53  # unit roundoff: half the gap between 1.0 and the next number

def unit(dtype: torch.dtype) -> float: return {torch.float32: U32, torch.float64: U64}[dtype]

def gamma(n: int, u: float = U32) -> float:
    "Higham's bound on the relative error of an n-term sum."
    return n * u / (1 - n * u)

def chain(cfg, T: int) -> int:
    """The terms summed along one post-LN layer, input to output: q/k/v (d_model), scores (head size), the weighted
    values (T keys), the output projection (d_model), LayerNorm's mean and variance (2 d_model), the feed-forward
    (d_model, then d_ff) and the second LayerNorm (2 d_model). Errors along the chain add."""
    d, hs = cfg.d_model, cfg.d_model // cfg.n_heads
    return d + hs + T + d + 2 * d + d + cfg.d_ff + 2 * d

def encoder_tol(cfg, T: int, dtype: torch.dtype, scale: float) -> float:
    """How far two computations of one encoder's output (same weights, same inputs) may differ, for outputs of
    size `scale`: each LayerNorm brings the activations back to unit size, so a layer adds its chain's error rather
    than multiplying the errors before it; n_layers + 1 chains (the embeddings' LayerNorm and the MLM head are
    shorter than one layer); two computations, so twice the bound of one."""
    return 2 * gamma((cfg.n_layers + 1) * chain(cfg, T), unit(dtype)) * scale

def loss_tol(cfg, T: int, dtype: torch.dtype, scale: float) -> float:
    """Cross-entropy moves by at most twice the largest change of its logits (its gradient, softmax - one-hot, has
    an absolute sum of at most 2), and the mean adds one more sum: for logits of size `scale`."""
    return 2 * encoder_tol(cfg, T, dtype, scale) + gamma(T, unit(dtype)) * scale

def grad_tol(cfg, T: int, N: int, dtype: torch.dtype, scale: float) -> float:
    """How far two computations of one gradient may differ: the backward pass runs the forward chain back (as many
    sums again), and a weight's gradient adds the contributions of all N positions. `scale` is the largest gradient
    entry of the whole model, so a tensor whose contributions cancel is held to the model's scale, not its own."""
    return 2 * gamma(2 * (cfg.n_layers + 1) * chain(cfg, T) + N, unit(dtype)) * scale
