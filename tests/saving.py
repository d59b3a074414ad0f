"""Another process saving models into one directory in a loop: for the tests that a load sees one save whole."""
import subprocess, sys
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
