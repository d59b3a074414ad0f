"""Chapter 06's ModernBERT against the package's BERT at equal size, trained by the same command on the same tokens.

Each run is `bert-nb train --steps N` with the package's defaults (d 128, 3 layers, 2 heads, rows of 32, batches of
64, masking 40%, lr 2e-3), `--arch bert` or `--arch modernbert` (its GeGLU 2/3 of --d-ff wide: the same
parameters), for a fixed number of tokens and several seeds; float32 (a --steps run), one thread per run, `--jobs`
runs at a time. Then the length test: each ModernBERT run's model evaluated on held-out rows of 64 and 128 tokens
(BERT's position table has 32 rows: it cannot read them). Results accumulate in bench/arch.json, which chapter 06 reads.

    python bench/arch.py --tokens 2.5e6 5e6 10e6 --seeds 0 1 2 --jobs 2
"""
import argparse, json, os, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from common import machine, provenance

SAVED = Path(__file__).with_name('arch.json')
ROWS = 64 * 32  # tokens a step: the default batch of 64 rows of 32

def run(arch: str, tokens: float, seed: int, root: Path) -> dict:
    out = root / f'{arch}-{tokens:g}-{seed}'
    steps = round(tokens / ROWS)
    t = time.time()
    subprocess.run([sys.executable, '-m', 'bert_nb.command', 'train', '--arch', arch, '--steps', str(steps),
                    '--seed', str(seed), '--out', str(out), '--quiet'], check=True, capture_output=True,
                   env=dict(os.environ, OMP_NUM_THREADS='1'))
    m = json.loads((out / 'metrics.json').read_text())
    r = dict(arch=arch, tokens=tokens, seed=seed, steps=steps, acc=m['held_out']['acc'], loss=m['held_out']['loss'],
             tokens_per_s=m['tokens_per_s'], seconds=round(time.time() - t, 1))
    if arch == 'modernbert': r['longer'] = longer(out)
    print(json.dumps(r), flush=True)
    return r

def longer(out: Path) -> dict:
    "Held-out loss and accuracy of the run's model on rows of 32 (as trained), 64 and 128 tokens."
    import torch
    from bert_nb.command import _load
    from bert_nb.pretrain import evaluate, pack_rows, split_lines, read_corpus, DEFAULT_CORPUS
    torch.set_num_threads(1)
    model, tok = _load(str(out))
    held = split_lines(read_corpus([DEFAULT_CORPUS]), json.loads((out / 'args.json').read_text())['seed'])[1]
    res = {}
    for T in (32, 64, 128):
        rows, lens = pack_rows(tok, held, T)
        e = evaluate(model, tok, rows, lens, 0)
        res[T] = dict(acc=e['acc'], loss=e['loss'], n=e['n'])
    return res

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--tokens', type=float, nargs='+', default=[2.5e6, 5e6, 10e6])
    ap.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    ap.add_argument('--arch', nargs='+', default=['bert', 'modernbert'])
    ap.add_argument('--jobs', type=int, default=2)
    a = ap.parse_args()
    done = json.loads(SAVED.read_text())['runs'] if SAVED.exists() else []
    have = {(r['arch'], r['tokens'], r['seed']) for r in done}
    todo = [(arch, t, s) for t in a.tokens for s in a.seeds for arch in a.arch if (arch, t, s) not in have]
    with tempfile.TemporaryDirectory() as d, ThreadPoolExecutor(a.jobs) as ex:
        for r in ex.map(lambda x: run(*x, Path(d)), todo):
            done.append(r | provenance())
            SAVED.write_text(json.dumps(dict(machine=f'{machine()}; one thread a run, {a.jobs} at a time',
                                             runs=done), indent=1) + '\n')

if __name__ == '__main__': main()
