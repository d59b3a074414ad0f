"""The recipe search of #35 and #45: what a setting learns from a fixed number of tokens, or in a fixed time, over seeds.

A budget in minutes gives a slower machine fewer tokens, so a recipe is judged by held-out accuracy at a token count,
never by one run on one machine. Every run trains on the same prepared corpus (split and vocabulary of seed 0) for
`--steps` that come to the token count, and every model is scored on the same held-out verses with the same blanks
(PCG32(0, EVAL), p = 0.15); the seed changes the initial weights, the batch order and the training masks.

A recipe chosen per token on a bf16 machine need not be the best per second on one without bf16, where the head's
cost at 40% masking no longer hides behind a fast step (#45). `--seconds S` gives every candidate the same budget
(a `--minutes` run, `make demo`'s schedule and evaluations), in float32, on cores of its own: `--jobs 2` runs two at
a time, each pinned to one core, `--threads 2` one at a time on two, so that every run meets the same machine.

    python bench/recipe.py --tokens 5e6 --seeds 0 1 2 --only before mask40-b64
    ATEN_CPU_CAPABILITY=avx2 python bench/recipe.py --seconds 180 --jobs 2 --only mask40-b64-l3-bias mask40-b64-bias
    python bench/recipe.py --tokens 8.2e6 --share 8 --seeds 0 --jobs 2 --only l4-w192 l4-w192-drop01
    python bench/recipe.py --score runs/kjv-drop --only l4-w192-drop01   # a finished hour's run of that candidate
    python bench/recipe.py --table            # the table of every result saved so far (bench/recipe.json)

An hour's run passes over the training split 71 times, a search run at 16 M tokens 17 times: what overfits only in
the long run shows there. `--share K` trains on every K-th training line (the same vocabulary, the same held-out
blanks), so that 1/K of the tokens make as many passes: a small stand-in for the long run. Every result records its
accuracy on as many of its own training rows (`train_acc`) beside the held-out one: their gap is what it memorised.
"""
import argparse, fcntl, json, os, statistics, sys, tempfile, time, warnings
import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, replace
from pathlib import Path
import numpy as np, torch
from bert_nb.pretrain import RunArgs, evaluate, load_model, held_mask, DEFAULT_CORPUS
from bert_nb.run import train, frequency_baseline, LEARNED
from bert_nb.command import _keep_freed_memory
from bert_nb.data import prepare_data, load_data
from bert_nb.files import corpus_files, corpus_lines
from common import machine, provenance

SAVED = Path(__file__).with_name('recipe.json')
# A finished hour's run is also scored on these blank draws (PCG32(s, EVAL)), since one draw of about 2,900 blanks
# moves a model's figure by two points: their mean is the firmer comparison
DRAWS = range(8)

# Each candidate changes the defaults before #35 by these fields; the names are the table's rows. Runs are float32
# unless a candidate says bf16 (a --steps run's default).
BEFORE = dict(mask_p=0.15, batch_size=128, lr=2e-3, warmup=0.05, freq_bias=False, layers=2)
WIDE = dict(mask_p=0.4, batch_size=64, layers=4, d_model=256, heads=4, d_ff=1024, freq_bias=True, bf16=True)
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
    'mask40-b64-l3-bias': dict(mask_p=0.4, batch_size=64, layers=3, freq_bias=True),  # the defaults since #35
    'mask40-b64-bias': dict(mask_p=0.4, batch_size=64, freq_bias=True),
    'mask30-b64-l3-bias': dict(mask_p=0.3, batch_size=64, layers=3, freq_bias=True),
    'mask30-b64-bias': dict(mask_p=0.3, batch_size=64, freq_bias=True),
    'mask40-b128-l3-bias': dict(mask_p=0.4, batch_size=128, layers=3, freq_bias=True),
    'mask40-b32-l3-bias': dict(mask_p=0.4, batch_size=32, layers=3, freq_bias=True),
    # The shipped model's search (bf16, as `make kjv` trains): width, context and learning rate at four layers
    'l4-w256': dict(WIDE),
    'l4-w256-len128': dict(WIDE, max_len=128, batch_size=16),
    'l4-w256-lr1e-3': dict(WIDE, lr=1e-3),
    'l4-w192-len128': dict(WIDE, d_model=192, heads=3, d_ff=768, max_len=128, batch_size=16),
    'l4-w192': dict(WIDE, d_model=192, heads=3, d_ff=768),
    'l4-w192-lr1e-3': dict(WIDE, d_model=192, heads=3, d_ff=768, lr=1e-3),
    'l6-w192': dict(WIDE, d_model=192, heads=3, d_ff=768, layers=6),
    'l4-w192-len64': dict(WIDE, d_model=192, heads=3, d_ff=768, max_len=64, batch_size=32),
    'l4-w192-drop01': dict(WIDE, d_model=192, heads=3, d_ff=768, dropout=0.1),
    'l4-w192-wd01': dict(WIDE, d_model=192, heads=3, d_ff=768, weight_decay=0.1),
    'l4-w192-wd03': dict(WIDE, d_model=192, heads=3, d_ff=768, weight_decay=0.3),
    'l4-w192-shift': dict(WIDE, d_model=192, heads=3, d_ff=768, shift=True),
    'l4-w192-wd03-shift': dict(WIDE, d_model=192, heads=3, d_ff=768, weight_decay=0.3, shift=True),
    'l4-w192-len64-wd03-shift': dict(WIDE, d_model=192, heads=3, d_ff=768, max_len=64, batch_size=32,
                                     weight_decay=0.3, shift=True),
    'l4-w192-mask20': dict(WIDE, d_model=192, heads=3, d_ff=768, mask_p=0.2),
    'l4-w192-mask50': dict(WIDE, d_model=192, heads=3, d_ff=768, mask_p=0.5),
}

def share_data(data: Path, k: int) -> Path:
    "Every k-th training line of the prepared corpus `data`, prepared beside it with its vocabulary."
    lines = list(corpus_lines(corpus_files([DEFAULT_CORPUS])))
    train = [l for l, held in zip(lines, held_mask(len(lines), 0)) if not held][::k]
    (text := data.with_name(f'share-{k}.txt')).write_text('\n'.join(train) + '\n')
    return prepare_data([text], data.with_name(f'share-{k}'), vocab=data / 'vocab.txt', say=lambda s: None)

def own_rows(model, tok, rows, n: int) -> dict:
    "Loss and accuracy on n of the model's own training rows, spread as load_data spreads the held-out sample."
    pick = np.unique(np.linspace(0, len(rows) - 1, n).round().astype(np.int64))
    return evaluate(model, tok, *rows.take(pick), seed=0)

def run(name: str, tokens: float | None, seed: int, data: Path, seconds: float | None = None, share: int = 1) -> dict:
    """One run of a candidate for `tokens` (rounded to whole steps) or for a budget of `seconds` (float32, the
    default evaluations), on every `share`-th training line, scored on seed 0's held-out blanks and on as many of
    its own training rows."""
    train_on = data if share == 1 else data.with_name(f'share-{share}')
    a = replace(RunArgs(), **BEFORE, data=str(train_on), minutes=None, evals=1, seed=seed, bf16=False)
    a = replace(a, **CANDIDATES[name])
    if seconds: a = replace(a, minutes=seconds / 60, evals=RunArgs().evals)
    else: a.steps = max(1, round(tokens / (a.batch_size * a.max_len)))  # packed rows: every row but the last is full
    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.simplefilter('ignore')  # a run on the plateau warns; the table says so in its own column
        a.out = str(Path(d) / 'run')
        t = time.perf_counter()
        train(a, progress=False)
        m = json.loads((Path(a.out) / 'metrics.json').read_text())
        model, tok = load_model(Path(a.out) / 'model')
        held, rows = load_data(data, a.max_len), load_data(train_on, a.max_len)['rows']
        ev = evaluate(model, tok, held['held_rows'], held['held_lens'], seed=0)
        seen = own_rows(model, tok, rows, len(held['held_rows']))
        _, base = frequency_baseline(tok, held['held_rows'])
    return dict(name=name, tokens=tokens, seconds_budget=seconds, seed=seed, share=share, steps=m['steps'],
                seen=m['tokens'], acc=ev['acc'], loss=ev['loss'], train_acc=seen['acc'],
                learned=ev['acc'] >= base + LEARNED,
                tokens_per_s=m['tokens_per_s'], used=m.get('used'), seconds=round(time.perf_counter() - t, 1),
                **provenance(), threads=torch.get_num_threads(), aten=os.environ.get('ATEN_CPU_CAPABILITY', 'default'))

def score(out: Path, name: str, data: Path) -> dict:
    """A finished `bert-nb train --steps` run of candidate `name` (its args.json checked against the candidate's
    fields) scored as run() scores its own: an hour's run is too long to run again here."""
    args = {'shift': False, **json.loads((out / 'args.json').read_text())}  # a run from before the shift: none
    want = asdict(replace(RunArgs(), **{**BEFORE, 'bf16': False, **CANDIDATES[name]}))  # as run() trains it
    where = {'data', 'minutes', 'steps', 'compile', 'evals', 'snapshots', 'seed', 'out'}  # the bundled corpus only
    if differ := {k: (args.get(k), v) for k, v in want.items() if k not in where and args.get(k) != v}:
        raise SystemExit(f"{out} is not a run of {name}: (its, the candidate's) {differ}")
    m = json.loads((out / 'metrics.json').read_text())
    model, tok = load_model(out / 'model')
    held, rows = load_data(data, args['max_len']), load_data(out / 'data', args['max_len'])['rows']
    ev = evaluate(model, tok, held['held_rows'], held['held_lens'], seed=0)
    seen = own_rows(model, tok, rows, len(held['held_rows']))
    _, base = frequency_baseline(tok, held['held_rows'])
    draws = {}
    for n in sorted({32, args['max_len']}):  # its own rows, and the rows of 32 every other hour's model reads
        d = load_data(data, n)
        draws[str(n)] = [evaluate(model, tok, d['held_rows'], d['held_lens'], seed=s)['acc'] for s in DRAWS]
    return dict(name=name, tokens=float(m['tokens']), seconds_budget=None, seed=args['seed'], share=1,
                steps=m['steps'], seen=m['tokens'], acc=ev['acc'], loss=ev['loss'], train_acc=seen['acc'],
                learned=ev['acc'] >= base + LEARNED, tokens_per_s=m['tokens_per_s'], seconds=m['wall_s'],
                **provenance(), threads=torch.get_num_threads(), aten=os.environ.get('ATEN_CPU_CAPABILITY', 'default'),
                run=f"a finished run of {m['steps']} steps", draws=draws)

def _pin(cores):
    "A job's process: cores of its own, a thread on each, freed memory kept (as `bert-nb train` does)."
    mine = cores.get()
    os.sched_setaffinity(0, mine)
    torch.set_num_threads(len(mine))
    _keep_freed_memory()

def table(results: list[dict]):
    "Median, spread and plateau count of every (candidate, tokens) and (candidate, seconds) with its seeds."
    groups = {}
    for r in results:
        groups.setdefault((r.get('seconds_budget') or 0, r['tokens'] or 0, r.get('share', 1), r['name']), []).append(r)
    print(f"{'budget':>6} {'recipe':<19} {'seeds':>5} {'median':>7} {'min':>6} {'max':>6}  past plateau  "
          "accuracies (tokens seen)")
    for (secs, tokens, share, name), rs in sorted(groups.items()):
        rs = sorted(rs, key=lambda r: r['seed'])
        accs = [r['acc'] for r in rs]
        seen = '  (' + ' '.join(f"{r['seen'] / 1e6:.2f}M" for r in rs) + ')' if secs else ''
        name += f' 1/{share}' if share > 1 else ''
        print(f"{f'{secs:g} s' if secs else f'{tokens / 1e6:.1f}M':>6} {name:<19} {len(rs):>5} "
              f"{statistics.median(accs):>7.1%} {min(accs):>6.1%} {max(accs):>6.1%}  "
              f"{sum(r['learned'] for r in rs):>5}/{len(rs):<6}  " + ' '.join(f'{x:.1%}' for x in accs) + seen)

def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--tokens', type=float, nargs='+', default=[5e6])
    p.add_argument('--seconds', type=float, nargs='+', help='budgets instead of token counts (float32)')
    p.add_argument('--jobs', type=int, default=1, help='runs at a time, each on cores of its own')
    p.add_argument('--threads', type=int, default=1, help="each run's cores (a thread on each)")
    p.add_argument('--share', type=int, default=1, help='train on every SHARE-th training line (1: all)')
    p.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    p.add_argument('--only', nargs='+', choices=list(CANDIDATES), default=list(CANDIDATES))
    p.add_argument('--score', type=Path, help="a finished run of the one candidate --only names: score it, save it")
    p.add_argument('--table', action='store_true', help='print the saved results and exit')
    ns = p.parse_args()
    if ns.share < 1: p.error(f'--share must be 1 or more, got {ns.share}')
    if ns.score and len(ns.only) != 1:
        p.error(f'--score needs the one candidate it ran (--only NAME), got {len(ns.only)} candidates')
    if ns.score and not all((ns.score / f).exists() for f in ('args.json', 'metrics.json', 'model', 'data')):
        p.error(f'--score needs a finished run directory (args.json, metrics.json, model/, data/), got {ns.score}')
    if ns.score:
        with tempfile.TemporaryDirectory() as d:
            data = prepare_data([DEFAULT_CORPUS], Path(d) / 'data', say=lambda s: None)
            r = score(ns.score, ns.only[0], data)
        print(f"{r['name']} {r['seen'] / 1e6:.1f}M: {r['acc']:.1%}, its own rows {r['train_acc']:.1%}")
        save(r); return table(load())
    if not ns.table:
        print(machine())
        ctx = mp.get_context('spawn')
        cores = ctx.Queue()
        free = sorted(os.sched_getaffinity(0))
        for j in range(ns.jobs): cores.put(set(free[j * ns.threads:(j + 1) * ns.threads]))
        with tempfile.TemporaryDirectory() as d, \
                ProcessPoolExecutor(ns.jobs, ctx, initializer=_pin, initargs=(cores,)) as pool:
            data = Path(d) / 'data'
            prepare_data([DEFAULT_CORPUS], data, say=lambda s: None)
            if ns.share > 1: share_data(data, ns.share)
            budgets = [(None, s) for s in ns.seconds] if ns.seconds else [(t, None) for t in ns.tokens]
            todo = [pool.submit(run, name, tokens, seed, data, secs, ns.share) for tokens, secs in budgets
                    for name in ns.only for seed in ns.seeds]
            for f in as_completed(todo):
                r = f.result()
                at = f"{r['seconds_budget']:g} s" if r['seconds_budget'] else f"{r['tokens'] / 1e6:.1f}M"
                share = f" on 1/{r['share']} of the lines" if r['share'] > 1 else ''
                print(f"{r['name']} {at}{share} seed {r['seed']}: {r['acc']:.1%}, its own rows {r['train_acc']:.1%} "
                      f"({r['seen'] / 1e6:.2f}M tokens, "
                      f"{r['seconds']:.0f} s, {r['tokens_per_s']:,.0f} tokens/s)", flush=True)
                save(r)
    table(load())

def load() -> list[dict]: return json.loads(SAVED.read_text()) if SAVED.exists() else []

def save(r: dict):
    "Add (or replace) one result; read the file again first, so that searches run side by side keep each other's."
    with open(SAVED.with_suffix('.lock'), 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        key = lambda s: (s['name'], s['tokens'], s.get('seconds_budget'), s.get('share', 1), s['seed'])
        keep = [s for s in load() if key(s) != key(r)]
        SAVED.write_text(json.dumps(keep + [r], indent=1) + '\n')

if __name__ == '__main__': sys.exit(main())
