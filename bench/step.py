"""The default run's training step before #45 and now, float32 first: what a CPU without native bf16 trains with.

  unfused        (the step before #45) AdamW's per-tensor loop, autograd's cross-entropy at the labelled rows, glibc's default malloc
  float32        the step `bert-nb train` takes: fused AdamW, the decoder and its loss as one step
                 (`bert_nb.speed.decoded_loss`), freed memory kept for reuse (`_keep_freed_memory`)
  float32, 30%   the same masking 30%: the head decodes a quarter fewer rows (#45's per-second search)
  bf16 autocast  the same under bf16 autocast, where the CPU multiplies bf16 natively (AMX, AVX512-BF16): the
                 decoder and its loss in one node there too (#58)
  bf16 unfused loss  ... as it was before #58: the decoder and its loss on autograd's path (bf16 logits cast to
                 float32), attention in float32 SDPA
  bf16 SDPA      ... with attention in SDPA's bf16 kernel, not by its formula (`bert_nb.speed.F32_ATTN_T`, app. 14)
  compiled       (--compile) the step under torch.compile, float32 and bf16: its compiling is the first steps' time
                 (the fused loss gives way to autograd's cross-entropy in a graph)
  compiled layers bf16  (--compile) only the encoder's layers compiled (static shapes), the fused loss eager
  bf16 model     (--sides) the model itself cast to bf16, stepped without autocast: no cast for a product, LayerNorm
                 and GELU on bf16. Not a recipe (no float32 master weights: AdamW's small updates round away in
                 bf16), but what the casts and the other ops' bytes are worth (#58); bench/step_bf16_model.json

Each side is its own process (spawned: its own allocator settings), training its own copy of the same model on the
same masked batch; the steps alternate, one side at a time, so load changes hit every side alike, and each
turn's timed steps follow an untimed one, as every step of a run follows the last. The stand-in for a
laptop without AVX-512 or bf16 (#45): `ATEN_CPU_CAPABILITY=avx2 taskset -c 0,1 python step.py` (MKL, which does
the matrix products, picks its own instructions whatever ATen is told).

Each step is also measured against the machine's limit: its FLOP a token, counted from the model's shapes (and
checked against torch's FlopCounterMode), times its tokens a second, as a share of the matrix-product peak of its
precision, measured in the same run at the same threads (the best of 2048-square products and of the model's own
shapes). A share of the physical limit holds from machine to machine where tokens a second do not (#58). The results
go to bench/step.json. This machine's speed drifts for seconds at a time, so each turn of a side is also set against
a peak timed just before it (the best of the model's own shapes, three times each): the median of those shares is
kept beside the share of the run's peak, which is the figure.

And the ceiling: the step's own matrix products, recorded from one step (their shapes, strides and dtypes), each
timed alone on inputs of its own, summed. A step whose every other op took no time would take that long; its share
of the peak is the most that faster other ops can bring (#58).

    python step.py --threads 1 2
    python step.py --sides 'bf16 autocast' 'bf16 model' --out step_bf16_model.json   # appendix 14 reads it
    ATEN_CPU_CAPABILITY=avx2 taskset -c 0,1 python step.py --no-bf16 --out step_standin.json   # chapter 03 reads it
"""
import argparse, json, os, sys, tempfile, time
from collections import Counter
from pathlib import Path
import multiprocessing as mp
import numpy as np
import torch
import torch.nn.functional as F
from common import machine, provenance

def _model_and_batch(p: float | None = None):
    from bert_nb.bert import BertConfig, BertForMLM, mlm_mask
    from bert_nb.pretrain import RunArgs
    from bert_nb.rng import PCG32
    a = RunArgs(mask_p=p or RunArgs.mask_p)
    V, T, B = a.vocab_size, a.max_len, a.batch_size
    torch.manual_seed(0)
    m = BertForMLM(BertConfig(V, max_len=T, d_model=a.d_model, n_heads=a.heads, n_layers=a.layers, d_ff=a.d_ff,
                              dropout=0.0)).train()
    ids = np.random.default_rng(0).integers(5, V, (B, T)); ids[:, 0], ids[:, -1] = 2, 3
    inputs, labels = mlm_mask(ids, np.isin(ids, [0, 1, 2, 3, 4]), 4, V, a.mask_p, PCG32(0))
    return a, m, (torch.from_numpy(inputs), None, None, torch.from_numpy(labels))

def step_flops(a, labelled: float) -> float:
    """FLOP of one training step a token, from the model's shapes (a multiply-add is 2): each layer's four
    projections (4d²), its attention scores and their mix of the values (2Td), its feed-forward (2d·d_ff); the
    head's dense layer (d²) and the tied decoder (dV) at the labelled share of the positions; the backward pass
    twice the forward."""
    d, T, V = a.d_model, a.max_len, a.vocab_size
    layer = 2 * (4 * d * d + 2 * T * d + 2 * d * a.d_ff)
    return 3 * (a.layers * layer + 2 * labelled * (d * d + d * V))

def counted_flops(m, args) -> float:
    "torch's own count (FlopCounterMode) of one float32 step's forward and backward, a token: the check on the above."
    from torch.utils.flop_counter import FlopCounterMode
    with FlopCounterMode(display=False) as fc:
        logits, y = m.labelled_logits(*args)
        F.cross_entropy(logits, y).backward()
    m.zero_grad(set_to_none=True)
    return fc.get_total_flops() / args[0].numel()

def matmul_peak(dtype: torch.dtype, shapes: list[tuple[int, int, int]], reps: int = 10) -> float:
    "The best FLOP a second of (m × k) @ (k × n) products over `shapes`, `reps` each, at torch's threads now."
    best = 0.0
    for m, k, n in shapes:
        x, w = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
        x @ w  # warm up: the kernel chosen, its buffers
        for _ in range(reps):
            t = time.perf_counter(); x @ w; best = max(best, 2 * m * k * n / (time.perf_counter() - t))
    return best

def _before(m, a):
    "The step as it was before #45."
    decay = [p for p in m.parameters() if p.dim() == 2]; rest = [p for p in m.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([dict(params=decay, weight_decay=a.weight_decay), dict(params=rest, weight_decay=0.0)],
                            lr=a.lr, betas=(0.9, 0.98), eps=1e-6, foreach=False)
    def step(*args):
        logits, y = m.labelled_logits(*args)
        loss = F.cross_entropy(logits.float(), y, reduction='sum') / max(len(y), 1)
        opt.zero_grad(set_to_none=True); loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0, foreach=False); opt.step()
        return loss.item()
    return step

def _now(m, a, bf16=False, compiled=False, layers=False):
    "The step `bert-nb train` takes; `compiled`: under torch.compile, the whole step's loss or only the `layers`."
    from bert_nb.pretrain import make_optimizer, MLMLoss, _step
    from bert_nb.bert import BertLayer
    from bert_nb.command import _keep_freed_memory
    _keep_freed_memory()
    opt, loss_fn = make_optimizer(m, a.lr, a.weight_decay), MLMLoss(m)
    if compiled and layers:  # every batch is (B, T): one graph, which the three layers share
        for l in m.modules():
            if isinstance(l, BertLayer): l.compile(dynamic=False)
    elif compiled: loss_fn = torch.compile(loss_fn)
    return lambda *args: _step(loss_fn, opt, None, args, bf16)

PRODUCTS = ('mm', 'addmm', 'bmm', 'baddbmm')

def products_alone(bf16: bool, reps: int = 21) -> tuple[float, float]:
    """(seconds, FLOP) of the step's own matrix products, recorded from one step, each timed alone (the best of
    `reps`, as the peak is, at torch's threads now) on inputs of its shapes, strides and dtypes: what a step would
    take if every other op took no time."""
    from torch.utils._python_dispatch import TorchDispatchMode
    calls = Counter()
    class Record(TorchDispatchMode):  # below autocast and autograd: the products as they run, backward's too
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.overloadpacket.__name__ in PRODUCTS:
                sig = tuple(('tensor', tuple(x.shape), x.stride(), x.dtype) if isinstance(x, torch.Tensor) else x
                            for x in args)
                calls[func, sig, tuple(sorted((kwargs or {}).items()))] += 1
            return func(*args, **(kwargs or {}))
    a, m, args = _model_and_batch()
    step = _now(m, a, bf16)
    step(*args)
    with Record(): step(*args)
    seconds = flop = 0.0
    for (func, sig, kw), count in calls.items():
        xs = [torch.empty_strided(x[1], x[2], dtype=x[3]).normal_() if isinstance(x, tuple) and x[:1] == ('tensor',)
              else x for x in sig]
        func(*xs, **dict(kw))  # warm up
        times = []
        for _ in range(reps):
            t = time.perf_counter(); out = func(*xs, **dict(kw)); times.append(time.perf_counter() - t)
        seconds += count * min(times)
        flop += count * 2 * out.numel() * xs[-1].shape[-2]  # (m × k) @ (k × n): 2mkn, k the last input's rows
    return seconds, flop

def _autograd_loss(x, w, b, y, n: int):
    "The bf16 step's loss before #58: autocast's bf16 logits, cast to float32, autograd's cross-entropy."
    return F.cross_entropy(F.linear(x, w, b)[:n].float(), y[:n], reduction='sum') / max(n, 1)

def _f32_sdpa(q, k, v, bias, p: float):
    "The bf16 step's attention before #58: SDPA in float32, its output cast back to bf16."
    m = None if bias is None else bias.float()
    with torch.autocast('cpu', enabled=False):
        return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=m, dropout_p=p).to(q.dtype)

def _side(conn, name: str, threads: int):
    "A process that trains one side a step at a time, when told, and sends back its seconds."
    torch.set_num_threads(threads)
    if name.startswith('compiled'):  # a cache of its own: it compiles from cold, as a fresh machine's run does
        cache = tempfile.TemporaryDirectory(prefix='step-inductor-')  # removed when the side ends
        os.environ['TORCHINDUCTOR_CACHE_DIR'] = cache.name
    if name == 'bf16 unfused loss':
        import bert_nb.bert, bert_nb.speed
        bert_nb.bert.decoded_loss, bert_nb.speed.attend = _autograd_loss, _f32_sdpa
    if name == 'bf16 SDPA':
        import bert_nb.speed
        bert_nb.speed.F32_ATTN_T = 0  # no row trains its attention in float32
    a, m, args = _model_and_batch(0.3 if '30%' in name else None)
    if name == 'bf16 model': m = m.bfloat16()  # its products bf16 without autocast
    step = _before(m, a) if name == 'unfused' else _now(m, a, 'bf16' in name and name != 'bf16 model',
                                                          name.startswith('compiled'), 'layers' in name)
    t = time.perf_counter(); losses = [step(*args) for _ in range(3)]  # the first steps: allocation, compiling
    conn.send((time.perf_counter() - t, losses))
    while (n := conn.recv()):
        step(*args)  # untimed: waking this side's threads and refilling its caches, which a run never pauses for
        t = time.perf_counter()
        for _ in range(n): step(*args)
        conn.send((time.perf_counter() - t) / n)

def compare(sides: list[str], threads: int, peak, rounds: int = 15, calls: int = 4) -> dict:
    """Per side, its turns: (seconds a step, the matrix-product peak of its precision, `peak(side)`, timed just
    before the turn), over `rounds` alternating turns of `calls` timed steps, each turn after one untimed step (a
    turn's first step ran 10-13% slower: the side's threads had slept and its caches held other sides' data); and
    its first steps' (seconds, losses). This machine's speed drifts by a fifth for seconds at a time: a turn's own
    peak moves with it."""
    ctx, pipes, procs, first = mp.get_context('spawn'), {}, [], {}
    for name in sides:  # one at a time, so that each side's first steps (its compiling) run alone
        here, there = ctx.Pipe()
        procs.append(ctx.Process(target=_side, args=(there, name, threads), daemon=True)); procs[-1].start()
        pipes[name], first[name] = here, here.recv()
    turns = {k: [] for k in sides}
    for _ in range(rounds):
        for k, p in pipes.items():
            top = peak(k); p.send(calls); turns[k].append((p.recv(), top))
    for p in pipes.values(): p.send(0)
    for p in procs: p.join()  # gone before anything else is timed
    return {k: (turns[k], first[k]) for k in sides}

def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--threads', type=int, nargs='+', default=[1, 2])
    p.add_argument('--rounds', type=int, default=15)
    p.add_argument('--compile', action='store_true', help='add the compiled steps')
    p.add_argument('--no-bf16', action='store_true', help='leave out bf16 (the stand-in for a CPU without it)')
    p.add_argument('--out', default=str(Path(__file__).with_name('step.json')), help='where the results go')
    p.add_argument('--sides', nargs='+', help="only these sides, in this order (of the above, 'bf16 model' too)")
    ns = p.parse_args()
    from bert_nb.run import _native_bf16
    a, m, args = _model_and_batch()
    bf16 = _native_bf16(torch.device('cpu')) and not ns.no_bf16
    every = ['unfused', 'float32', 'float32, 30%'] + ['bf16 autocast', 'bf16 unfused loss', 'bf16 SDPA'] * bf16 + \
            ['compiled'] + ['compiled bf16', 'compiled layers bf16', 'bf16 model'] * bf16
    sides = ns.sides or [k for k in every if k != 'bf16 model' and (ns.compile or not k.startswith('compiled'))]
    if bad := [k for k in sides if k not in every]: p.error(f"--sides: no side {bad} here, of {every}")
    B, T, d = a.batch_size, a.max_len, a.d_model
    labelled = {p_: float((_model_and_batch(p_)[2][3] != -100).double().mean()) for p_ in (a.mask_p, 0.3)}
    flops = {k: step_flops(a, labelled[0.3 if '30%' in k else a.mask_p]) for k in dict.fromkeys(['float32', *sides])}
    counted = counted_flops(m, args)
    shapes = [(2048, 2048, 2048), (B * T, d, a.d_ff), (round(labelled[a.mask_p] * B * T), d, a.vocab_size)]
    print(f"The default run's training step, V={a.vocab_size}, d={d}, {a.layers} layers, B={B}, T={T}, "
          f"masking {a.mask_p:.0%}  [{machine()}]")
    print(f"  {flops['float32'] / 1e6:.2f} MFLOP a token counted from the shapes; torch's FlopCounterMode counts "
          f"{counted / 1e6:.2f} (its attention and loss count differently)")
    out = dict(provenance(), flops_per_token=flops, counted_flops_per_token=counted, threads={})
    for n in ns.threads:
        torch.set_num_threads(n)
        precs = [torch.float32] + [torch.bfloat16] * bf16
        name = lambda dt: 'bf16' if dt == torch.bfloat16 else 'float32'
        peak = {name(dt): matmul_peak(dt, shapes) for dt in precs}
        print(f"{n} thread{'s' * (n > 1)}: matmul peak " + ', '.join(f"{k} {v / 1e9:,.0f} GFLOP/s" for k, v in peak.items()))
        alone = {}  # timed here, where nothing else runs
        for dt in precs:
            sec, flop = products_alone(dt == torch.bfloat16)
            share = flops['float32'] * B * T / sec / peak[name(dt)]
            alone[name(dt)] = dict(ms=sec * 1e3, gflop=flop / 1e9, peak_share=share)
            print(f"  {name(dt)} products alone {sec * 1e3:5.1f} ms ({flop / 1e9:.2f} GFLOP): a step of nothing else "
                  f"would run at {share:.0%} of the {name(dt)} peak", flush=True)
        own = shapes[1:]  # a turn's peak: the model's own shapes, quick to time
        t = compare(sides, n, lambda k: matmul_peak(torch.bfloat16 if 'bf16' in k else torch.float32, own, 3),
                    ns.rounds)
        rows = {}
        base = float(np.median([x for x, _ in t[sides[0]][0]]))  # the first side's step, the others against it
        for k, (turns, (first, losses)) in t.items():
            s = float(np.median([x for x, _ in turns]))
            prec, rate = 'bf16' if 'bf16' in k else 'float32', B * T / s
            share = flops[k] * rate / peak[prec]
            turn = float(np.median([flops[k] * B * T / x / top for x, top in turns]))
            rows[k] = dict(ms=s * 1e3, best_ms=min(x for x, _ in turns) * 1e3, tokens_per_s=rate,
                           gflops=flops[k] * rate / 1e9, peak_share=share, turn_share=turn,
                           turn_peak_gflops=float(np.median([top for _, top in turns])) / 1e9,
                           first_steps_s=first, losses=losses)
            print(f"  {k:<20} {s * 1e3:7.1f} ms {rate:>9,.0f} tokens/s {flops[k] * rate / 1e9:6.0f} GFLOP/s "
                  f"{share:5.0%} of the {prec} peak ({turn:4.0%} of its turns' {rows[k]['turn_peak_gflops']:3.0f})  "
                  f"{base / s:5.2f}x {sides[0]}'s  first 3 steps {first:5.1f} s, "
                  f"losses {', '.join(f'{x:.4f}' for x in losses)}", flush=True)
        out['threads'][n] = dict(peak_gflops={k: v / 1e9 for k, v in peak.items()}, steps=rows, products_alone=alone)
    Path(ns.out).write_text(json.dumps(out, indent=1) + '\n')

if __name__ == '__main__': sys.exit(main())
