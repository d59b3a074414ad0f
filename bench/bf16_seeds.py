"""The bf16 step's learning before and after #58 changed it (the decoder and its loss in one node, attention's float32
only in its scores): `bert-nb train --steps N --bf16` from three seeds, the held-out loss at each evaluation. A --steps
run's schedule is fixed, so each evaluation is at the same tokens in every run. `--before` trains the bert_nb on
PYTHONPATH (an older checkout) and keeps its runs in the same file; appendix 14 reads bench/bf16_seeds.json.

    PYTHONPATH=/tmp/old python bf16_seeds.py --before      # /tmp/old: git worktree add /tmp/old <commit>
    python bf16_seeds.py
"""
import argparse, json, subprocess, sys, tempfile
from pathlib import Path
from common import commit, provenance

def curve(seed: int, steps: int, evals: int) -> list[dict]:
    "One run's held-out evaluations: tokens, loss, accuracy."
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.executable, '-c', 'from bert_nb.command import main; main()', 'train', '--steps',
                        str(steps), '--evals', str(evals), '--bf16', '--seed', str(seed), '--quiet', '--out', d],
                       check=True, capture_output=True)
        m = json.loads((Path(d) / 'metrics.json').read_text())
    return [dict(tokens=e['tokens'], loss=e['loss'], acc=e['acc']) for e in m['eval']]

def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    p.add_argument('--steps', type=int, default=800)
    p.add_argument('--evals', type=int, default=8)
    p.add_argument('--before', action='store_true', help="the bert_nb imported is the code before: kept as 'before'")
    p.add_argument('--out', default=str(Path(__file__).with_name('bf16_seeds.json')))
    ns = p.parse_args()
    runs = {s: curve(s, ns.steps, ns.evals) for s in ns.seeds}
    for s, c in runs.items(): print(f"seed {s}: " + ', '.join(f"{e['tokens'] / 1e6:.2f} M {e['loss']:.3f}" for e in c))
    out = Path(ns.out)
    res = json.loads(out.read_text()) if out.exists() else {}
    res |= provenance() | {'steps': ns.steps, 'before' if ns.before else 'now': dict(commit=commit(), runs=runs)}
    out.write_text(json.dumps(res, indent=1) + '\n')

if __name__ == '__main__': sys.exit(main())
