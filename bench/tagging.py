"""Truecasing, chapter 07's token task (#47): the case of each word of a lower-cased verse, learned by fine-tuned
encoders against two baselines that read no context, on all words and on the ambiguous ones, over seeds.

Each encoder (the shipped model; a random one of its size; all-MiniLM-L6-v2) is fine-tuned with chapter 05's recipe
(3 epochs of batches of 32 windows of 32 tokens) on the 4,000 training verses, its learning rate chosen on the
1,000 development verses (seed 0) from chapter 05's grid for it: a sentence task's rate need not be a token task's.
Then 3 seeds at that rate (the seed draws the head, the batch order and dropout), scored on the 2,000 test verses.
Baselines: each word's commonest case in training, and that plus a capital for the first word. The seed-0 runs of the
shipped model and MiniLM leave their test predictions, for 07's figures.

    python bench/tagging.py                 # writes bench/tagging.json
    python bench/tagging.py --models minilm --keep   # keep the test seeds already run at the rate chosen
    python bench/tagging.py --table
"""
import argparse, fcntl, json, statistics, time, warnings
from pathlib import Path
import torch
from bert_nb import KJV, BertEncoder, PCG32, WordPieceTokenizer, load_bert
from bert_nb.tagging import (CASES, TokenClassifier, ambiguous, by_form, by_table, case_table, fine_tune_tagger,
                             predict_tags, tag_scores, truecase_task)
from common import machine, minilm_dir, provenance

SAVED = Path(__file__).with_name('tagging.json')
GRIDS = {'kjv': [1e-4, 3e-4, 1e-3, 3e-3], 'random': [1e-4, 3e-4, 1e-3, 3e-3], 'minilm': [3e-5, 1e-4]}  # chapter 05's

def encoder(name: str) -> tuple[BertEncoder, WordPieceTokenizer]:
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # the MLM head dropped: reported
        where = minilm_dir() if name == 'minilm' else KJV
        enc = load_bert(where, BertEncoder)
    if name == 'random': enc = BertEncoder(enc.config, PCG32(1))  # the same size, nothing learned
    return enc, WordPieceTokenizer.from_vocab(where)

def scored(model: str, task, table, pred, split: str = 'test', **more) -> dict:
    texts, gold = [w for w, _ in getattr(task, split)], [t for _, t in getattr(task, split)]
    return dict(model=model, scores=tag_scores(gold, pred), amb_scores=tag_scores(gold, pred, keep=ambiguous(
        table, texts)), forms={w: by_form(texts, gold, pred, w) for w in ('lord', 'god')}, split=split, **more)

def one(name: str, task, table, lr: float, seed: int, split: str = 'test') -> dict:
    enc, tok = encoder(name)
    model = TokenClassifier(enc, len(CASES), rng=PCG32(seed))
    t = time.perf_counter()
    fine_tune_tagger(model, tok, task.train, lr=lr, seed=seed, max_len=32)
    pred = predict_tags(model, tok, [w for w, _ in getattr(task, split)], max_len=32)
    out = scored(name, task, table, pred, split, seed=seed, lr=lr, seconds=round(time.perf_counter() - t, 1))
    if split == 'test' and seed == 0 and name != 'random': out['predicted'] = [''.join(map(str, p)) for p in pred]
    print(name, split, lr, seed, f"{out['scores']['acc']:.4f} ambiguous {out['amb_scores']['acc']:.4f}", flush=True)
    return out

def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--models', nargs='+', default=list(GRIDS), choices=list(GRIDS))
    p.add_argument('--seeds', nargs='+', type=int, default=[0, 1, 2])
    p.add_argument('--keep', action='store_true', help='keep the test runs already saved at the rate chosen')
    p.add_argument('--table', action='store_true')
    ns = p.parse_args()
    if not ns.table:
        print(machine(), flush=True)
        task = truecase_task()
        table, texts = case_table(task.train), [w for w, _ in task.test]
        save([scored('table', task, table, by_table(table, texts)),
              scored('table+first', task, table, by_table(table, texts, first=True))])
        for name in ns.models:
            dev = [one(name, task, table, lr, 0, 'dev') for lr in GRIDS[name]]
            best = max(dev, key=lambda r: r['scores']['acc'])['lr']
            kept = {r['seed']: r for r in tests(load(), name) if r['lr'] == best} if ns.keep else {}
            save(dev + [kept.get(s) or one(name, task, table, best, s) for s in ns.seeds], replace=name)
    show(load())

def tests(runs: list[dict], model: str) -> list[dict]:
    "A model's test runs, by seed (the rows before the rates were chosen on the dev set name no split: test)."
    return sorted((r for r in runs if r['model'] == model and r.get('split', 'test') == 'test'),
                  key=lambda r: r.get('seed', 0))

def show(runs: list[dict]):
    for m in ('table', 'table+first', 'random', 'kjv', 'minilm'):
        rs = tests(runs, m)
        if not rs: continue
        line = lambda k, f: (lambda v: f"{statistics.median(v):.2%} [{' '.join(f'{x:.2%}' for x in v)}]")(
            [f(r[k]) for r in rs])
        print(f"{m:<12} all {line('scores', lambda s: s['acc'])}  ambiguous {line('amb_scores', lambda s: s['acc'])}"
              f"  F1 {' '.join(line('scores', lambda s, c=c: s['f1'][c]) for c in range(3))}")

def load() -> list[dict]: return json.loads(SAVED.read_text())['runs'] if SAVED.exists() else []

def save(new: list[dict], replace: str | None = None):
    """Add results: the baselines' by model, or every row of the model `replace` (a run again may choose another
    rate: the old rate's seeds must go too). Read the file again first, so that runs side by side keep each other's;
    a row kept from before keeps its provenance."""
    with open(SAVED.with_suffix('.lock'), 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        gone = {replace} if replace else {r['model'] for r in new}
        runs = [r for r in load() if r['model'] not in gone] + [r if 'commit' in r else r | provenance() for r in new]
        SAVED.write_text(json.dumps(dict(machine=f'{machine()}; one thread', runs=runs)) + '\n')

if __name__ == '__main__':
    torch.set_num_threads(1)
    main()
