"""`bert-nb train --snapshots N`: the model kept at N steps spaced evenly in log(1 + step), or at the steps listed,
each a directory that transformers reads, with its held-out figures; a run with them trains exactly as one without;
bad N and bad lists refused."""
import json
from pathlib import Path
import numpy as np
import pytest
import torch
import forked
from bert_nb.data import load_data
from bert_nb.pretrain import evaluate, load_model

TINY = ['--vocab-size', '300', '--max-len', '32', '--batch-size', '8', '--d-model', '32', '--layers', '1', '--heads',
        '2', '--d-ff', '64', '--lr', '3e-3', '--evals', '2', '--quiet']

def cli(*args): return forked.run(*args)

def refused(r, says):
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and says in lines[0] and 'Traceback' not in r.stderr, r.stderr[-2000:]

def log_spaced(n: int, steps: int) -> list[int]:
    "The oracle where no two round together: NumPy's geometric sequence from 1 to steps + 1, less one."
    return [int(s) for s in np.rint(np.geomspace(1, steps + 1, n)) - 1]

@pytest.fixture(scope='module')
def runs(corpus, tmp_path_factory):
    "The same tiny run of 30 steps, with 4 snapshots and without."
    d = tmp_path_factory.mktemp('snap')
    for name, extra in (('with', ['--snapshots', '4']), ('without', [])):
        r = cli('--corpus', corpus, '--steps', 30, '--out', d / name, *TINY, *extra)
        assert r.returncode == 0, r.stderr
    return d / 'with', d / 'without'

def test_snapshots_at_log_spaced_steps_with_their_held_out_figures(runs):
    run, _ = runs
    want = log_spaced(4, 30)
    assert want == [0, 2, 9, 30]
    assert sorted(p.name for p in (run / 'snapshots').iterdir()) == [f'step-{s:06d}' for s in want]
    m = json.loads((run / 'metrics.json').read_text())
    assert [s['step'] for s in m['snapshots']] == want and [s['tokens'] for s in m['snapshots']][0] == 0
    tokens = {s: t for s, t, _ in m['train']}
    assert [s['tokens'] for s in m['snapshots'][1:]] == [tokens[s] for s in want[1:]]
    # each snapshot's figures are those of the model on disk, scored again from the files
    held = load_data(run / 'data', 32)
    for s in m['snapshots']:
        model, tok = load_model(run / s['dir'])
        ev = evaluate(model, tok, held['held_rows'], held['held_lens'], seed=0)
        assert ev['loss'] == s['loss'] and ev['acc'] == s['acc']
    assert m['snapshots'][-1]['loss'] == m['held_out']['loss']

def test_the_last_snapshot_is_the_final_model_and_the_first_the_untrained_one(runs):
    "The last is model/ byte for byte; the first scores what the run's own evaluation at step 0 scored."
    run, _ = runs
    last = run / 'snapshots' / 'step-000030'
    assert (last / 'model.safetensors').read_bytes() == (run / 'model' / 'model.safetensors').read_bytes()
    m = json.loads((run / 'metrics.json').read_text())
    assert m['eval'][0]['step'] == 0 and m['snapshots'][0]['loss'] == m['eval'][0]['loss']
    first, second = (load_model(run / 'snapshots' / s)[0].state_dict() for s in ('step-000000', 'step-000002'))
    assert any(not torch.equal(first[k], second[k]) for k in first)

def test_transformers_reads_each_snapshot(runs):
    from transformers import BertForMaskedLM
    run, _ = runs
    for d in sorted((run / 'snapshots').iterdir()):
        theirs, ours = BertForMaskedLM.from_pretrained(str(d)).double().eval(), load_model(d)[0].double()
        ids = torch.tensor([[2, 40, 50, 4, 60, 3]])  # in float64 one formula: far below any fault's difference
        torch.testing.assert_close(theirs(ids).logits, ours(ids)[0], rtol=0, atol=1e-9)

def test_a_run_with_snapshots_trains_as_one_without(runs):
    "They draw no random number and change no state: the same losses, the same final weights."
    a, b = (json.loads((r / 'metrics.json').read_text()) for r in runs)
    assert a['train'] == b['train'] and a['weight_digests'] == b['weight_digests'] and 'snapshots' not in b

def test_a_resumed_run_keeps_the_same_snapshots(runs, corpus, tmp_path):
    out = tmp_path / 'cut'
    r = cli('--corpus', corpus, '--steps', 30, '--snapshots', 4, '--stop-at', 5, '--out', out, *TINY)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (out / 'snapshots').iterdir()) == ['step-000000', 'step-000002']
    r = cli('train', '--resume', out, '--snapshots', 4, '--quiet')  # its own N may be said again
    assert r.returncode == 0, r.stderr
    run, _ = runs
    for s in ('step-000000', 'step-000002', 'step-000009', 'step-000030'):
        assert (out / 'snapshots' / s / 'model.safetensors').read_bytes() == \
               (run / 'snapshots' / s / 'model.safetensors').read_bytes()
    got, want = (json.loads((d / 'metrics.json').read_text())['snapshots'] for d in (out, run))
    assert [(s['step'], s['loss']) for s in got] == [(s['step'], s['loss']) for s in want]

def test_a_modernbert_run_snapshots_modernberts(corpus, tmp_path):
    r = cli('--corpus', corpus, '--arch', 'modernbert', '--steps', 3, '--snapshots', 2, '--out', tmp_path / 'm', *TINY)
    assert r.returncode == 0, r.stderr
    for s in ('step-000000', 'step-000003'):
        assert json.loads((tmp_path / 'm' / 'snapshots' / s / 'config.json').read_text())['model_type'] == 'modernbert'

@pytest.mark.parametrize('args, says', [
    (['--steps', 10, '--snapshots', 1], 'argument --snapshots: must be >= 2, got 1'),
    (['--steps', 10, '--snapshots', 12], '--snapshots must be in [2, 11] for a run of 10 steps'),
    (['--snapshots', 3], '--snapshots 3 needs --steps and no --minutes'),
    (['--steps', 10, '--minutes', 1, '--snapshots', 3], '--snapshots 3 needs --steps and no --minutes'),
])
def test_bad_snapshots_are_one_line_and_exit_2(corpus, tmp_path, args, says):
    r = cli('--corpus', corpus, '--out', tmp_path / 'x', *TINY, *args)
    refused(r, says)
    assert not (tmp_path / 'x').exists()

def test_a_resumed_run_takes_no_other_n(corpus, tmp_path):
    out = tmp_path / 'r'
    r = cli('--corpus', corpus, '--steps', 10, '--snapshots', 3, '--stop-at', 2, '--out', out, *TINY)
    assert r.returncode == 0, r.stderr
    refused(cli('train', '--resume', out, '--snapshots', 4), '--snapshots 4: the run in')
    r = cli('--corpus', corpus, '--steps', 10, '--stop-at', 2, '--out', tmp_path / 'none', *TINY)
    refused(cli('train', '--resume', tmp_path / 'none', '--snapshots', 3), 'keeps no snapshots')
    args = json.loads((out / 'args.json').read_text()) | {'snapshots': 50}  # an args.json changed by hand
    (out / 'args.json').write_text(json.dumps(args))
    refused(cli('train', '--resume', out), 'args.json: --snapshots must be in [2, 11]')

# ------------------------------------------------------------------------- the page's loader of a run's snapshots

node = pytest.mark.skipif(__import__('shutil').which('node') is None, reason='node is not installed')

def page_snapshots(run: Path, metrics: dict, change=None) -> dict:
    "ports/js/play.mjs's loadSnapshots in node on the run's files (metrics as given): each snapshot's step and loss."
    import subprocess
    play = (Path(__file__).parents[1] / 'ports' / 'js' / 'play.mjs').as_uri()
    dirs = {s['dir']: {k: str(run / s['dir'] / f) for k, f in (('config', 'config.json'), ('vocab', 'vocab.txt'),
                                                                  ('safetensors', 'model.safetensors'))}
            for s in metrics['snapshots']}
    code = f"""import {{ loadSnapshots }} from '{play}';
import {{ readFileSync }} from 'node:fs';
const dirs = {json.dumps(dirs)}, change = {json.dumps(change)};
for (const [d, f] of Object.entries(dirs)) dirs[d] = {{ config: readFileSync(f.config, 'utf8'),
  vocab: readFileSync(f.vocab, 'utf8').replace(change === d ? '\\nthe\\n' : null, '\\nzyzzyva\\n'), safetensors: readFileSync(f.safetensors) }};
try {{ const r = loadSnapshots({json.dumps(json.dumps(metrics))}, dirs);
  process.stdout.write(JSON.stringify(r.snaps.map((s) => [s.step, s.loss, s.m.tok.tokens.length]))); }}
catch (e) {{ process.stdout.write(JSON.stringify({{ error: e.message }})); }}"""
    r = subprocess.run(['node', '--input-type=module', '-e', code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)

@node
def test_the_page_orders_a_runs_snapshots_by_step_and_refuses_two_vocabularies(runs):
    run, _ = runs
    m = json.loads((run / 'metrics.json').read_text())
    backwards = m | {'snapshots': m['snapshots'][::-1]}  # the order metrics.json lists them in is not the steps'
    got = page_snapshots(run, backwards)
    assert [s for s, _, _ in got] == [0, 2, 9, 30] and [l for _, l, _ in got] == [s['loss'] for s in m['snapshots']]
    odd = page_snapshots(run, m, change='snapshots/step-000009')  # one vocab.txt with another token, of the same size
    assert odd == {'error': 'the snapshots do not share one vocabulary'}

@pytest.mark.parametrize('wall_s', [3500.0, 3700.0])
def test_shipping_a_run_says_plainly_when_it_took_over_the_hour(runs, tmp_path, wall_s):
    """tools/kjv.py (make kjv's last step) ships a run of fixed steps; on a machine slower than the one its steps were
    sized on it takes more than the hour, and then the card and a line on stderr say so (not at 3,500 s)."""
    import shutil, subprocess, sys
    run = tmp_path / 'run'
    shutil.copytree(runs[0], run)
    m = json.loads((run / 'metrics.json').read_text())
    (run / 'metrics.json').write_text(json.dumps({**m, 'wall_s': wall_s, 'learned': True}))
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, root / 'tools' / 'kjv.py', run, tmp_path / 'kjv', tmp_path / 'snaps'],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    over = wall_s > 3600
    built = next(l for l in (tmp_path / 'kjv' / 'README.md').read_text().splitlines() if l.startswith('| built on'))
    assert f'trained in {wall_s / 60:.1f} minutes' in built
    assert ('over the hour the steps are sized for' in built) == over
    lines = r.stderr.strip().splitlines()
    assert lines == ([f'the run took {wall_s / 60:.1f} minutes, over the hour its 30 steps are sized for: this machine '
                      f"trains {m['tokens_per_s']:,.0f} tokens/s (the card says so)"] if over else []), r.stderr

def test_snapshots_at_the_steps_listed(corpus, tmp_path):
    "--snapshots 0,3,30: those steps, each a directory and an entry of metrics.json, and no other."
    out = tmp_path / 'listed'
    r = cli('--corpus', corpus, '--steps', 30, '--snapshots', '0,3,30', '--out', out, *TINY)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (out / 'snapshots').iterdir()) == ['step-000000', 'step-000003', 'step-000030']
    assert [s['step'] for s in json.loads((out / 'metrics.json').read_text())['snapshots']] == [0, 3, 30]

@pytest.mark.parametrize('steps, says', [('0,31', "step 31 is not one of this run's steps, 0 to 30"),
                                         ('0,9,5', 'list the steps in increasing order, each once'),
                                         ('0,5,5', 'list the steps in increasing order, each once'),
                                         ('0,x', 'expected N or steps separated by commas')])
def test_a_bad_list_of_snapshot_steps_is_refused_before_the_run(corpus, tmp_path, steps, says):
    r = cli('--corpus', corpus, '--steps', 30, '--snapshots', steps, '--out', tmp_path / 'o', *TINY)
    refused(r, says); assert not (tmp_path / 'o').exists()
