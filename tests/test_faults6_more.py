import json, os, threading, time
import numpy as np
import pytest
import torch
from bert_nb import BertConfig, BertForMLM, PCG32, mlm_mask
from bert_nb.command import MaskTally
from bert_nb.files import _read_whole, _recover

@pytest.mark.parametrize('T', [4, 5, 6, 7])
def test_rows_just_past_the_reach_read_only_their_band(T):
    """Rows of w + 1 tokens are read whole by every layer (the global path serves); from w + 2 on, up to the window
    and past it, a local layer must not let token 0 read token w + 1. Against chapter 06's NumPy formula, float64."""
    from test_modernbert import CFG, np_encoder, random_model  # window 6: w = 3
    from tol import encoder_tol
    enc = random_model(__import__('bert_nb.modernbert', fromlist=['x']).ModernBertEncoder)
    ids = torch.randint(3, CFG.vocab, (2, T), generator=torch.Generator().manual_seed(T))
    mask = torch.ones_like(ids); mask[1, T - 1:] = 0  # one full row, one a token shorter
    P = {k: v.numpy() for k, v in enc.state_dict().items()}
    want = np_encoder(P, ids.numpy(), mask.numpy(), CFG)
    got = enc(ids, mask).detach().numpy()
    assert np.abs(got - want).max() <= encoder_tol(CFG, T, torch.float64, np.abs(want).max())

def test_the_picked_share_is_of_the_positions_that_can_be_picked():
    "Each batch's picked share is its picked positions over its non-special ones (not over every position)."
    rng, tally, want = np.random.default_rng(1), MaskTally(8, 4), []
    for k in range(4):
        ids = rng.integers(5, 50, (6, 8)); ids[:, 0] = 2; ids[:, -1] = 3; ids[k, 3:] = 0  # padding, unevenly
        special = np.isin(ids, [0, 1, 2, 3, 4])
        inputs, labels = mlm_mask(ids, special, 4, 50, 0.3, PCG32(k))
        tally.add(ids, inputs, labels, special)
        want.append((labels != -100).sum() / (~special).sum())
    assert np.allclose(tally.stats(0.3, 50)['picked_share'], want, rtol=0, atol=1e-15)

def test_an_unfinished_save_is_never_recovered(tmp_path):
    "A dead save's temporary directory (.tmp-) holds what was half written, config.json or not: it is dropped."
    dead = 999_999_999
    tmp = tmp_path / f'.m.tmp-{dead}-abcdefgh'; tmp.mkdir(); (tmp / 'config.json').write_text('{"v": 1}')
    _recover(tmp_path / 'm')
    assert os.listdir(tmp_path) == []

def test_a_load_waits_for_a_live_save_between_its_renames(tmp_path):
    "A live save (this process) whose new directory is not yet in place: the load waits for it, never refuses."
    new = tmp_path / f'.m.new-{os.getpid()}-abcdefgh'; new.mkdir(); (new / 'config.json').write_text('{"v": 2}')
    later = threading.Timer(0.3, lambda: os.rename(new, tmp_path / 'm')); later.start()
    try: got = _read_whole(tmp_path / 'm', lambda d: json.loads((d / 'config.json').read_text()))
    finally: later.join()
    assert got == {'v': 2}
