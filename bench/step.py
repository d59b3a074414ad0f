"""The default run's training step on this machine: eager float32 against bf16 autocast and torch.compile (inductor),
with compile time counted against a 5-minute budget: what pays within `bert-nb train`'s default run (#35). Under bf16
autocast the encoder's attention trains in float32 on a CPU (`bert_nb.speed.F32_ATTN_T`); one more side keeps SDPA's
bf16 kernel, to show what that saves.

Each variant trains its own copy of the same model on the same masked batches; steps are timed in alternation so load
changes hit every side alike. "Tokens in 5 minutes" is (300 s - the variant's first-call overhead) x its steady rate."""
import copy, sys, time
import numpy as np
import torch
from bert_nb.bert import BertConfig, BertForMLM, mlm_mask
from bert_nb.pretrain import RunArgs, make_optimizer, MLMLoss
from bert_nb.rng import PCG32
import bert_nb.speed as speed
from common import interleaved, machine

def main(budget_s: float = 300.0):
    a = RunArgs()
    V, T, B = a.vocab_size, a.max_len, a.batch_size
    torch.manual_seed(0)
    base = BertForMLM(BertConfig(V, max_len=T, d_model=a.d_model, n_heads=a.heads, n_layers=a.layers, d_ff=a.d_ff,
                                 dropout=0.0)).train()
    g = np.random.default_rng(0)
    ids = g.integers(5, V, (B, T)); ids[:, 0], ids[:, -1] = 2, 3
    inputs, labels = mlm_mask(ids, np.isin(ids, [0, 1, 2, 3, 4]), 4, V, a.mask_p, PCG32(0))
    args = (torch.from_numpy(inputs), None, None, torch.from_numpy(labels))

    def variant(compiled: bool, bf16: bool, f32_attn: bool = True):
        m = copy.deepcopy(base); opt = make_optimizer(m, a.lr, a.weight_decay)
        loss_fn = MLMLoss(m)
        if compiled: loss_fn = torch.compile(loss_fn)
        def step():
            speed.F32_ATTN_T = 128 if f32_attn else 0  # the rows (of 32) whose attention trains in float32
            with torch.autocast('cpu', dtype=torch.bfloat16, enabled=bf16):
                loss = loss_fn(*args)
            opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
            return loss.item()
        return step

    sides = {'eager float32': (False, False), 'eager bf16, bf16 attention': (False, True, False),
             'eager bf16 autocast': (False, True), 'compiled float32': (True, False),
             'compiled bf16 autocast': (True, True)}
    steps, first = {}, {}
    for name, how in sides.items():
        steps[name] = variant(*how)
        t = time.perf_counter(); losses = [steps[name]() for _ in range(3)]  # compiles (forward and backward)
        first[name] = time.perf_counter() - t
        print(f"  {name:<27} first 3 steps {first[name]:6.1f} s, losses {', '.join(f'{x:.4f}' for x in losses)}", flush=True)
    t = interleaved(steps, rounds=15, calls={k: 4 for k in steps})
    print(f"\nThe default run's training step, V={V}, d={a.d_model}, {a.layers} layers, B={B}, T={T}  [{machine()}]")
    eager = t['eager float32']
    for name in sides:
        over = max(0.0, first[name] - 3 * t[name])  # what the first steps cost beyond three ordinary ones
        tokens = (budget_s - over) / t[name] * B * T
        print(f"  {name:<27} {B * T / t[name]:>9,.0f} tokens/s ({eager / t[name]:.2f}x), overhead {over:5.1f} s, "
              f"{tokens / 1e6:5.2f} M tokens in {budget_s / 60:g} minutes ({tokens / (budget_s / eager * B * T):.2f}x)")

if __name__ == '__main__': sys.exit(main())
