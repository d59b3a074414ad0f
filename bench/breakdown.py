"""Where the default run's training step spends its time (#58): torch's profiler over steps of `bert-nb train`'s own
step, float32 and bf16 autocast, each op's own time put in one of a few kinds (the matrix products, attention,
LayerNorm, GELU, the loss, the embedding's gather and its scatter into the tied table, casts, the optimizer,
clipping, the rest), and what no op accounts for (Python and the dispatcher between ops) as the wall time less the
ops' time. The results go to bench/breakdown.json, which appendix 14 draws; `--before` profiles the bert_nb on
PYTHONPATH (an older checkout) and keeps it in the same file as the profile before a change, with its commit.

    python breakdown.py --threads 1 2
    PYTHONPATH=/tmp/old python breakdown.py --before      # /tmp/old: git worktree add /tmp/old <commit>
"""
import argparse, json, sys, time
from pathlib import Path
import torch
from common import provenance
from step import _model_and_batch, _now

KINDS = [  # (kind, the op names it holds, by their start); the first that matches
    ('attention', ('aten::_scaled_dot_product', 'aten::_flash_attention', 'aten::_efficient_attention',
                   'aten::softmax', 'aten::_softmax')),  # its softmax (the fused loss's: by its caller)
    ('matrix products', ('aten::mm', 'aten::addmm', 'aten::bmm', 'aten::baddbmm', 'mkldnn::', 'aten::mkldnn')),
    ('LayerNorm', ('aten::native_layer_norm',)),
    ('GELU', ('aten::gelu',)),
    ('loss', ('_DecodedLoss', 'aten::logsumexp', 'aten::_log_softmax', 'aten::log_softmax', 'aten::nll_loss',
              'aten::cross_entropy', 'aten::exp')),  # _DecodedLoss: the fused node, its softmax too
    ('embedding', ('aten::embedding', 'aten::index', 'aten::scatter', 'aten::_index_put', 'aten::index_add',
                   'aten::index_select', 'aten::gather')),
    ('casts', ('aten::_to_copy', 'aten::copy_', 'aten::to')),
    ('optimizer', ('Optimizer.step', 'aten::_fused_adamw', 'aten::_foreach_add', 'aten::_foreach_lerp', 'aten::_foreach_mul',
                   'aten::_foreach_addcmul', 'aten::_foreach_addcdiv', 'aten::_foreach_sqrt', 'aten::_foreach_div')),
    ('clipping', ('aten::_foreach_norm', 'aten::linalg_vector_norm', 'aten::stack', 'aten::clamp')),
]

def kind(e) -> str:
    """The kind of a profiled op: a matrix product's own, else that of its outermost caller with a kind (the fused
    loss's softmax is the loss's, the log-softmax's subtraction too)."""
    if e.name.startswith(dict(KINDS)['matrix products']): return 'matrix products'
    chain = []
    while e is not None: chain.append(e.name); e = e.cpu_parent
    return next((k for name in reversed(chain) for k, starts in KINDS if name.startswith(starts)), 'other ops')

def profile(bf16: bool, threads: int, steps: int = 20) -> dict:
    "Milliseconds a step by kind, and the wall time, over `steps` steps after 5 to warm up."
    torch.set_num_threads(threads)
    a, m, args = _model_and_batch()
    step = _now(m, a, bf16)
    for _ in range(5): step(*args)
    from torch.profiler import profile as prof, ProfilerActivity
    with prof(activities=[ProfilerActivity.CPU]) as p:
        t = time.perf_counter()
        for _ in range(steps): step(*args)
        wall = (time.perf_counter() - t) / steps
    out = {}
    for e in p.events():
        if e.name.startswith(('aten::', 'mkldnn::')):  # the ops; their self time is theirs alone
            out[kind(e)] = out.get(kind(e), 0.0) + e.self_cpu_time_total / 1e3 / steps
    out['between ops'] = max(0.0, wall * 1e3 - sum(out.values()))  # Python, the dispatcher, autograd's engine
    return dict(wall_ms=wall * 1e3, ms=out)

def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--threads', type=int, nargs='+', default=[1, 2])
    p.add_argument('--steps', type=int, default=20)
    p.add_argument('--out', default=str(Path(__file__).with_name('breakdown.json')))
    p.add_argument('--before', action='store_true', help="the bert_nb imported is the code before: kept as 'before'")
    ns = p.parse_args()
    res = provenance() | {'runs': []}
    for n in ns.threads:
        for bf16 in (False, True):
            r = profile(bf16, n, ns.steps) | dict(precision='bf16' if bf16 else 'float32', threads=n)
            res['runs'].append(r)
            print(f"{r['precision']:>8}, {n} thread{'s' * (n > 1)}: {r['wall_ms']:6.1f} ms a step; " + ', '.join(
                f"{k} {v:.1f}" for k, v in sorted(r['ms'].items(), key=lambda kv: -kv[1])), flush=True)
    out = Path(ns.out)
    old = json.loads(out.read_text()) if out.exists() else {}
    if ns.before: res = old | {'before': res}
    elif 'before' in old: res['before'] = old['before']
    out.write_text(json.dumps(res, indent=1) + '\n')

if __name__ == '__main__': sys.exit(main())
