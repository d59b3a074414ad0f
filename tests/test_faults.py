"""Where round 5's hidden faults survived (#43): a test for each area that fails when the code there is wrong, each
with an oracle of its own (the chapter's layer, a PCG32 replay, a count written out here, a property at the size
where the fault shows). `make mutants` holds a fault in each area that these tests kill."""
import json, os, shutil, warnings
from dataclasses import replace
from pathlib import Path
import numpy as np
import pytest
import torch
import torch.nn as nn
from pcg_ref import RefPCG
from tol import encoder_tol
from bert_nb import (KJV, BertConfig, BertEncoder, BertForMLM, MLMCollator, PCG32, WordPieceTokenizer, kjv_verses,
                     load_parts, mlm_mask, save_parts)
from bert_nb.checks import _check_shares, _check_special
from bert_nb.command import _parser, _new_args, main
from bert_nb.run import MaskTally
from bert_nb.nodes import _shard
from bert_nb.data import load_data, mlm_loader, prepare_data
from bert_nb.electra import SHARES, Electra, electra_loss, train_electra
from bert_nb.files import _recover
from bert_nb.finetune import Task, bag_of_words, majority, verse_task
from bert_nb.pretrain import pack_rows

# ------------------------------------------------------------------------------------------------------- dropout

CFG = BertConfig(60, max_len=16, d_model=32, n_heads=2, n_layers=2, d_ff=64, dropout=0.3, attn_dropout=0.0)

def test_dropout_falls_where_the_chapters_layer_puts_it():
    """In training, the encoder's fast path (`encode`: every token of a batch given a mask, `layer_tokens`) draws
    its dropout masks where the chapter's loop over BertLayer.forward does: after the embeddings, after attention,
    after the feed-forward. The same torch seed, the same masks, the same output; every encoder test ran with
    dropout 0."""
    enc = BertEncoder(CFG, PCG32(0)).train()
    ids = torch.randint(5, 60, (4, 16), generator=torch.Generator().manual_seed(0))
    real = torch.ones_like(ids)  # a mask, none of it padding: the seam's path, on all B*T tokens
    torch.manual_seed(1); h = enc(ids)  # the chapter's loop
    torch.manual_seed(1); got = enc(ids, attn_mask=real)
    # the same masks and the same formula, summed in other orders (SDPA against the chapter's softmax): tol.py's bound
    torch.testing.assert_close(got, h, rtol=0, atol=encoder_tol(CFG, 16, torch.float32, h.abs().max().item()))
    torch.manual_seed(1); again = enc(ids, attn_mask=real)
    torch.manual_seed(2); other = enc(ids, attn_mask=real)
    assert torch.equal(got, again) and not torch.equal(got, other)  # dropout is on, and seeded by torch alone
    torch.manual_seed(1); plain = enc.drop(enc.embed(ids))
    for layer in enc.layers: plain = layer(plain)
    assert torch.equal(plain, h)  # the chapter's forward is its loop, draw for draw

def test_the_real_token_path_drops_out_at_the_same_rate(monkeypatch):
    "Padded, the fast path runs the real tokens only: their embeddings drop out at p, the padding's never matter."
    import bert_nb.speed as speed
    enc = BertEncoder(replace(CFG, dropout=0.5), PCG32(0)).train()
    ids = torch.randint(5, 60, (8, 16), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(8, 16, dtype=torch.long); mask[::2, 9:] = 0
    seen, layer_tokens = [], speed.layer_tokens
    monkeypatch.setattr(speed, 'layer_tokens', lambda layer, x, *a: seen.append(x.detach()) or layer_tokens(layer, x, *a))
    torch.manual_seed(3); enc(ids, None, mask)
    x = seen[0]
    assert x.shape == (int(mask.sum()), 32)       # the real tokens only
    zeros = (x == 0).double().mean().item()       # embedding dropout: a share p of the entries zeroed (n = 3,520)
    assert abs(zeros - 0.5) < 4 * (0.25 / x.numel()) ** 0.5

def test_the_attention_maps_path_drops_nothing_at_inference():
    "output_attentions takes the explicit softmax: in eval mode, no dropout there either (attn_dropout 0.5)."
    enc = BertEncoder(replace(CFG, attn_dropout=0.5), PCG32(0)).eval()
    ids = torch.randint(5, 60, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        out = enc(ids, output_attentions=True)
        want = enc(ids)  # SDPA against the explicit softmax: one formula, tol.py's bound
        torch.testing.assert_close(out.last_hidden_state, want, rtol=0,
                                   atol=encoder_tol(CFG, 16, torch.float32, want.abs().max().item()))
        assert all(torch.allclose(w.sum(-1), torch.ones(())) for w in out.attentions)  # rows of probabilities

# --------------------------------------------------------------------------------------------- prepared data

def fisher_yates(n: int, seed: int, stream: int) -> list[int]:
    "shuffle's permutation, replayed on the reference generator: for i from n - 1 down to 1, swap i with below(i + 1)."
    rng, idx = RefPCG(seed, stream), list(range(n))
    for i in range(n - 1, 0, -1):
        j = rng.bounded(i + 1); idx[i], idx[j] = idx[j], idx[i]
    return idx

def test_the_held_out_lines_of_a_corpus_longer_than_a_chunk(tmp_path):
    """25,000 lines, tokenized 10,000 at a time: the held-out lines are the first 2% of a PCG32(seed, SPLIT) shuffle,
    spread over the whole corpus, in every chunk (held.txt), and train.bin holds the rest."""
    lines = [f'word{i % 97} and {"the" if i % 3 else "lord"} {i}' for i in range(25_000)]
    (tmp_path / 'c.txt').write_text('\n'.join(lines) + '\n')
    d = prepare_data([tmp_path / 'c.txt'], tmp_path / 'd', vocab=KJV, seed=5, say=lambda s: None)
    held = sorted(fisher_yates(25_000, 5, 2**63)[:500])
    assert (d / 'held.txt').read_text().splitlines() == [lines[i] for i in held]
    assert held[0] < 10_000 <= held[len(held) // 2] < 20_000 <= held[-1]  # in every chunk
    tok = WordPieceTokenizer.from_vocab(KJV)
    train = set(range(25_000)) - set(held)
    want = sum(len(tok.encode(lines[i])) - 2 for i in train)
    assert json.loads((d / 'meta.json').read_text())['tokens']['train'] == want

def test_a_vocabulary_edited_after_prepare_is_refused(tmp_path, corpus):
    d = prepare_data([corpus], tmp_path / 'd', vocab_size=300, say=lambda s: None)
    v = (d / 'vocab.txt').read_text().splitlines(); v[-1], v[-2] = v[-2], v[-1]  # two ids swapped: the same tokens
    (d / 'vocab.txt').write_text('\n'.join(v) + '\n')
    with pytest.raises(ValueError, match='vocab'): load_data(d, 32)

def test_the_loader_draws_each_epoch_from_its_own_stream():
    "Epoch e's order: a stable argsort of n draws of PCG32(seed, 2**62 + e), replayed on the reference generator."
    texts = [f'text {i}' for i in range(23)]
    loader = mlm_loader(texts, lambda b: [x['text'] for x in b], 23, seed=4)
    for e, batch in enumerate([next(iter(loader)) for _ in range(3)]):
        ref = RefPCG(4, 2**62 + e)
        order = np.argsort([ref.random() for _ in range(23)], kind='stable')
        assert batch == [texts[i] for i in order], e

# ------------------------------------------------------------------------------------------------- the command

def test_each_rank_trains_on_its_own_shard(tmp_path, corpus):
    d = prepare_data([corpus], tmp_path / 'd', vocab_size=300, say=lambda s: None)
    data = load_data(d, 32)
    n = len(data['rows'])
    shards = [_shard(data, r, 3, 1) for r in range(3)]
    assert [len(s) for s in shards] == [len(range(r, n, 3)) for r in range(3)]
    for r, s in enumerate(shards):  # rows r, r + 3, r + 6, ...: every row in one shard, no row in two
        assert np.array_equal(s.take(np.arange(len(s)))[0], data['rows'].take(np.arange(r, n, 3))[0])

def new_args(*argv):
    ns = _parser().parse_args(['train', *argv]); ns.given = {t.split('=')[0] for t in argv if t.startswith('--')}
    return _new_args(ns)[0]

def test_steps_and_minutes_together_keep_both(corpus):
    assert (new_args('--corpus', str(corpus)).minutes, new_args('--corpus', str(corpus)).steps) == (5.0, None)
    assert new_args('--corpus', str(corpus), '--steps', '7').minutes is None  # steps alone: no budget
    a = new_args('--corpus', str(corpus), '--steps', '7', '--minutes', '0.5')
    assert (a.steps, a.minutes) == (7, 0.5)

def test_an_option_written_with_equals_is_seen_by_the_clash_checks(tmp_path, capsys):
    "--lr=0.1 is --lr: a resumed run refuses it, as --init refuses --d-model=64."
    (tmp_path / 'run').mkdir(); (tmp_path / 'run' / 'args.json').write_text('{}')
    assert main(['--resume', str(tmp_path / 'run'), '--lr=0.1']) == 2
    assert 'drop --lr' in capsys.readouterr().err
    assert main(['--init', str(KJV), '--d-model=64', '--out', str(tmp_path / 'o')]) == 2
    assert 'drop --d-model' in capsys.readouterr().err

def test_the_tally_counts_what_the_masks_show():
    "MaskTally against a count written out here: what each picked position shows, and each position's pick rate."
    rng = np.random.default_rng(0)
    tally, picks, shown = MaskTally(8, 4), np.zeros(8), np.zeros(3, int)
    for _ in range(5):
        ids = rng.integers(5, 50, (6, 8)); ids[:, 0] = 2; ids[:, -1] = 3
        special = np.isin(ids, [0, 1, 2, 3, 4])
        inputs, labels = mlm_mask(ids, special, 4, 50, 0.5, PCG32(int(rng.integers(100))))
        tally.add(ids, inputs, labels, special)
        for i, j in zip(*np.nonzero(labels != -100)):
            picks[j] += 1
            shown[0 if inputs[i, j] == 4 else 2 if inputs[i, j] == ids[i, j] else 1] += 1
    s = tally.stats(0.5, 50)
    assert s['outcome'].tolist() == shown.tolist() and np.array_equal(s['pick_rate'], picks / 30)
    assert s['special'].tolist() == [True] + [False] * 6 + [True] and len(s['picked_share']) == 5

# ------------------------------------------------------------------------------------------------- the checks

def test_shares_and_special_masks_are_exact():
    with pytest.raises(ValueError, match='summing to 1'): _check_shares((0.8, 0.1, 0.1 + 1e-5))
    assert _check_shares((0.8, 0.1, 0.1 + 1e-9)) == (0.8, 0.1, 0.1 + 1e-9)  # float rounding of 1, not a share
    for bad in (2, -1):
        s = np.zeros((1, 4), np.int64); s[0, 1] = bad
        with pytest.raises(ValueError, match='special_mask must be bool'): _check_special(s, (1, 4))

# ------------------------------------------------------------------------------------------------ saves and loads

def test_the_newest_complete_save_is_recovered(tmp_path):
    "Two dead saves, each complete, left beside a directory a kill took out: the newer is renamed in; a dead one "
    "without config.json (half written) is never chosen."
    dead = 999_999_999
    for k, (v, t) in enumerate([(1, 1000), (2, 2000)]):
        p = tmp_path / f'.m.new-{dead}-abcdefg{k}'; p.mkdir(); (p / 'config.json').write_text(json.dumps({'v': v}))
        os.utime(p, (t, t))
    half = tmp_path / f'.m.new-{dead}-abcdefgh'; half.mkdir(); os.utime(half, (3000, 3000))
    _recover(tmp_path / 'm')
    assert json.loads((tmp_path / 'm' / 'config.json').read_text()) == {'v': 2} and os.listdir(tmp_path) == ['m']

class Heads(nn.Module):
    "A BERT and two heads that share one weight."
    def __init__(self, cfg):
        super().__init__()
        self.bert, self.a, self.b = BertEncoder(cfg, PCG32(1)), nn.Linear(8, 3), nn.Linear(8, 3)
        self.b.weight = self.a.weight

SMALL = BertConfig(40, max_len=8, d_model=8, n_heads=2, n_layers=1, d_ff=16)

def test_a_tie_between_heads_round_trips_and_extra_keys_are_refused(tmp_path):
    m = Heads(SMALL)
    with torch.no_grad(): m.a.weight.normal_(); m.a.bias.normal_()
    save_parts(m, tmp_path / 'p')
    back = load_parts(Heads(SMALL), tmp_path / 'p')
    assert torch.equal(back.b.weight, m.a.weight) and back.b.weight is back.a.weight
    from safetensors.torch import load_file, save_file
    sd = load_file(tmp_path / 'p' / 'heads.safetensors'); sd['c.weight'] = torch.zeros(2)
    save_file(sd, tmp_path / 'p' / 'heads.safetensors')
    with pytest.raises(ValueError, match=r"does not fit the model given: \['c.weight'\]"): load_parts(Heads(SMALL), tmp_path / 'p')

def test_ties_are_matched_by_name_not_by_count(tmp_path):
    "A model tying other tensors, as many of them as the saved one tied: refused, not loaded into the wrong tie."
    m = Heads(SMALL); save_parts(m, tmp_path / 'p')
    other = Heads(SMALL); other.b.weight = nn.Parameter(other.b.weight.detach().clone()); other.b.bias = other.a.bias
    with pytest.raises(ValueError, match='not alike'): load_parts(other, tmp_path / 'p')

# ---------------------------------------------------------------------------------------------------- ELECTRA

PAIR = BertConfig(40, max_len=16, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0)

def test_the_discriminator_never_reads_the_padding():
    """What sits at the padded positions changes no logit at a real token, and a padded row's logits are those of the
    row cut to its length, read alone (the oracle: no padding, no mask)."""
    m = Electra(PAIR, rng=PCG32(0)).eval()
    ids = np.array([[2, 7, 9, 11, 13, 8, 12, 3], [2, 5, 6, 7, 3, 0, 0, 0]])
    inputs, labels = (torch.from_numpy(x) for x in mlm_mask(ids, ids < 5, 4, 40, 0.5, PCG32(1), shares=SHARES))
    attn = torch.from_numpy(ids != 0)
    read = []
    m.disc.register_forward_pre_hook(lambda mod, args: read.append(args[0].clone()))
    with torch.no_grad():
        out = electra_loss(m, inputs, labels, attn, PCG32(2))
        junk = inputs.clone(); junk[1, 5:] = 39
        again = electra_loss(m, junk, labels, attn, PCG32(2))
        alone = m.rtd(m.disc(read[0][1:, :5]))
    assert torch.equal(out.logits[attn], again.logits[attn])
    # the RTD head adds one dense layer to the encoder's chain: a layer's bound more
    tol = encoder_tol(replace(PAIR, n_layers=PAIR.n_layers + 1), 8, torch.float32, alone.abs().max().item())
    torch.testing.assert_close(out.logits[1, :5], alone[0], rtol=0, atol=tol)

def test_electra_masks_with_its_own_shares(monkeypatch):
    """What the generator reads at the picked positions: [MASK] at 85%, the token itself at 15%, never a random token
    (SHARES), counted over a 20-step run's batches (some 3,000 picked positions)."""
    import bert_nb.electra as E
    tok = WordPieceTokenizer.from_vocab(KJV)
    rows, _ = pack_rows(tok, [v.text for v in kjv_verses()[:300]], 16)
    m, calls, real = Electra(replace(PAIR, vocab=len(tok)), rng=PCG32(0)), [], E.electra_loss
    def spy(model, inputs, labels, *a, **k):
        calls.append((inputs.clone(), labels.clone())); return real(model, inputs, labels, *a, **k)
    monkeypatch.setattr(E, 'electra_loss', spy)
    train_electra(m, rows, 20, tok, PCG32(1), PCG32(2), batch_size=32, p=0.3)
    shown = torch.cat([x[l != -100] for x, l in calls]); label = torch.cat([l[l != -100] for _, l in calls])
    n, masked, kept = len(shown), (shown == tok.mask_id).sum().item(), (shown == label).sum().item()
    assert masked + kept == n and n > 2000                            # never a random token
    assert abs(masked / n - 0.85) < 4 * (0.85 * 0.15 / n) ** 0.5

# ------------------------------------------------------------------------------------------- fine-tuning baselines

def flipped(task: Task, where: str) -> Task:
    "The task with the labels of one set flipped (two labels)."
    return task._replace(**{where: [(t, 1 - y) for t, y in getattr(task, where)]})

def test_the_majority_class_is_the_training_sets():
    task = Task('t', ['a', 'b'], [('x', 0)] * 3 + [('y', 1)], [('z', 1)], [('u', 1)] * 3 + [('v', 0)], {})
    assert majority(task) == 0.25  # train says a, which is a quarter of the test set (test alone would say b: 0.75)

def test_the_bag_of_words_weight_is_chosen_without_the_test_set():
    "Flipping the test labels turns the test accuracies upside down; the weight chosen on the dev set is the same."
    tok = WordPieceTokenizer.from_vocab(KJV)
    task = verse_task('testament', n_train=300, n_dev=150, n_test=150, seed=2)
    decays = (1e-4, 1.0, 100.0)
    (acc, w), (acc2, w2) = bag_of_words(tok, task, decays), bag_of_words(tok, flipped(task, 'test'), decays)
    assert w == w2 and acc + acc2 == pytest.approx(1.0)

def test_rounding_counts_the_sums_along_each_layer():
    """The chapters' float32 tolerance: n u per sum, the sums of a layer counted here from its formula (q, k, v,
    the scores, the weighted values, W_o, a LayerNorm, W_in, W_out, a LayerNorm), L + 1 layers, two computations."""
    from bert_nb.diagnostics import rounding
    cfg, T = BertConfig(100, d_model=48, n_heads=3, n_layers=4, d_ff=80), 9
    sums = {'qkv': 48, 'scores': 48 // 3, 'values': T, 'o': 48, 'ln1': 2 * 48, 'in': 48, 'out': 80, 'ln2': 2 * 48}
    assert rounding(cfg, T, 3.0, u=2**-10) == 2 * (4 + 1) * sum(sums.values()) * 2**-10 * 3.0

