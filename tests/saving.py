"""Saved directories for the tests of loading: another process saving into one in a loop (a load sees one save whole),
and a copy of one with its config and weights edited (a load checks what it reads)."""
import json, shutil, subprocess, sys
from contextlib import contextmanager

LOOP = '''
import sys, time
end = time.time() + float(sys.argv[2])
while True:
    for m in models: {save}(m, sys.argv[1])
    if time.time() > end: break
'''

@contextmanager
def saving(setup: str, save: str, dir, seconds: float = 20):
    "`setup` defines `models`; each is saved once with `save`, then they are saved in turn until the block ends."
    script = setup + LOOP.format(save=save)
    subprocess.run([sys.executable, '-c', script, str(dir), '0'], check=True)  # one save of each, before any load
    saver = subprocess.Popen([sys.executable, '-c', script, str(dir), str(seconds)])
    try: yield
    finally: saver.kill(); saver.wait()

def edited(src, dst, config: dict | None = None, weights: dict | None = None):
    "A copy of the saved directory `src` at `dst`, its config.json's keys and its weights replaced (None: removed)."
    from safetensors.torch import load_file, save_file
    shutil.copytree(src, dst)
    if config:
        c = json.loads((dst / 'config.json').read_text())
        (dst / 'config.json').write_text(json.dumps({k: v for k, v in (c | config).items() if v is not None}))
    if weights:
        sd = load_file(dst / 'model.safetensors') | weights
        save_file({k: v for k, v in sd.items() if v is not None}, dst / 'model.safetensors')
    return dst
