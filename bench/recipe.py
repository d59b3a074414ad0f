"""The recipe search of #35: what a setting learns from a fixed number of tokens, over several seeds.

A budget in minutes gives a slower machine fewer tokens, so a recipe is judged by held-out accuracy at a token count,
never by one run on one machine. Every run trains on the same prepared corpus (split and vocabulary of seed 0) for
`--steps` that come to the token count, and every model is scored on the same held-out verses with the same blanks
(PCG32(0, EVAL), p = 0.15); the seed changes the initial weights, the batch order and the training masks.

    python bench/recipe.py --tokens 5e6 --seeds 0 1 2 --only before mask40-b64
    python bench/recipe.py --table            # the table of every result saved so far (bench/recipe.json)
"""
import argparse, fcntl, json, statistics, sys, tempfile, time, warnings
from dataclasses import replace
from pathlib import Path
from bert_nb.pretrain import RunArgs, evaluate, load_model, DEFAULT_CORPUS
from bert_nb.command import train, frequency_baseline, LEARNED
from bert_nb.data import prepare_data, load_data
from common import machine

SAVED = Path(__file__).with_name('recipe.json')

# Each candidate changes the defaults before #35 by these fields; the names are the table's rows. Runs are float32
# unless a candidate says bf16 (a --steps run's default).
BEFORE = dict(mask_p=0.15, batch_size=128, lr=2e-3, warmup=0.05, freq_bias=False)
CANDIDATES = {
    'before': {},
    'mask30': dict(mask_p=0.3),
    'mask40': dict(mask_p=0.4),
    'mask30-lr3e-3': dict(mask_p=0.3, lr=3e-3),
    'mask30-b64': dict(mask_p=0.3, batch_size=64),
    'mask40-b64': dict(mask_p=0.4, batch_size=64),
    'mask30-b64-lr3e-3': dict(mask_p=0.3, batch_size=64, lr=3e-3),
    'mask30-warm02': dict(mask_p=0.3, warmup=0.02),
    'mask40-b32': dict(mask_p=0.4, batch_size=32),
    'mask50-b64': dict(mask_p=0.5, batch_size=64),
    'mask40-b64-warm10': dict(mask_p=0.4, batch_size=64, warmup=0.1),
    'mask40-b64-lr1.5e-3': dict(mask_p=0.4, batch_size=64, lr=1.5e-3),
    'mask40-b64-bf16': dict(mask_p=0.4, batch_size=64, bf16=True),
    'mask40-b64-l3': dict(mask_p=0.4, batch_size=64, layers=3),
    'mask40-b64-l3-warm10': dict(mask_p=0.4, batch_size=64, layers=3, warmup=0.1),
    'mask40-b64-l3-bias': dict(mask_p=0.4, batch_size=64, layers=3, freq_bias=True),
}

def run(name: str, tokens: float, seed: int, data: Path) -> dict:
    "One run of a candidate for `tokens` (rounded to whole steps), scored on seed 0's held-out blanks."
    a = replace(RunArgs(), **BEFORE, data=str(data), minutes=None, evals=1, seed=seed, bf16=False)
    a = replace(a, **CANDIDATES[name])
    a.steps = max(1, round(tokens / (a.batch_size * a.max_len)))  # packed rows: every row but the last is full
    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.simplefilter('ignore')  # a run on the plateau warns; the table says so in its own column
        a.out = str(Path(d) / 'run')
        t = time.perf_counter()
        train(a, progress=False)
        m = json.loads((Path(a.out) / 'metrics.json').read_text())
        model, tok = load_model(Path(a.out) / 'model')
        held = load_data(data, a.max_len)
        ev = evaluate(model, tok, held['held_rows'], held['held_lens'], seed=0)
        _, base = frequency_baseline(tok, held['held_rows'])
    return dict(name=name, tokens=tokens, seed=seed, steps=a.steps, seen=m['tokens'], acc=ev['acc'],
                loss=ev['loss'], learned=ev['acc'] >= base + LEARNED, tokens_per_s=m['tokens_per_s'],
                seconds=round(time.perf_counter() - t, 1), machine=machine())

def table(results: list[dict]):
    "Median, spread and plateau count of every (candidate, tokens) with its seeds."
    groups = {}
    for r in results: groups.setdefault((r['tokens'], r['name']), []).append(r)
    print(f"{'tokens':>6} {'recipe':<16} {'seeds':>5} {'median':>7} {'min':>6} {'max':>6}  past plateau  accuracies")
    for (tokens, name), rs in sorted(groups.items()):
        accs = [r['acc'] for r in sorted(rs, key=lambda r: r['seed'])]
        print(f"{tokens / 1e6:>5.1f}M {name:<16} {len(rs):>5} {statistics.median(accs):>7.1%} {min(accs):>6.1%} "
              f"{max(accs):>6.1%}  {sum(r['learned'] for r in rs):>5}/{len(rs):<6}  "
              + ' '.join(f'{x:.1%}' for x in accs))

def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--tokens', type=float, nargs='+', default=[5e6])
    p.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    p.add_argument('--only', nargs='+', choices=list(CANDIDATES), default=list(CANDIDATES))
    p.add_argument('--table', action='store_true', help='print the saved results and exit')
    ns = p.parse_args()
    if not ns.table:
        print(machine())
        with tempfile.TemporaryDirectory() as d:
            data = Path(d) / 'data'
            prepare_data([DEFAULT_CORPUS], data, say=lambda s: None)
            for tokens in ns.tokens:
                for name in ns.only:
                    for seed in ns.seeds:
                        r = run(name, tokens, seed, data)
                        print(f"{name} {tokens / 1e6:.1f}M seed {seed}: {r['acc']:.1%} ({r['seconds']:.0f} s, "
                              f"{r['tokens_per_s']:,.0f} tokens/s)", flush=True)
                        save(r)
    table(load())

def load() -> list[dict]: return json.loads(SAVED.read_text()) if SAVED.exists() else []

def save(r: dict):
    "Add (or replace) one result; read the file again first, so that searches run side by side keep each other's."
    with open(SAVED.with_suffix('.lock'), 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        keep = [s for s in load() if (s['name'], s['tokens'], s['seed']) != (r['name'], r['tokens'], r['seed'])]
        SAVED.write_text(json.dumps(keep + [r], indent=1) + '\n')

if __name__ == '__main__': sys.exit(main())
