"""Your own corpus: `bert-nb prepare` and `bert-nb train --data` on corpora built from the bundled one (its lines
shuffled by a seeded generator, about 1% of words changed by one letter), at 200 MB (and 1 GB with --big).

For each size, each command in a fresh process: preparation's time and peak memory; train --data's time to its
first step, tokens/s and peak memory, against the same run on the bundled 4 MB. Then, in one process on the first
20 MB of the 200 MB corpus, the two ratios against Hugging Face `tokenizers`: tokenizing (the chunks `prepare`
encodes, ids to a uint16 file) and vocabulary training (its WordPiece trainer, the same normaliser and lines).
Exits non-zero when a figure misses its target."""
import argparse, itertools, json, shutil, subprocess, sys, tempfile, time
from pathlib import Path
import numpy as np
from common import machine
from bert_nb.data import CHUNK, _tokenize, prepare_data
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

def ratios(corpus: Path, tmp: Path) -> dict:
    "Ours against tokenizers on the first 20 MB of `corpus`, in this process."
    from tokenizers import Tokenizer, models, trainers
    lines = _head(corpus, 20 * 2**20)
    t = time.perf_counter(); ours_tok = WordPieceTokenizer.from_tokens(train_vocab(word_counts(lines), 8192))
    vocab_ours = time.perf_counter() - t
    ref = Tokenizer(models.WordPiece(unk_token='[UNK]'))
    ref.normalizer, ref.pre_tokenizer = ours_tok.tok.normalizer, ours_tok.tok.pre_tokenizer
    trainer = trainers.WordPieceTrainer(vocab_size=8192, special_tokens=['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'])
    t = time.perf_counter(); ref.train_from_iterator(lines, trainer); vocab_ref = time.perf_counter() - t
    held = np.zeros(len(lines), bool)
    t = time.perf_counter()
    _tokenize(ours_tok, iter(lines), held, tmp, np.dtype('<u2'))
    tok_ours = time.perf_counter() - t
    t = time.perf_counter()
    with open(tmp / 'ref.bin', 'wb') as f:
        for i in range(0, len(lines), CHUNK):
            ids = [e.ids[1:-1] for e in ours_tok.tok.encode_batch(lines[i:i + CHUNK])]
            np.fromiter(itertools.chain.from_iterable(ids), np.uint16).tofile(f)
    tok_ref = time.perf_counter() - t
    assert (tmp / 'ref.bin').read_bytes() == (tmp / 'train.bin').read_bytes()  # the same tokens
    return dict(lines=len(lines), tokenize=tok_ref / tok_ours, vocab=vocab_ours / vocab_ref,
                tokenize_s=(tok_ours, tok_ref), vocab_s=(vocab_ours, vocab_ref))

def _head(path: Path, size: int) -> list[str]:
    "The lines of the first `size` bytes of a text file."
    with open(path, encoding='utf-8') as f: return [l.strip() for l in f.read(size).splitlines()[:-1] if l.strip()]

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--big', action='store_true', help='the 1 GB case too (about half an hour here)')
    ap.add_argument('--steps', type=int, default=600, help='steps of each training run (an epoch permutation is drawn at the first)')
    ap.add_argument('--dir', type=Path, help='where to build the corpora (default: a temporary directory)')
    ap.add_argument('--reuse', action='store_true', help="keep --dir's prepared data (no preparation figures)")
    a = ap.parse_args()
    tmp = a.dir or Path(tempfile.mkdtemp())
    tmp.mkdir(parents=True, exist_ok=True)
    print(f"bench/data.py  [{machine()}]")
    rows, ok = {}, True
    small = tmp / 'kjv-data'
    if not small.exists(): prepare_data([DEFAULT_CORPUS], small, say=lambda s: None)
    shutil.rmtree(tmp / 'run-4', ignore_errors=True)
    rows['4 MB'] = dict(**train_figures(small, tmp / 'run-4', a.steps))
    for mb in [200] + ([1024] if a.big else []):
        corpus = tmp / f'corpus-{mb}.txt'
        if not corpus.exists(): build(mb, corpus)
        data, prep = tmp / f'data-{mb}', {}
        if not (a.reuse and data.exists()):
            shutil.rmtree(data, ignore_errors=True)
            s, pmb = peak([EXE, 'prepare', '--corpus', corpus, '--out', data])
            prep = dict(prepare_s=s, prepare_peak_mb=pmb)
        shutil.rmtree(tmp / f'run-{mb}', ignore_errors=True)
        rows[f'{mb} MB'] = dict(**prep, **train_figures(data, tmp / f'run-{mb}', a.steps))
    print(f"\n{'corpus':>8} {'prepare':>9} {'peak':>8} | {'first step':>10} {'tokens/s':>9} {'peak':>8}")
    for k, r in rows.items():
        prep = f"{r['prepare_s']:8.0f}s {r['prepare_peak_mb']:7.0f}M" if 'prepare_s' in r else f"{'-':>9} {'-':>8}"
        print(f"{k:>8} {prep} | {r['first_step_s']:9.1f}s {r['tokens_per_s']:9,.0f} {r['peak_mb']:7.0f}M")
    base = rows['4 MB']
    for k, r in rows.items():
        if k == '4 MB': continue
        checks = [(f'{k}: prepare peak <= 1,536 MiB', r.get('prepare_peak_mb', 0) <= 1536),
                  (f'{k}: train peak within 512 MiB of 4 MB', r['peak_mb'] - base['peak_mb'] <= 512),
                  (f'{k}: tokens/s within 5% of 4 MB', r['tokens_per_s'] >= 0.95 * base['tokens_per_s']),
                  (f'{k}: first step within 10 s', r['first_step_s'] <= 10)]
        for what, good in checks: print(f"  {what}: {'ok' if good else 'MISSED'}"); ok &= good
    q = ratios(tmp / 'corpus-200.txt', tmp)
    print(f"\n  tokenizing {q['lines']:,} lines: ours {q['tokenize_s'][0]:.1f} s, tokenizers {q['tokenize_s'][1]:.1f} s: "
          f"{q['tokenize']:.2f}x (target >= 1.0x: the same encoder, so within 5% of timing noise) "
          f"{'ok' if q['tokenize'] >= 0.95 else 'MISSED'}")
    print(f"  vocabulary: ours {q['vocab_s'][0]:.1f} s, tokenizers' WordPiece trainer {q['vocab_s'][1]:.1f} s: "
          f"{q['vocab']:.2f}x the time (target <= 1.5x) {'ok' if q['vocab'] <= 1.5 else 'MISSED'}")
    ok &= q['tokenize'] >= 0.95 and q['vocab'] <= 1.5
    sys.exit(0 if ok else 1)

if __name__ == '__main__': main()
