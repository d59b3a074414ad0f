"""ELECTRA against MLM at the same compute (#37), over several seeds.

Both pretrain an encoder of the shipped model's size (2 layers, 128 wide, vocab 8192) on the bundled corpus packed
into rows of 32, in the same batch order, and both are judged the same way: the encoder, with a pooler drawn from
PCG32(0), fine-tuned on chapter 05's verse tasks (testament, section) and scored on their 2,000 test verses.
Compute is matched in floating-point operations, not in seconds: `torch.utils.flop_counter` counts one training
step of each (forward and backward, averaged over 8 batches, since the number of masked positions varies), and MLM
gets the steps that spend what ELECTRA's spend. The seed draws the initial weights, the batch order and the masks.

    python bench/electra.py --steps 2000 --seeds 0 1 2     # writes bench/electra.json
    python bench/electra.py --table
"""
import argparse, fcntl, json, statistics, sys, time, warnings
from pathlib import Path
import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode
from bert_nb import KJV, BertConfig, BertEncoder, BertForMLM, PCG32, WordPieceTokenizer, kjv_verses, mlm_mask, special_ids
from bert_nb.pretrain import INIT, ORDER, Batches, lr_factor, make_optimizer, pack_rows, sinusoid_positions
from bert_nb.electra import Electra, SHARES, electra_loss, train_electra
from bert_nb.finetune import Classifier, accuracy, fine_tune, predict, verse_task
from common import machine, provenance

SAVED = Path(__file__).with_name('electra.json')
CONFIG = BertConfig(8192, max_len=32, d_model=128, n_heads=2, n_layers=2, d_ff=512, dropout=0.0)
MLM = dict(p=0.4, lr=2e-3, warmup=0.05)  # the package's pretraining defaults (#35)
ELECTRA = dict(p=0.3, lr=2e-3, warmup=0.05)   # 0.3: see chapter 04, section 6
FINETUNE = dict(epochs=3, batch_size=32, lr=1e-3)  # chapter 05's recipe for this size

def mlm_step(model, ids, tok, rng, p):
    inputs, labels = mlm_mask(ids, np.isin(ids, special_ids(tok)), tok.mask_id, len(tok), p, rng)
    return model.loss(torch.from_numpy(inputs), None, torch.from_numpy(ids != tok.pad_id), torch.from_numpy(labels))

def electra_step(model, ids, tok, rng, p):
    inputs, labels = mlm_mask(ids, np.isin(ids, special_ids(tok)), tok.mask_id, len(tok), p, rng, shares=SHARES)
    return electra_loss(model, torch.from_numpy(inputs), torch.from_numpy(labels),
                        torch.from_numpy(ids != tok.pad_id), rng).loss

def step_flops(model, step, rows, tok, p) -> float:
    "Mean floating-point operations of a training step's forward and backward, over 8 batches of 64 rows."
    total, rng = 0, PCG32(99)
    for b in range(8):
        with FlopCounterMode(display=False) as count:
            step(model, rows[b * 64:(b + 1) * 64], tok, rng, p).backward()
        total += count.get_total_flops()
    model.zero_grad(set_to_none=True)
    return total / 8

def train_mlm(model, rows, steps, tok, rng, order, p, lr, warmup, batch_size=64):
    "The MLM side, the loop of train_electra with BertForMLM's loss."
    opt = make_optimizer(model, lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, steps, max(1, round(warmup * steps))))
    batches = Batches(len(rows), batch_size, order)
    for _ in range(steps):
        loss = mlm_step(model, rows[batches.next()], tok, rng, p)
        opt.zero_grad(set_to_none=True); loss.backward(); opt.step(); sched.step()

def judged(encoder: BertEncoder, tok, tasks) -> dict:
    "Test accuracy of the encoder fine-tuned on each task (a fresh pooler and classifier from PCG32(0))."
    out = {}
    for task in tasks:
        enc = BertEncoder(CONFIG, PCG32(0), pooler=True)
        enc.load_state_dict(encoder.state_dict(), strict=False)  # all but the pooler
        clf = Classifier(enc, len(task.labels), rng=PCG32(0))
        fine_tune(clf, tok, task.train, **FINETUNE)
        out[task.name] = accuracy(predict(clf, tok, [t for t, _ in task.test]), task.test)
    return out

def run(seed: int, steps: int, rows, tok, tasks) -> list[dict]:
    electra = Electra(CONFIG, gen_layers=1, gen_ff=256, rng=PCG32(seed, INIT))
    mlm = BertForMLM(CONFIG, PCG32(seed, INIT))
    for enc in (electra.gen.encoder, mlm.encoder): sinusoid_positions(enc, 0.1)  # as pretraining starts
    flops = dict(electra=step_flops(electra, electra_step, rows, tok, ELECTRA['p']),
                 mlm=step_flops(mlm, mlm_step, rows, tok, MLM['p']))
    mlm_steps = round(steps * flops['electra'] / flops['mlm'])
    t = time.perf_counter()
    hist = train_electra(electra, rows, steps, tok, PCG32(seed, 0), PCG32(seed, ORDER), **ELECTRA)
    t_electra, t = time.perf_counter() - t, time.perf_counter()
    train_mlm(mlm, rows, mlm_steps, tok, PCG32(seed, 0), PCG32(seed, ORDER), **MLM)
    t_mlm = time.perf_counter() - t
    curves = {k: np.asarray(v[:len(v) // 20 * 20]).reshape(-1, 20).mean(1).round(4).tolist()
              for k, v in hist.items()}  # means of 20 steps
    return [dict(recipe='electra', seed=seed, steps=steps, flops_per_step=flops['electra'],
                 seconds=round(t_electra, 1), curves=curves, **judged(electra.disc, tok, tasks)),
            dict(recipe='mlm', seed=seed, steps=mlm_steps, flops_per_step=flops['mlm'],
                 seconds=round(t_mlm, 1), **judged(mlm.encoder, tok, tasks))]

def table(results: list[dict]):
    print(f"{'recipe':<8} {'steps':>6} {'GFLOP':>8} {'seeds':>5}  {'testament':>22}  {'section':>22}")
    for recipe in ('electra', 'mlm'):
        rs = sorted((r for r in results if r['recipe'] == recipe), key=lambda r: r['seed'])
        if not rs: continue
        cell = lambda k: f"{statistics.median(r[k] for r in rs):.1%} [" + ' '.join(f"{r[k]:.1%}" for r in rs) + "]"
        print(f"{recipe:<8} {rs[0]['steps']:>6} {rs[0]['steps'] * rs[0]['flops_per_step'] / 1e9:>8,.0f} "
              f"{len(rs):>5}  {cell('testament'):>22}  {cell('section'):>22}")

def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--steps', type=int, default=2000, help="ELECTRA's steps; MLM's follow from the FLOPs")
    p.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    p.add_argument('--table', action='store_true', help='print the saved results and exit')
    ns = p.parse_args()
    if not ns.table:
        print(machine())
        tok = WordPieceTokenizer.from_vocab(KJV)
        rows, _ = pack_rows(tok, [v.text for v in kjv_verses()], CONFIG.max_len)
        tasks = [verse_task('testament'), verse_task('section')]
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            for seed in ns.seeds:
                new = run(seed, ns.steps, rows, tok, tasks)
                for r in new: print(r['recipe'], seed, r['steps'], r['testament'], r['section'], flush=True)
                save(new)
    table(load())

def load() -> list[dict]: return json.loads(SAVED.read_text())['runs'] if SAVED.exists() else []

def save(new: list[dict]):
    "Add (or replace) a seed's results; read the file again first, so that runs side by side keep each other's."
    with open(SAVED.with_suffix('.lock'), 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        keep = [r for r in load() if (r['recipe'], r['seed']) not in {(n['recipe'], n['seed']) for n in new}]
        SAVED.write_text(json.dumps(dict(machine=machine(), runs=keep + [r | provenance() for r in new])) + '\n')

if __name__ == '__main__': sys.exit(main())
