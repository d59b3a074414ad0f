"""Ship a finished run as the package's pretrained model: `python tools/kjv.py RUN DEST SNAPS` copies RUN/model into
DEST (the files transformers and bert-nb read) with the run's metrics.json (its losses, step by step, its held-out
curve, which the pretraining chapter draws, and its snapshots), and writes its model card (README.md) and card.json,
the figures that tests/test_kjv.py reproduces from the shipped weights. The run's snapshots but the last (the model
itself) go to SNAPS as safetensors of int8 rows with a float32 scale a row (a quarter of float32's bytes), a file a
step, each checked against its own float32 weights' held-out figures and fills: the site's slider and chapter 03 read
them there, and the package (pip's download) goes without them. `python tools/kjv.py --place METRICS N` prints N
snapshot steps placed where that run's loss fell (the Makefile's KJV_SNAPSHOTS)."""
import hashlib, json, platform, os, shutil, sys, tempfile
from pathlib import Path
import numpy as np, torch
from safetensors.torch import load_file, save_file
from bert_nb.pretrain import RunArgs

RECIPE = ['vocab_size', 'max_len', 'batch_size', 'd_model', 'layers', 'heads', 'd_ff', 'dropout', 'lr', 'warmup',
          'weight_decay', 'shift', 'mask_p', 'sin_pos', 'sin_scale', 'freq_bias', 'bf16']
FILES = ['config.json', 'model.safetensors', 'vocab.txt', 'tokenizer.json', 'tokenizer_config.json',
         'special_tokens_map.json']

def place(train: list, n: int) -> list[int]:
    """n snapshot steps where a run's loss fell: 0, the last step, and between them the first steps at which the
    training loss, averaged over the steps within 10% of each, has fallen 1/(n-1), 2/(n-1), ... of the way from its
    first 100 steps' mean to its end. `train` is metrics.json's, rows of (step, tokens, loss)."""
    loss = np.array([row[2] for row in train])
    smooth = np.array([loss[int(i * 0.9):int(i * 1.1) + 1].mean() for i in range(len(loss))])
    start, end = loss[:100].mean(), smooth[-1]
    return [0] + [int(np.argmax(smooth <= start - (start - end) * k / (n - 1))) + 1 for k in range(1, n - 1)] + \
           [len(loss)]

def narrow(sd: dict) -> dict:
    """A snapshot's weights in a quarter of float32's bytes: each matrix's rows as int8 with a float32 scale a row
    (`NAME.scale`, the row's largest |w| over 127, so w ≈ q · scale to half a step), the vectors as float32."""
    out = {}
    for k, w in sd.items():
        if w.dim() != 2: out[k] = w.float(); continue
        scale = w.float().abs().amax(1) / 127
        out[k] = (w.float() / scale.clamp_min(torch.finfo(torch.float32).tiny)[:, None]).round().to(torch.int8)
        out[k + '.scale'] = scale
    return out

def widen(sd: dict) -> dict:
    "narrow's weights back as float32: q · scale, each product rounded once (as the page's reader rounds it)."
    return {k: w.float() * sd[k + '.scale'][:, None] if w.dtype == torch.int8 else w
            for k, w in sd.items() if not k.endswith('.scale')}

def agreement(run: Path, snap: Path, narrowed: dict) -> dict:
    """A snapshot's float32 weights against its int8 ones on the run's held-out rows and evaluation masks: the held-out
    loss and accuracy of each, the share of masked tokens whose first fill is the same token, and where it is not,
    the most probability float32 gives its own first fill over int8's (a plateau's near-ties flip harmlessly)."""
    from bert_nb.bert import load_bert
    from bert_nb.data import load_data
    from bert_nb.pretrain import _call_args, _eval_batches
    a = json.loads((run / 'args.json').read_text())
    data = load_data(run / 'data', a['max_len'])
    with tempfile.TemporaryDirectory() as tmp:  # the snapshot's directory, its weights int8's widened
        shutil.copytree(snap, tmp, dirs_exist_ok=True)
        save_file(widen(narrowed), Path(tmp) / 'model.safetensors', metadata={'format': 'pt'})
        models = [load_bert(d).float().eval() for d in (snap, tmp)]
    loss, hits, same, gap, n = [0.0, 0.0], [0, 0], 0, 0.0, 0
    with torch.no_grad():
        for *_, args in _eval_batches(data['tok'], data['held_rows'], data['held_lens'], a['seed']):
            (full, y), (small, _) = (m.labelled_logits(*_call_args(m, args)) for m in models)
            for i, logits in enumerate((full, small)):
                loss[i] += torch.nn.functional.cross_entropy(logits, y, reduction='sum').item()
                hits[i] += (logits.argmax(-1) == y).sum().item()
            p, first = full.softmax(-1), small.argmax(-1)
            same += (full.argmax(-1) == first).sum().item(); n += len(y)
            gap = max(gap, (p.amax(-1) - p.gather(1, first[:, None])[:, 0]).max().item())
    fig = lambda i: dict(loss=round(loss[i] / n, 5), acc=round(hits[i] / n, 5))
    return dict(f32=fig(0), int8=fig(1), same_first_fill=round(same / n, 5), first_fill_gap=round(gap, 5))

def snapshots(run: Path, m: dict, snaps: Path) -> tuple[int, list]:
    """Each snapshot but the last as SNAPS/step-NNNNNN.safetensors, narrowed to int8 rows, checked against its own
    float32 weights' held-out figures and fills; the bytes of one, and each one's check."""
    last = load_file(run / m['snapshots'][-1]['dir'] / 'model.safetensors')
    final = load_file(run / 'model' / 'model.safetensors')
    if last.keys() != final.keys() or any(not torch.equal(last[k], final[k]) for k in last):
        sys.exit(f"{run}: the last snapshot is not the model")
    tmp = snaps.with_name(snaps.name + '.tmp')
    shutil.rmtree(tmp, ignore_errors=True); tmp.mkdir(parents=True)
    checks = []
    for s in m['snapshots'][:-1]:
        narrowed = narrow(load_file(run / s['dir'] / 'model.safetensors'))
        check = dict(step=s['step'], **agreement(run, run / s['dir'], narrowed))
        # the promise: the held-out loss within 0.01 nats; the same first fill at 98% of the blanks or more, and
        # where not, float32 rates the two within 5 points (a near-tie; float16 would flip fewer, at twice the bytes)
        if abs(check['int8']['loss'] - check['f32']['loss']) > 0.01 or check['same_first_fill'] < 0.98 \
                or check['first_fill_gap'] > 0.05:
            sys.exit(f"{run}/{s['dir']}: int8 rows change its fills: {check}")
        checks.append(check)
        save_file(narrowed, f := tmp / f"{Path(s['dir']).name}.safetensors", metadata={'format': 'pt'})
        f.chmod(0o644)  # a plain file, as the model's are
    shutil.rmtree(snaps, ignore_errors=True); os.rename(tmp, snaps)
    return (snaps / f"{Path(m['snapshots'][0]['dir']).name}.safetensors").stat().st_size, checks

def replayed(dest: Path, m: dict, sha: str) -> tuple[str, dict] | None:
    """A run that trained the shipped weights again, bit for bit (on another machine, for new snapshots): the card's
    machine and the first build's metrics with this run's snapshots; None for a new model. The weights are the
    same, so each figure must be the first build's up to how the evaluating CPU rounds: a loss printed to 5 places
    may round the other way (1e-5), a held-out mean of 2,884 float32 losses may move by 1e-6."""
    if not (dest / 'card.json').is_file() or json.loads((dest / 'card.json').read_text())['weights_sha256'] != sha:
        return None
    card, first = json.loads((dest / 'card.json').read_text()), json.loads((dest / 'metrics.json').read_text())
    near = lambda a, b, eps: len(a) == len(b) and all(abs(x - y) <= eps for x, y in zip(a, b))
    if not (near([r[2] for r in m['train']], [r[2] for r in first['train']], 1.5e-5) and
            near([e['loss'] for e in m['eval']], [e['loss'] for e in first['eval']], 1e-6) and
            [e['acc'] for e in m['eval']] == [e['acc'] for e in first['eval']]):
        sys.exit(f"{dest}: the same weights from a run whose figures differ")
    return card['built_on'], first | {'snapshots': m['snapshots']}

def main(run: Path, dest: Path, snaps: Path):
    m, a = (json.loads((run / f).read_text()) for f in ('metrics.json', 'args.json'))
    if not m['learned']: sys.exit(f"{run}: the run did not learn; not shipping it")
    tmp = dest.with_name(dest.name + '.tmp')
    shutil.rmtree(tmp, ignore_errors=True); tmp.mkdir(parents=True)
    for f in FILES: shutil.copyfile(run / 'model' / f, tmp / f)  # plain 644 files, whatever the run's modes
    weights = (tmp / 'model.safetensors').read_bytes()
    built_on, rebuilt = f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}", None
    if (was := replayed(dest, m, hashlib.sha256(weights).hexdigest())):  # the shipped model again, bit for bit
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'bench'))
        from common import machine  # the CPU by name, as the benchmarks record it
        caps = ', '.join(f'{k}={os.environ[k]}' for k in ('ONEDNN_MAX_CPU_ISA', 'MKL_ENABLE_INSTRUCTIONS')
                         if k in os.environ)
        rebuilt = f"{machine()}{f', {caps}' if caps else ''}, in {m['wall_s'] / 60:.1f} minutes"
        built_on, m = was
    (tmp / 'metrics.json').write_text(json.dumps(m, indent=1) + '\n')
    c, h = m['config'], m['held_out']
    snap_bytes, checks = snapshots(run, m, snaps)
    n_params = sum(v.numel() for v in load_file(tmp / 'model.safetensors').values())  # the word table once
    a.setdefault('freq_bias', False)  # a run from before the bias started at the frequencies
    a.setdefault('shift', False)  # ... and from before the rows' shift
    given = [k for k in RECIPE if a[k] != getattr(RunArgs, k)]  # what differs from today's defaults
    flag = lambda k: '--' + ('' if a[k] else 'no-') + k.replace('_', '-') if isinstance(a[k], bool) else \
        f"--{k.replace('_', '-')} {a[k]}"
    flags = ''.join(' ' + flag(k) for k in given)
    card = dict(recipe=f"bert-nb train --steps {a['steps']}{flags} (the defaults otherwise: seed {a['seed']})",
                steps=m['steps'], tokens=m['tokens'], held_out=h, baseline=m['baseline'], config=c,
                parameters=n_params, weights_bytes=len(weights), weights_sha256=hashlib.sha256(weights).hexdigest(),
                built_on=built_on, **({'rebuilt_on': rebuilt} if rebuilt else {}), train_s=m['wall_s'],
                tokens_per_s=m['tokens_per_s'],
                snapshots=[s['step'] for s in m['snapshots']], snapshot_bytes=snap_bytes, snapshot_checks=checks)
    (tmp / 'card.json').write_text(json.dumps(card, indent=1) + '\n')
    again = f"\n| rebuilt, bit for bit, on | {rebuilt} (the snapshots are this rebuild's) |" if rebuilt else ''
    over = m['wall_s'] > 3600  # the steps are fixed (every machine replays them): a slower machine takes longer
    (tmp / 'README.md').write_text(f"""# bert-nb KJV: a small BERT that knows the words of the King James Bible

A `BertForMLM` pretrained by bert-nb on the corpus bundled with the package (31,102 verses of the King James Bible,
public domain), for a fixed number of steps that two CPU cores run in under an hour, so that chapters and readers
have a trained model in seconds; its recipe was chosen by measurement (the Results page says how). Load it with
`bert_nb.load_bert(bert_nb.KJV)` (its tokenizer: `WordPieceTokenizer.from_vocab(bert_nb.KJV)`), or with
transformers' `BertForMaskedLM.from_pretrained`.

| | |
|---|---|
| recipe | `make kjv`: `{card['recipe']}` |
| steps | {m['steps']:,} ({m['tokens']:,} tokens, batches of {a['batch_size']} rows of {a['max_len']} tokens) |
| model | {c['n_layers']} layers, d = {c['d_model']}, {c['n_heads']} heads, d_ff = {c['d_ff']}, {c['max_len']} positions, vocab {c['vocab']:,} (WordPiece, trained by bert-nb's deterministic trainer on the training split) |
| size | {n_params:,} parameters, float32, {len(weights) / 2**20:.1f} MiB of weights |
| held-out masked-token accuracy | {h['acc']:.2%} on {h['n']:,} masked tokens of the 2% held-out split (p = 0.15, the evaluation stream) |
| held-out loss | {h['loss']:.4f} nats |
| always guessing the most frequent token ({m['baseline']['token']!r}) | {m['baseline']['acc']:.2%} |
| built on | {card['built_on']}: trained in {m['wall_s'] / 60:.1f} minutes ({m['tokens_per_s']:,.0f} tokens/s){', over the hour the steps are sized for: a slower machine' * over} |{again}
| sha256 of model.safetensors | `{card['weights_sha256']}` |
| training curve | `metrics.json`: the loss at every step and the held-out loss and accuracy every {m['eval'][1]['step']} steps |
| snapshots | the model at steps {', '.join(f"{s['step']:,}" for s in m['snapshots'])} (`--snapshots {','.join(str(s['step']) for s in m['snapshots'])}`: where its loss fell): the last is this model; the others, each matrix's rows in int8 with a float32 scale a row ({snap_bytes / 2**20:.1f} MiB each; their held-out loss within {max(abs(k['int8']['loss'] - k['f32']['loss']) for k in checks):.5f} of their float32 weights'), are in the repository's `nbs/kjv-snapshots/` and in the site's play page, not in the package |

`make kjv` rebuilds it: the same steps from the same seed on one PCG32 stream. On the machine that built it, and
with the code that built it, the rebuild is bit for bit (the sha256 above); so it is on a CPU that runs that machine's
kernels (`make kjv` caps oneDNN at AVX512-BF16 and MKL at AVX2, as they run on an AMD EPYC), as an Intel Xeon with AMX
did. A CPU without those kernels, or a change in how the code orders its arithmetic, rounds differently, and then the
weights differ in the last bits while the held-out figures agree to a few thousandths.

It is a small model trained for an hour on one book: it fills in the words of that book's English, not yours.
""")
    shutil.rmtree(dest, ignore_errors=True); os.rename(tmp, dest)
    print(f"shipped {run} as {dest}: {m['steps']} steps, held-out accuracy {h['acc']:.2%}, "
          f"{len(weights) / 2**20:.1f} MiB")
    if over:
        print(f"the run took {m['wall_s'] / 60:.1f} minutes, over the hour its {m['steps']:,} steps are sized for: "
              f"this machine trains {m['tokens_per_s']:,.0f} tokens/s (the card says so)", file=sys.stderr)

if __name__ == '__main__':
    if sys.argv[1] == '--place':  # python tools/kjv.py --place METRICS N: the Makefile's KJV_SNAPSHOTS
        print(','.join(map(str, place(json.loads(Path(sys.argv[2]).read_text())['train'], int(sys.argv[3])))))
    else: main(*map(Path, sys.argv[1:4]))
