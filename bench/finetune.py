"""Fine-tuning on the verse tasks of chapter 05 (#37) and its pair task (#47: does verse B follow verse A?): what
pretraining buys, against baselines, over seeds.

For each encoder (the shipped model; a random one of its size; all-MiniLM-L6-v2; a random one of ELECTRA's size) the learning rate is chosen on the
development set (seed 0) from a grid around BERT's advice; then the encoder is fine-tuned with it under 3 seeds (1 for
MiniLM, 15 times the size), the seed drawing the pooler, the classifier, the batch order and dropout, and scored on
the 2,000 test verses. Baselines: the majority class and a bag-of-words logistic regression. The shipped model's fine-tuned section classifier also
leaves its test predictions, for 05's confusion matrix and its hard verses.

    python bench/finetune.py                 # writes bench/finetune.json
    python bench/finetune.py --table
"""
import argparse, fcntl, json, statistics, sys, time, warnings
from pathlib import Path
from bert_nb import KJV, BertEncoder, PCG32, WordPieceTokenizer, load_bert
from bert_nb.finetune import Classifier, accuracy, bag_of_words, fine_tune, majority, pair_task, predict, verse_task
from common import machine, minilm_dir, provenance
from electra import CONFIG as SMALL  # chapter 04's encoders: the never-pretrained line of its comparison

SAVED = Path(__file__).with_name('finetune.json')
GRIDS = {'kjv': [1e-4, 3e-4, 1e-3, 3e-3], 'random': [1e-4, 3e-4, 1e-3, 3e-3], 'minilm': [3e-5, 1e-4],
         'random-small': [1e-4, 3e-4, 1e-3, 3e-3]}
# MiniLM is 7 times the shipped model: one seed (its steps take about 20 times as long on 2 cores)
SEEDS = {'kjv': [0, 1, 2], 'random': [0, 1, 2], 'minilm': [0], 'random-small': [0, 1, 2]}

def encoder(name: str) -> tuple[BertEncoder, WordPieceTokenizer]:
    "The encoder to fine-tune, with a pooler (drawn from PCG32(0) where the checkpoint has none), and its tokenizer."
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        where = minilm_dir() if name == 'minilm' else KJV
        enc = load_bert(where, BertEncoder, pooler=True)
    if name == 'random': enc = BertEncoder(enc.config, PCG32(1), pooler=True)  # the same size, nothing learned
    if name == 'random-small': enc = BertEncoder(SMALL, PCG32(1), pooler=True)
    return enc, WordPieceTokenizer.from_vocab(where)

def one(name: str, task, lr: float, seed: int, test: bool) -> dict:
    enc, tok = encoder(name)
    clf = Classifier(enc, len(task.labels), rng=PCG32(seed))
    t = time.perf_counter()
    fine_tune(clf, tok, task.train, lr=lr, seed=seed, max_len=32)  # every encoder reads the first 32 tokens
    pairs = task.test if test else task.dev
    logits = predict(clf, tok, [t for t, _ in pairs], max_len=32)
    out = dict(model=name, task=task.name, lr=lr, seed=seed, split='test' if test else 'dev',
               acc=accuracy(logits, pairs), seconds=round(time.perf_counter() - t, 1))
    if test and name == 'kjv' and seed == 0: out['predicted'] = logits.argmax(1).tolist()
    return out

def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--models', nargs='+', default=list(GRIDS), choices=list(GRIDS))
    p.add_argument('--tasks', nargs='+', default=['testament', 'section', 'next'],
                   choices=['testament', 'section', 'next'])
    p.add_argument('--table', action='store_true')
    ns = p.parse_args()
    if not ns.table:
        print(machine())
        for name in ns.tasks:
            task = pair_task() if name == 'next' else verse_task(name)
            save([dict(model='majority', task=name, acc=majority(task)),
                  dict(model='bag of words', task=name, **dict(zip(('acc', 'decay'), bag_of_words(
                      WordPieceTokenizer.from_vocab(KJV), task))))])
            for model in ns.models:
                dev = [one(model, task, lr, 0, False) for lr in GRIDS[model]]
                best = max(dev, key=lambda r: r['acc'])['lr']
                for r in dev: print(model, name, 'dev', r['lr'], f"{r['acc']:.3f}", flush=True)
                runs = [one(model, task, best, seed, True) for seed in SEEDS[model]]
                for r in runs: print(model, name, 'test', r['lr'], r['seed'], f"{r['acc']:.3f}", flush=True)
                save(dev + runs)
    table(load())

def table(results: list[dict]):
    for task in ('testament', 'section', 'next'):
        print(f"\n{task}")
        for model in ('majority', 'bag of words', 'random-small', 'random', 'kjv', 'minilm'):
            rs = [r for r in results if r['task'] == task and r['model'] == model and r.get('split', 'test') == 'test']
            if not rs: continue
            accs = [r['acc'] for r in sorted(rs, key=lambda r: r.get('seed', 0))]
            print(f"  {model:<13} {statistics.median(accs):.1%}  [{' '.join(f'{a:.1%}' for a in accs)}]"
                  + (f"  lr {rs[0]['lr']:g}" if 'lr' in rs[0] else ''))

def load() -> list[dict]: return json.loads(SAVED.read_text())['runs'] if SAVED.exists() else []

def save(new: list[dict]):
    """Add results, replacing every earlier one of the same model and task (a run again may choose another rate: the
    old rate's seeds must go too); read the file again first, so that runs side by side keep each other's."""
    done = {(n['model'], n['task']) for n in new}
    with open(SAVED.with_suffix('.lock'), 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        keep = [r for r in load() if (r['model'], r['task']) not in done]
        SAVED.write_text(json.dumps(dict(machine=machine(), runs=keep + [r | provenance() for r in new])) + '\n')

if __name__ == '__main__': sys.exit(main())
