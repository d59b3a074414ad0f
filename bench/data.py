"""Your own corpus: `bert-nb prepare` and `bert-nb train --data` on corpora built from the bundled one (its lines
shuffled by a seeded generator, about 1% of words changed by one letter), at 200 MB (and 1 GB with --big); the
chapter's in-memory path at 4, 20 and 40 MB for comparison.

For each size, each command in a fresh process: preparation's time and peak memory; train --data's time to its
first step, tokens/s and peak memory (two runs of each size, in turn), against the same run on the bundled 4 MB. Then train --data's process tree
under torchrun --nproc_per_node 2, on the largest data, against one process. Then, in one process on the first
20 MB of the 200 MB corpus, the two ratios against Hugging Face `tokenizers`: tokenizing (the chunks `prepare`
encodes, ids to a uint16 file) and vocabulary training (its WordPiece trainer, the same normaliser and lines).
Exits non-zero when a figure misses its target."""
import argparse, itertools, json, os, shutil, subprocess, sys, tempfile, time
from pathlib import Path
import numpy as np
from common import machine, provenance
import bert_nb
from bert_nb.data import CHUNK, _tokenize
from bert_nb.pretrain import DEFAULT_CORPUS, read_corpus
from bert_nb.wordpiece import word_counts, train_vocab, WordPieceTokenizer

EXE = Path(sys.executable).parent / 'bert-nb'

def build(mb: int, path: Path) -> Path:
    "About `mb` MiB of text: the bundled lines in seeded random orders, 0.2% of letters changed (1% of words)."
    lines, g, written = read_corpus([DEFAULT_CORPUS]), np.random.default_rng(mb), 0
    with open(path, 'wb') as f:
        while written < mb * 2**20:
            text = np.frombuffer(('\n'.join(lines[i] for i in g.permutation(len(lines))) + '\n').encode(), np.uint8)
            text = text.copy()
            letters = np.flatnonzero((text >= 97) & (text <= 122))
            pick = letters[g.random(len(letters)) < 0.002]
            text[pick] = g.integers(97, 123, len(pick))
            f.write(text.tobytes()); written += len(text)
    return path

def peak(cmd: list) -> tuple[float, float]:
    "(seconds, peak resident MiB of the process tree's largest process) of a command, in a fresh wrapper."
    probe = ('import resource, subprocess, sys, time; t = time.time(); r = subprocess.run(sys.argv[1:]); '
             'print(time.time() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.returncode)')
    out = subprocess.run([sys.executable, '-c', probe, *map(str, cmd)], capture_output=True, text=True, check=True)
    s, kb, rc = out.stdout.split()[-3:]
    if rc != '0': raise SystemExit(f"{' '.join(map(str, cmd))} failed with exit status {rc}")
    return float(s), int(kb) / 1024

def train_figures(data: Path, out: Path, steps: int) -> dict:
    s, mb = peak([EXE, 'train', '--data', data, '--steps', steps, '--evals', 1, '--quiet', '--out', out])
    m = json.loads((out / 'metrics.json').read_text())
    return dict(process_s=s, peak_mb=mb, first_step_s=m['first_step_s'], tokens_per_s=m['tokens_per_s'])

def _tree(pid: int) -> list[int]:
    "`pid` and its descendants, from /proc."
    parent = {}
    for d in Path('/proc').iterdir():
        try:
            if d.name.isdigit(): parent[int(d.name)] = int((d / 'stat').read_text().rsplit(')', 1)[1].split()[1])
        except (OSError, IndexError): pass  # exited while we looked
    tree, grew = {pid}, True
    while grew:
        more = {q for q, pp in parent.items() if pp in tree} - tree
        tree |= more; grew = bool(more)
    return sorted(tree)

def _pss_kb(pid: int) -> int:
    try: return next(int(l.split()[1]) for l in open(f'/proc/{pid}/smaps_rollup') if l.startswith('Pss:'))
    except (OSError, StopIteration): return 0

def tree_pss(cmd: list, env: dict | None = None) -> tuple[float, float]:
    """(peak MiB of the process tree, of the tree less its root) of a command: sums of the processes' proportional
    set sizes (a page shared by n processes counts 1/n in each, so a sum counts it once), sampled every 0.1 s."""
    p, tree, below = subprocess.Popen(list(map(str, cmd)), env=env, stdout=subprocess.DEVNULL), 0, 0
    while p.poll() is None:
        pss = [_pss_kb(q) for q in _tree(p.pid)]
        tree, below = max(tree, sum(pss)), max(below, sum(pss) - _pss_kb(p.pid))
        time.sleep(0.1)
    if p.returncode: raise SystemExit(f"{' '.join(map(str, cmd))} failed with exit status {p.returncode}")
    return tree / 1024, below / 1024

def torchrun_figures(data: Path, tmp: Path, steps: int) -> dict:
    """Peak memory of train --data's process tree: one process, then two under torchrun (one thread each), whose
    root is torchrun's launcher (an import of torch, nothing of ours)."""
    env = dict(os.environ, OMP_NUM_THREADS='1')
    args = ['train', '--data', data, '--steps', steps, '--evals', 1, '--quiet', '--out']
    shutil.rmtree(tmp / 'one', ignore_errors=True); shutil.rmtree(tmp / 'two', ignore_errors=True)
    one, _ = tree_pss([EXE, *args, tmp / 'one'], env)
    run = [sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node', 2,
           '--master_addr', '127.0.0.1', '--master_port', 29517, Path(bert_nb.__file__).parent / 'command.py']
    tree, workers = tree_pss([*run, *args, tmp / 'two'], env)
    return dict(one_mb=one, tree_mb=tree, workers_mb=workers)

def ratios(corpus: Path, tmp: Path, rounds: int = 3) -> dict:
    "Ours against tokenizers on the first 20 MB of `corpus`, in this process: each side's best of `rounds`, in turn."
    from tokenizers import Tokenizer, models, trainers
    lines = _head(corpus, 20 * 2**20)
    ours_tok = WordPieceTokenizer.from_tokens(train_vocab(word_counts(lines), 8192))
    ref = Tokenizer(models.WordPiece(unk_token='[UNK]'))
    ref.normalizer, ref.pre_tokenizer = ours_tok.tok.normalizer, ours_tok.tok.pre_tokenizer
    trainer = trainers.WordPieceTrainer(vocab_size=8192, special_tokens=['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'])

    def encode_ref():
        with open(tmp / 'ref.bin', 'wb') as f:
            for i in range(0, len(lines), CHUNK):
                ids = [e.ids[1:-1] for e in ours_tok.tok.encode_batch(lines[i:i + CHUNK])]
                np.fromiter(itertools.chain.from_iterable(ids), np.uint16).tofile(f)
    sides = dict(vocab_ours=lambda: train_vocab(word_counts(lines), 8192),
                 vocab_ref=lambda: ref.train_from_iterator(lines, trainer),
                 tok_ours=lambda: _tokenize(ours_tok, iter(lines), np.zeros(len(lines), bool), tmp, np.dtype('<u2')),
                 tok_ref=encode_ref)
    best = {k: float('inf') for k in sides}
    for _ in range(rounds):
        for k, f in sides.items():
            t = time.perf_counter(); f(); best[k] = min(best[k], time.perf_counter() - t)
    assert (tmp / 'ref.bin').read_bytes() == (tmp / 'train.bin').read_bytes()  # the same tokens
    return dict(lines=len(lines), tokenize=best['tok_ref'] / best['tok_ours'],
                vocab=best['vocab_ours'] / best['vocab_ref'], tokenize_s=(best['tok_ours'], best['tok_ref']),
                vocab_s=(best['vocab_ours'], best['vocab_ref']))

def _head(path: Path, size: int) -> list[str]:
    "The lines of the first `size` bytes of a text file."
    with open(path, encoding='utf-8') as f: return [l.strip() for l in f.read(size).splitlines()[:-1] if l.strip()]

IN_MEMORY = 'import sys; from bert_nb.pretrain import prepare, RunArgs; prepare(RunArgs(corpus=[sys.argv[1]]))'

def in_memory_peak(corpus: Path) -> float:
    "Peak MiB of the chapter's in-memory path on `corpus`: lines read, split, vocabulary trained, rows packed."
    return peak([sys.executable, '-c', IN_MEMORY, corpus])[1]

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--big', action='store_true', help='the 1 GB case too (about half an hour here)')
    ap.add_argument('--steps', type=int, default=600, help='steps of each training run (an epoch permutation is drawn at the first)')
    ap.add_argument('--dir', type=Path, help='where to build the corpora (default: a temporary directory)')
    ap.add_argument('--reuse', action='store_true', help="keep --dir's prepared data (no preparation figures)")
    ap.add_argument('--save', type=Path, help="write the figures to this JSON file (03_pretrain's memory figure "
                    "draws bench/data.json, from a --big run)")
    a = ap.parse_args()
    tmp = a.dir or Path(tempfile.mkdtemp())
    tmp.mkdir(parents=True, exist_ok=True)
    print(f"bench/data.py  [{machine()}]")
    rows, ok = {}, True
    corpora = {4: DEFAULT_CORPUS}  # MiB: the bundled corpus is 4.3 MiB of text
    for mb in [20, 40, 200] + ([1024] if a.big else []):
        corpora[mb] = tmp / f'corpus-{mb}.txt'
        if not corpora[mb].exists(): build(mb, corpora[mb])
    in_memory = {mb: in_memory_peak(corpora[mb]) for mb in (4, 20, 40)}  # 200 MB held 12 GB and rising
    sizes = [4, 200] + ([1024] if a.big else [])
    for mb in sizes:
        data, rows[f'{mb} MB'] = tmp / f'data-{mb}', {}
        if not (a.reuse and data.exists()):
            shutil.rmtree(data, ignore_errors=True)
            s, pmb = peak([EXE, 'prepare', '--corpus', corpora[mb], '--out', data])
            rows[f'{mb} MB'] = dict(prepare_s=s, prepare_peak_mb=pmb)
    runs = {mb: [] for mb in sizes}
    for _ in range(2):  # two rounds, the sizes in turn: a busy spell slows one run of each, not one size
        for mb in sizes:
            shutil.rmtree(tmp / f'run-{mb}', ignore_errors=True)
            runs[mb].append(train_figures(tmp / f'data-{mb}', tmp / f'run-{mb}', a.steps))
    for mb, (x, y) in runs.items():  # the faster run's rate and first step; the larger peak
        rows[f'{mb} MB'] |= dict(tokens_per_s=max(x['tokens_per_s'], y['tokens_per_s']),
                                 first_step_s=min(x['first_step_s'], y['first_step_s']),
                                 peak_mb=max(x['peak_mb'], y['peak_mb']))
    print(f"\n{'corpus':>8} {'prepare':>9} {'peak':>8} | {'first step':>10} {'tokens/s':>9} {'peak':>8}")
    for k, r in rows.items():
        prep = f"{r['prepare_s']:8.0f}s {r['prepare_peak_mb']:7.0f}M" if 'prepare_s' in r else f"{'-':>9} {'-':>8}"
        print(f"{k:>8} {prep} | {r['first_step_s']:9.1f}s {r['tokens_per_s']:9,.0f} {r['peak_mb']:7.0f}M")
    print('in memory (the chapter\'s path: read, split, train the vocabulary, pack):',
          ', '.join(f'{mb} MB {v:,.0f}M' for mb, v in in_memory.items()))
    base = rows['4 MB']
    for k, r in rows.items():
        if k == '4 MB': continue
        checks = [(f'{k}: prepare peak <= 1,536 MiB', r.get('prepare_peak_mb', 0) <= 1536),
                  (f'{k}: train peak within 512 MiB of 4 MB', r['peak_mb'] - base['peak_mb'] <= 512),
                  (f'{k}: tokens/s within 5% of 4 MB', r['tokens_per_s'] >= 0.95 * base['tokens_per_s']),
                  (f'{k}: first step within 10 s', r['first_step_s'] <= 10)]
        for what, good in checks: print(f"  {what}: {'ok' if good else 'MISSED'}"); ok &= good
    big = max(rows, key=lambda k: int(k.split()[0]))
    t = torchrun_figures(tmp / f"data-{big.split()[0]}", tmp, a.steps)
    good = t['workers_mb'] <= 2 * t['one_mb']
    print(f"\n  torchrun --nproc_per_node 2 on the {big} data: the process tree {t['tree_mb']:,.0f} MiB "
          f"({t['tree_mb'] / t['one_mb']:.2f}x one process's {t['one_mb']:,.0f} MiB), of which the two workers "
          f"{t['workers_mb']:,.0f} MiB ({t['workers_mb'] / t['one_mb']:.2f}x; target <= 2x) {'ok' if good else 'MISSED'}"
          f" and torchrun's launcher, an import of torch, the rest")
    ok &= good
    q = ratios(corpora[200], tmp)
    print(f"\n  tokenizing {q['lines']:,} lines: ours {q['tokenize_s'][0]:.1f} s, tokenizers {q['tokenize_s'][1]:.1f} s: "
          f"{q['tokenize']:.2f}x (target >= 1.0x: the same encoder, so within 5% of timing noise) "
          f"{'ok' if q['tokenize'] >= 0.95 else 'MISSED'}")
    print(f"  vocabulary: ours {q['vocab_s'][0]:.1f} s, tokenizers' WordPiece trainer {q['vocab_s'][1]:.1f} s: "
          f"{q['vocab']:.2f}x the time (target <= 1.5x) {'ok' if q['vocab'] <= 1.5 else 'MISSED'}")
    ok &= q['tokenize'] >= 0.95 and q['vocab'] <= 1.5
    if a.save:
        a.save.write_text(json.dumps(dict(provenance(), steps=a.steps,
                                          token_files=rows, in_memory=in_memory, torchrun=t, ratios=q), indent=1) + '\n')
    sys.exit(0 if ok else 1)

if __name__ == '__main__': main()
