"""Inference on full rows, BertForMLM against transformers' BertForMaskedLM (sdpa), train.py's shapes (V 8,192, d 256,
4 layers, 32 rows of 128 tokens, full logits): the ratio of their speeds, timed in alternation, and how high it
could go. torch's profiler puts each side's op time in breakdown.py's kinds; the matrix products (with the bias
copies inside them), attention, LayerNorm, GELU and the embeddings are arithmetic any implementation that agrees with
transformers must do, so their share of our time bounds the ratio: ratio / share. Writes bench/inference.json, which
the Results page reads.

    python bench/inference.py
"""
import time
import torch
import transformers
from torch.profiler import profile, ProfilerActivity
from breakdown import kind
from common import RUN, interleaved, save
from train import B, T, models, batch

SHARED = ('matrix products', 'attention', 'LayerNorm', 'GELU', 'embedding')  # the arithmetic both must do

def kinds(f, calls: int = 6) -> tuple[float, dict]:
    "(wall ms a call, {kind: ms a call}) of f under torch's profiler."
    with profile(activities=[ProfilerActivity.CPU]) as p:
        t = time.perf_counter()
        for _ in range(calls): f()
        wall = (time.perf_counter() - t) / calls * 1e3
    ms = {}
    for e in p.events():
        if e.name.startswith(('aten::', 'mkldnn::')): ms[kind(e)] = ms.get(kind(e), 0.0) + e.self_cpu_time_total / 1e3 / calls
    return wall, ms

def main():
    transformers.logging.set_verbosity_error()
    hf, ours = (m.eval() for m in models()); ids, _ = batch()
    with torch.no_grad():
        sides = {'transformers inference': lambda: hf(input_ids=ids).logits, 'ours inference': lambda: ours(ids)[0]}
        d = (sides['transformers inference']() - sides['ours inference']()).abs().max().item()
        assert d < 1e-4, d  # the same logits first
        for f in sides.values(): f()
        t = interleaved(sides, rounds=10, calls={k: 3 for k in sides})
        prof = {k: kinds(f) for k, f in sides.items()}
    ratio = t['transformers inference'] / t['ours inference']
    wall, ms = prof['ours inference']
    share = sum(ms.get(k, 0.0) for k in SHARED) / wall
    RUN.update(tokens_per_s={k: B * T / v for k, v in t.items()}, ratio=ratio, profiles={
        k: dict(wall_ms=w, ms=m) for k, (w, m) in prof.items()}, shared=SHARED, shared_share=share, bound=ratio / share)
    print(f"inference on full rows, {B} x {T}: ours {ratio:.2f}x transformers' tokens/s")
    for k, (w, m) in prof.items():
        print(f"  {k:<24} {w:6.1f} ms a call under the profiler: " + ', '.join(
            f"{n} {v:.1f}" for n, v in sorted(m.items(), key=lambda kv: -kv[1])))
    print(f"  the arithmetic both must do ({', '.join(SHARED)}): {share:.1%} of ours; "
          f"the ratio could reach {ratio / share:.2f}x with everything else gone")
    save('inference')

if __name__ == '__main__': main()
