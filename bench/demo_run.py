"""`make demo` as the README shows it: `bert-nb train` (5 minutes by default) and `bert-nb fill --heldout 8`, each run's
figures and its fill output kept in bench/demo_run.json, which the README and the Results page print.

    python bench/demo_run.py                       # one run, as `make demo` (bf16 where the CPU has it)
    python bench/demo_run.py --runs 3 --no-bf16    # three float32 runs, as a CPU without bf16 trains
"""
import argparse, json, subprocess, sys, tempfile
from pathlib import Path
from common import save, RUN

EXE = Path(sys.executable).parent / 'bert-nb'

def one(args: list[str]) -> dict:
    "A run of `bert-nb train ARGS` then `bert-nb fill --heldout 8`: the run's figures and what fill printed."
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / 'demo'
        subprocess.run([str(EXE), 'train', '--out', str(out), '--quiet', *args], check=True)
        fill = subprocess.run([str(EXE), 'fill', str(out), '--heldout', '8'], check=True, capture_output=True,
                              text=True).stdout
        m = json.loads((out / 'metrics.json').read_text())
    keep = ('steps', 'tokens', 'tokens_per_s', 'wall_s', 'budget_s', 'used_s', 'used', 'bf16', 'compiled')
    return dict({k: m.get(k) for k in keep}, acc=m['held_out']['acc'], loss=m['held_out']['loss'],
                args=args, fill=fill.rstrip('\n'))

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--runs', type=int, default=1)
    ap.add_argument('--no-bf16', action='store_true', help='train in float32, as a CPU without bf16 does')
    ap.add_argument('--out', default='demo_run', help='bench/OUT.json')
    a = ap.parse_args()
    RUN['runs'] = []
    for i in range(a.runs):
        RUN['runs'].append(one(['--no-bf16'] if a.no_bf16 else []))
        r = RUN['runs'][-1]
        print(f"run {i + 1}: {r['steps']:,} steps, {r['tokens']:,} tokens at {r['tokens_per_s']:,.0f} tokens/s, "
              f"{r['used']:.1%} of the budget, held-out accuracy {r['acc']:.1%}", flush=True)
    save(a.out)
