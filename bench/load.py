"""`make demo`'s promise under load: the share of its budget a `--minutes` run spends while other processes keep the
machine's cores busy. N busy processes (a Python loop each, the load a shared laptop or CI runner adds) run beside
`bert-nb train --minutes M`; the run's metrics.json says what it used. A run keeps back, for finishing, five times its
last evaluation's seconds; under load those seconds grow and wander, so this is where the promise is measured.
Writes bench/load.json (each load a row), which the Results page reads.

    python bench/load.py                       # a load of 5 (five busy processes), 5 minutes, as make demo
    python bench/load.py --load 0 5 10 --minutes 5
"""
import argparse, json, multiprocessing as mp, os, subprocess, sys, tempfile
from pathlib import Path
from common import provenance

SAVED = Path(__file__).with_name('load.json')
EXE = Path(sys.executable).parent / 'bert-nb'

def busy():
    "One process's worth of load: a loop that never sleeps (ended by the parent)."
    while True: pass

def run(load: int, minutes: float) -> dict:
    "One `bert-nb train --minutes` run beside `load` busy processes: its budget, what it used, how far it got."
    procs = [mp.Process(target=busy, daemon=True) for _ in range(load)]
    for p in procs: p.start()
    try:
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([str(EXE), 'train', '--minutes', str(minutes), '--out', f'{d}/run', '--quiet'],
                               capture_output=True, text=True)
            if r.returncode: raise SystemExit(f"bert-nb train failed:\n{r.stderr[-2000:]}")
            m = json.loads(Path(f'{d}/run/metrics.json').read_text())
            loadavg = float(Path('/proc/loadavg').read_text().split()[0])  # the last minute's, busy and run
            said = [l for l in r.stderr.splitlines() if 'of its' in l and 'budget' in l]
    finally:
        for p in procs: p.terminate()
    return dict(load=load, cores=os.cpu_count(), minutes=minutes, used=m['used'], used_s=m['used_s'],
                steps=m['steps'], evals=len(m['eval']), acc=m['held_out']['acc'], loadavg=loadavg,
                warned=said[0] if said else None)

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--load', type=int, nargs='+', default=[5], help='busy processes beside the run')
    ap.add_argument('--minutes', type=float, default=5.0)
    a = ap.parse_args()
    rows = json.loads(SAVED.read_text())['runs'] if SAVED.exists() else []
    for load in a.load:
        row = run(load, a.minutes) | provenance()
        print(f"load {load} on {row['cores']} cores: {row['used']:.1%} of {a.minutes:g} minutes used, "
              f"{row['steps']:,} steps" + (f"; it said: {row['warned']}" if row['warned'] else ''), flush=True)
        rows = [r for r in rows if (r['load'], r['minutes']) != (load, a.minutes)] + [row]
        SAVED.write_text(json.dumps(dict(runs=rows), indent=1) + '\n')
