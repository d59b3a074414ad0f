"""Mutation testing: apply each fault to a scratch copy of the package, run the tests against it, print who killed it.

A fault is a small, plausible mistake in the exported code (`bert_nb/*.py`), written as one exact text replacement
inside one top-level block (a function or class). The tests must fail on every fault that changes behaviour; a
fault that survives is either a missing test or an equivalent mutant, which the table says.

    make mutants                       # every fault, two at a time
    python tools/mutants.py s01 s07    # chosen faults
"""
import argparse, os, re, shutil, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

root = Path(__file__).resolve().parents[1]
MASKING, ENCODER = ['tests/test_masking.py'], ['tests/test_encoder.py', 'tests/test_checkpoints.py']
ELECTRA, FINETUNE = ['tests/test_electra.py'], ['tests/test_finetune.py']
MODERN = ['tests/test_modernbert.py']
TAGGING = ['tests/test_tagging.py']
WHOLE = ['tests/test_entries.py', '-k', 'read_whole or one_save']  # a load that a save lands during

@dataclass
class Fault:
    id: str
    what: str
    file: str      # under bert_nb/
    block: str     # the text that starts the top-level block to change, e.g. 'def _mask_loop('
    old: str
    new: str
    tests: list    # test files to run (all must pass on the unchanged code)

# The seed's pitfall faults: s01-s05 on both masking paths (the loop and the vectorised PCG32 path), s06-s12 in the encoder.
FAULTS = [
    Fault('s01-loop', 'special positions picked', 'bert.py', 'def _mask_loop(',
          '        if skip: continue\n', '', MASKING),
    Fault('s01-fast', 'special positions picked', 'bert.py', 'def _mask_pcg(',
          'pos = np.flatnonzero(~special.reshape(-1))', 'pos = np.arange(special.size)', MASKING),
    Fault('s02-loop', 'every position labelled', 'bert.py', 'def _mask_loop(',
          'inputs, labels = ids.copy(), np.full_like(ids, -100)', 'inputs, labels = ids.copy(), ids.copy()', MASKING),
    Fault('s02-fast', 'every position labelled', 'bert.py', 'def _mask_pcg(',
          'inputs, labels = ids.copy(), np.full_like(ids, -100)', 'inputs, labels = ids.copy(), ids.copy()', MASKING),
    Fault('s03-loop', 'random and keep swapped', 'bert.py', 'def _mask_loop(',
          'elif a == 1: shown[i] = rng.below(vocab)', 'elif a == 2: shown[i] = rng.below(vocab)', MASKING),
    Fault('s03-fast', 'random and keep swapped', 'bert.py', 'def _pcg_picks(',
          'act = (u2 >= cuts[0]).astype(np.int64) + (u2 >= cuts[1])',
          'act = (u2 >= cuts[0]).astype(np.int64) * (2 - (u2 >= cuts[1]))', MASKING),
    Fault('s04-loop', 'the label set to the shown token', 'bert.py', 'def _mask_loop(',
          '    return inputs, labels', '    labels[labels != -100] = inputs[labels != -100]\n    return inputs, labels', MASKING),
    Fault('s04-fast', 'the label set to the shown token', 'bert.py', 'def _mask_pcg(',
          '    shown[at[a == 1]] = r[take[a == 1]].astype(np.int64) % vocab\n',
          '    shown[at[a == 1]] = r[take[a == 1]].astype(np.int64) % vocab\n    label[at] = shown[at]\n', MASKING),
    Fault('s05-loop', 'a second uniform drawn for every position', 'bert.py', 'def _mask_loop(',
          '        if first[i]: picked = rng.uniform() < p',
          '        u2 = rng.uniform()\n        if first[i]: picked = rng.uniform() < p', MASKING),
    Fault('s05-fast', 'a second uniform drawn for every position (the stream left two draws per position on)',
          'bert.py', 'def _mask_pcg(', 'rng.advance(int(used))', 'rng.advance(int(used) + m - len(k))', MASKING),
    Fault('s06', "GPT-2's tanh GELU", 'speed.py', 'def _gelu(',
          'return F.gelu(x) if torch.is_grad_enabled() else torch.ops.aten.gelu_(x)', "return F.gelu(x, approximate='tanh')",
          ENCODER),
    Fault('s07', 'pre-LN instead of post-LN', 'speed.py', 'def layer_tokens(',
          'return layer.ff(layer.attn_ln(x + layer.drop(y)))', 'return layer.ff(x + layer.drop(layer.attn_ln(y)))',
          ENCODER),
    Fault('s07-plain', 'pre-LN instead of post-LN (the chapter\'s layer)', 'bert.py', 'class BertLayer(',
          'a = self.attn_ln(h + self.drop(self.attn(h, _attn_bias(attn_mask, h.dtype))))',
          'a = h + self.drop(self.attn(self.attn_ln(h), _attn_bias(attn_mask, h.dtype)))', ENCODER),
    Fault('s08', 'padded keys not masked', 'bert.py', 'def _attn_bias(',
          'if attn_mask is None: return None', 'return None', ENCODER),
    Fault('s09', 'a causal mask', 'speed.py', 'def layer_tokens(',
          'y = _attend(q, k, v, bias,',
          'y = _attend(q, k, v, (0 if bias is None else bias) + torch.full((T, T), torch.finfo(q.dtype).min,'
          ' dtype=q.dtype, device=q.device).triu(1),', ENCODER),
    Fault('s10', 'token types never added', 'bert.py', 'class BertEncoder(',
          'else self.type_emb(token_type_ids)', 'else self.type_emb.weight[0]', ENCODER),
    Fault('s11', "the decoder's bias left out", 'bert.py', 'class MLMHead(',
          'return F.linear(x, word_emb, self.bias)', 'return F.linear(x, word_emb)', ENCODER),
    Fault('s12', 'the decoder not tied to the word table (no gradient through it)', 'bert.py', 'class MLMHead(',
          'return F.linear(x, word_emb, self.bias)', 'return F.linear(x, word_emb.detach(), self.bias)', ENCODER),
    # every load reads one save whole
    Fault('z01', 'a load trusts what it read while a save swapped the directory', 'files.py', 'def _read_whole(',
          '        if _inode(dir) == at: return got', '        return got',
          ['tests/test_files.py', 'tests/test_entries.py', '-k', 'swap or read_whole or whole_save']),
    Fault('z02', "a head read beside another save's encoder", 'finetune.py', 'def _read_head(',
          'return _read_whole(dir, lambda d: _head(d, what, pooler))', 'return _head(dir, what, pooler)',
          WHOLE),
    Fault('z03', "a ModernBERT's config read beside another save's weights", 'modernbert.py', 'def load_modernbert(',
          'model = _read_whole(Path(dir), lambda d: _load(d, cls))', 'model = _load(Path(dir), cls)',
          WHOLE),
    Fault('z04', "fill's model read beside the next save's vocabulary", 'pretrain.py', 'def load_model(',
          'return _read_whole(find_model(path), read)', 'return read(find_model(path))',
          WHOLE),
    Fault('z05', "--init's weights checked against the next save's vocabulary", 'pretrain.py', 'def init_model(',
          'return _read_whole(find_model(path), read)', 'return read(find_model(path))',
          WHOLE),
    Fault('z06', "a ModernBERT read for fill beside the next save's vocabulary", 'command.py', 'def _load(',
          'return _read_whole(find_model(path), read)', 'return read(find_model(path))',
          WHOLE),
    # ModernBERT takes ids as 02's BERT does
    Fault('z07', "ModernBERT's narrow integer ids not widened", 'modernbert.py', 'def _check_batch(',
          'ids = _check_token_ids(ids, c.vocab)', '_check_token_ids(ids, c.vocab)', MODERN),
    Fault('z08', 'meta ids taken for a batch', 'checks.py', 'def _check_token_ids(',
          'if ids.is_meta: raise', 'if False: raise', MODERN),
    Fault('z09', "tag_loss takes labels unchecked", 'tagging.py', 'def tag_loss(',
          'labels = _check_labels(labels, logits[..., 0], logits.shape[-1])', 'pass', TAGGING),
    # --init continues a ModernBERT too
    Fault('z10', "--init reads every directory as a BERT", 'command.py', 'def _init(',
          'if not _is_modern(d): return init_model(d)', 'return init_model(d)', MODERN + ['-k', 'init']),
    Fault('z11', "--init of a ModernBERT records its GeGLU's width as --d-ff", 'command.py', 'def _take_init(',
          "ns.d_ff = (3 * c.d_ff + 1) // 2 if arch == 'modernbert' else c.d_ff", 'ns.d_ff = c.d_ff',
          MODERN + ['-k', 'init']),
    Fault('z12', "--init takes an --arch that is not its checkpoint's", 'command.py', 'def _take_init(',
          "if '--arch' in ns.given and ns.arch != arch:", 'if False:', MODERN + ['-k', 'init']),
]

RNG = ['tests/test_rng.py', 'tests/test_contracts.py', 'tests/test_masking.py', 'tests/test_golden.py']
WORDPIECE = ['tests/test_wordpiece.py', 'tests/test_masking.py']
MORE_MASKING = MASKING + ['tests/test_collator.py', 'tests/test_contracts.py', 'tests/test_golden.py']
SAVES = ['tests/test_checkpoints.py', 'tests/test_reliability.py', '-k', 'checkpoint or save or symlink or stale or killed or swap']
PRETRAIN = ['tests/test_contracts.py', 'tests/test_pretrain.py']
DATA = ['tests/test_data_files.py']

# Beyond the seed's faults: the audit's (exact boundaries, the training command) and more of our own, in every module.
FAULTS += [
    Fault('r01', 'below() rejects the output equal to its threshold', 'rng.py', 'class PCG32',
          'if r >= threshold: return r % n', 'if r > threshold: return r % n', RNG),
    Fault('r02', 'below() accepts the output one under its threshold', 'rng.py', 'class PCG32',
          'if r >= threshold: return r % n', 'if r >= threshold - (threshold > 0): return r % n', RNG),
    Fault('r03', 'uniform() divides by 2**32 - 1', 'rng.py', 'class PCG32',
          'return self.next_u32() / 4294967296.0', 'return self.next_u32() / 4294967295.0', RNG),
    Fault('r04', 'seeding skips its second step', 'rng.py', 'class _LCG',
          '        self.state = (self.state + seed) & MASK64\n        self._step()',
          '        self.state = (self.state + seed) & MASK64', RNG),
    Fault('r05', 'sample_categorical takes u == running sum as below it', 'rng.py', 'def sample_categorical(',
          'if u < total: return i', 'if u <= total: return i', RNG),
    Fault('r06', 'normal_init uses log(u) for log(1 - u)', 'rng.py', 'def normal_init(',
          'np.log1p(-u[:, 0])', 'np.log(u[:, 0] + 1e-300)', RNG),
    Fault('r07', 'u32s leaves the generator a draw short', 'rng.py', 'def u32s(',
          '    self.advance(n)', '    self.advance(n - 1)', RNG),
    Fault('r08', 'jump-ahead tables one step off', 'rng.py', 'def _tables(',
          'return a[:n], c[:n]', 'return a[1:n + 1], c[1:n + 1]', RNG),
    Fault('w01', 'never lower-cases (the option ignored)', 'wordpiece.py', 'def _pipeline(',
          'strip_accents=None, lowercase=lowercase', 'strip_accents=None, lowercase=True', WORDPIECE),
    Fault('w02', "a pair's second [SEP] in segment A", 'wordpiece.py', 'def _specials(',
          "$B:1 [SEP]:1", "$B:1 [SEP]:0", WORDPIECE),
    Fault('w03', 'truncation cuts the first text only', 'wordpiece.py', 'class _WordPiece',
          "strategy='longest_first'", "strategy='only_first'", WORDPIECE),
    Fault('w04', 'a duplicated token accepted', 'wordpiece.py', 'def _vocab(',
          '    if twice:', '    if twice and False:', WORDPIECE),
    Fault('w05', 'words of up to 200 characters split into pieces', 'wordpiece.py', 'def _pipeline(',
          'max_input_chars_per_word=MAX_WORD', 'max_input_chars_per_word=200', WORDPIECE),
    Fault('b01', 'mlm_mask accepts an id equal to vocab', 'checks.py', 'def _check_ids(',
          'bad = (a < 0) | (a >= vocab)', 'bad = (a < 0) | (a > vocab)', MORE_MASKING),
    Fault('b02', 'the attention weights never drop out', 'speed.py', 'def layer_tokens(',
          'bias, a.dropout * a.training)', 'bias, 0.0)', ['tests/test_contracts.py'] + ENCODER),
    Fault('b03', "LayerNorm's default eps (1e-5) after attention", 'bert.py', 'class BertLayer(',
          'self.attn_ln = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps)', 'self.attn_ln = nn.LayerNorm(cfg.d_model)',
          ENCODER),
    Fault('b04', 'attention probabilities scaled by sqrt(d_model)', 'bert.py', 'class BertAttention(',
          's = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])',
          's = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1] * self.n_heads)', ENCODER),
    Fault('b05', 'position embeddings shifted by one', 'bert.py', 'class BertEncoder(',
          'self.pos_emb.weight[:x.shape[1]]', 'self.pos_emb.weight[1:x.shape[1] + 1]', ENCODER),
    Fault('b06', 'the loss averaged over the padded rows too', 'speed.py', 'class _DecodedLoss(',
          ".sum() / max(n, 1)", ".sum() / len(y)", ENCODER),
    Fault('b07', 'query and key swapped in the checkpoint map', 'bert.py', '_LAYER = ',
          "('attention.self.query', 'attn.q'), ('attention.self.key', 'attn.k')",
          "('attention.self.query', 'attn.k'), ('attention.self.key', 'attn.q')", ENCODER),
    Fault('b08', 'saved untied (transformers makes a decoder of its own)', 'bert.py', 'def _bert_files(',
          "'tie_word_embeddings': True", "'tie_word_embeddings': False", ENCODER),
    Fault('b09', 'a save drops the other files', 'files.py', 'def _carry(',
          "    for name in set(os.listdir(dir)) - mine:", "    for name in set() - mine:", SAVES),
    Fault('b10', 'a swap cut between its two renames is never finished', 'files.py', 'def _recover(',
          'if done and not dir.exists():', 'if False:', SAVES),
    Fault('b11', 'mask_shares forgets that a random id can be the token itself', 'diagnostics.py', 'def mask_shares(',
          'k + r / vocab]', 'k]', MORE_MASKING),
    Fault('b12', 'a word runs on across a special position', 'bert.py', 'def _word_starts(',
          'new[..., 1:] = special[..., :-1] | (w[..., 1:] != w[..., :-1])',
          'new[..., 1:] = w[..., 1:] != w[..., :-1]', MORE_MASKING),
    Fault('b13', 'whole words: a draw skipped after each picked word', 'bert.py', 'def _walk_words(',
          '        s, w = t, w + 1', '        s, w = t + 1, w + 1', MORE_MASKING),
    Fault('b14', "batch_stream reads SHA-256's bytes big-endian", 'data.py', 'def batch_stream(',
          "digest()[:8], 'little')", "digest()[:8], 'big')", ['tests/test_collator.py']),
    Fault('b15', 'the collator ignores its seed', 'data.py', 'class MLMCollator',
          'PCG32(self.seed, batch_stream(keys))', 'PCG32(0, batch_stream(keys))', ['tests/test_collator.py']),
    Fault('p01', 'pack_rows drops the last partial row', 'pretrain.py', 'def pack_rows(',
          '    n = max(1, -(-len(toks) // body))', '    n = max(1, len(toks) // body); toks = toks[:n * body]',
          PRETRAIN),
    Fault('p02', 'the held-out lines are trained on too', 'pretrain.py', 'def split_lines(',
          'return [l for l, h in zip(lines, held) if not h]', 'return [l for l, h in zip(lines, held)]', PRETRAIN),
    Fault('d01', 'token files: the held-out lines are trained on too', 'data.py', 'def _tokenize(',
          "[l for l, x in zip(chunk, h) if not x]", "[l for l, x in zip(chunk, h)]", DATA),
    Fault('d02', 'a resumed run draws its epoch anew instead of the interrupted one', 'pretrain.py', 'class Batches:',
          "        self.rng.state, self.rng.inc = s['start']\n", '', DATA),
    Fault('d03', 'a short last row loses its [SEP]', 'data.py', 'class TokenRows:',
          'ids[np.arange(len(ids)), lens - 1] = self.tok.sep_id', 'ids[:, -1] = self.tok.sep_id', DATA),
    Fault('p03', "resume leaves torch's generator where it was", 'command.py', 'def _restore(',
          "; torch.set_rng_state(mine['torch_rng'])", '', PRETRAIN),
    Fault('p04', 'fill can answer [PAD] or [UNK]', 'pretrain.py', 'def fill(',
          '    probs[:, special_ids(tok)] = 0', '    probs = probs', PRETRAIN),
    Fault('p05', 'training batches may pick [PAD] positions', 'pretrain.py', 'def _masked(',
          'np.isin(ids, special_ids(tok))', 'np.isin(ids, [tok.cls_id, tok.sep_id])', PRETRAIN),
    Fault('p06', 'no gradient clipping', 'pretrain.py', 'def _step(',
          '    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)\n', '', PRETRAIN),
    Fault('p07', 'every rank masks from the same stream', 'command.py', 'class _Run:',
          'self.mask_rng = PCG32(a.seed, self.rank)', 'self.mask_rng = PCG32(a.seed, 0)', PRETRAIN),
    Fault('p08', 'warmup starts at lr 0', 'pretrain.py', 'def lr_factor(',
          'return (step + 1) / warmup', 'return step / warmup', PRETRAIN),
    Fault('p09', 'a run counts as learned when it only matches the frequency guess', 'command.py', 'def _finish(',
          'learned=acc >= base + LEARNED', 'learned=acc >= base', PRETRAIN),
    Fault('p10', 'the frequency baseline counts [CLS], [SEP] and [PAD]', 'command.py', 'def frequency_baseline(',
          'ids = rows[~np.isin(rows, special_ids(tok))]', 'ids = rows.reshape(-1)', PRETRAIN),
    Fault('p11', "--resume continues the run args.json names, not the one given", 'command.py', 'def _resume_args(',
          '    a.out = str(out)', '    a.out = a.out', ['tests/test_reliability.py', '-k', 'copy']),
    Fault('p12', 'held-out evaluation masks at the training rate', 'pretrain.py', 'def _eval_batches(',
          'tok, EVAL_P, rng, device)', 'tok, 0.4, rng, device)', PRETRAIN),
]

API, UNPAD = ['tests/test_api.py', '-k', 'not mypy'], ['tests/test_unpad.py']
VOCAB = ['tests/test_wordpiece.py', '-k', 'naive or processes or ties']
# What later chapters use (#16) and the unpadded path (#17).
FAULTS += [
    Fault('k01', 'the vocabulary trainer counts each word once, not by its frequency', 'wordpiece.py', 'def merges(',
          'pairs[p] += freq[i]', 'pairs[p] += 1', VOCAB),
    Fault('k02', 'the vocabulary trainer merges stale heap entries (counts that have changed)', 'wordpiece.py',
          'def merges(', 'if pairs.get((a, b)) != -n: continue', 'if pairs.get((a, b), 0) <= 0: continue', VOCAB),
    Fault('k03', 'save_bert drops a real pooler', 'bert.py', 'def _bert_files(',
          'elif enc.pooler is not None:', 'elif False:', API),
    Fault('k04', 'the explicit attention path ignores the padding bias', 'bert.py', 'class BertAttention(',
          'return (s if bias is None else s + bias).softmax(-1)', 'return s.softmax(-1)', API),
    Fault('k05', 'hidden states skip the embeddings', 'speed.py', 'def run_layers(',
          'tuple(hs) if output_hidden_states else None', 'tuple(hs[1:]) if output_hidden_states else None', API),
    Fault('k06', '--init starts from fresh weights', 'command.py', 'def _model(',
          'if a.init: return _init(a.init)', 'if a.init: return BertForMLM(_init(a.init).config)',
          ['tests/test_pretrain.py', '-k', 'init']),
    Fault('u01', 'unpadded attention reads the rows in the wrong order', 'speed.py', 'def layer_tokens(',
          'y = a.o(y if at is None else y[at])', 'y = a.o(y if at is None else y[at.flip(0)])', UNPAD),
    Fault('u02', 'unpadding keeps the padding of the last row', 'speed.py', 'def run_layers(',
          'if len(at) == attn_mask.numel(): at, bias = None, None',
          'if len(at) >= attn_mask.numel() - attn_mask.shape[1]: at, bias = None, None', UNPAD),
]

COLLATOR, BUDGET = ['tests/test_collator.py'], ['tests/test_budget.py']
# The audit of round 3 (#23): the areas where a fault went unnoticed, and more in the unpadded path, pooler and collator.
FAULTS += [
    Fault('g01', 'two generators on different streams compare equal', 'rng.py', 'class _LCG',
          'return isinstance(other, PCG32) and (self.state, self.inc) == (other.state, other.inc)',
          'return isinstance(other, PCG32) and self.state == other.state', ['tests/test_rng.py']),
    Fault('g02', 'training a vocabulary lower-cases whatever lowercase says', 'wordpiece.py', 'def train(',
          'train_vocab(word_counts(texts, lowercase), vocab_size)', 'train_vocab(word_counts(texts), vocab_size)',
          ['tests/test_wordpiece.py']),
    Fault('g03', "whole words: u equal to a share's cut takes the earlier action", 'bert.py', 'def _walk_words(',
          'act = ((u >= cuts[0]).astype(np.int8) + (u >= cuts[1])).tolist()',
          'act = ((u > cuts[0]).astype(np.int8) + (u > cuts[1])).tolist()', COLLATOR),
    Fault('g04', 'whole words: u equal to p picks the word', 'bert.py', 'def _mask_pcg_words(',
          'math.ceil(p * 4294967296.0)', 'math.floor(p * 4294967296.0) + 1', COLLATOR),
    Fault('g05', 'a new word only where the word id grows', 'bert.py', 'def _word_starts(',
          '(w[..., 1:] != w[..., :-1])', '(w[..., 1:] > w[..., :-1])', COLLATOR),
    Fault('g06', "the collator ignores its shares", 'data.py', 'class MLMCollator',
          'shares=self.shares,\n', 'shares=ACTIONS,\n', COLLATOR),
    Fault('g07', 'the collator ignores pad_to_multiple_of', 'data.py', 'def _padded(',
          'T = -(-max(lens) // multiple) * multiple', 'T = max(lens)', COLLATOR),
    Fault('g08', "whole-word batches ignore the examples' word_ids", 'data.py', 'class MLMCollator',
          "words = np.where(given[:, None], words, np.cumsum(", "words = np.where(False, words, np.cumsum(", COLLATOR),
    Fault('g09', "the collator drops the features' token types", 'data.py', 'def _padded(',
          "for key, out in (('token_type_ids', types), ('word_ids', words)):", "for key, out in (('word_ids', words),):",
          COLLATOR),
    Fault('g10', 'the MLM bias under the decoder\'s name is not loaded', 'bert.py', 'def _head_names(',
          "        names['cls.predictions.decoder.bias'] = 'head.bias'", '        pass', ENCODER),
    Fault('g11', 'a budget keeps no time back for finishing', 'command.py', 'class _Budget:',
          'return _broadcast((e, e + step >= self.train_s), self.rank, self.world)',
          'return _broadcast((e, e + step >= self.seconds), self.rank, self.world)', BUDGET),
    Fault('g12', 'a resumed budget run counts the time between its runs', 'command.py', 'def _restore(',
          "_spent_before(r.out)), _clock(), ck['train_s']", "_spent_before(r.out)), 0.0, ck['train_s']", BUDGET),
    Fault('g15', "a budget's evaluations fall at shares of the budget, not of its training time", 'command.py',
          'def _loop(', 'at = lambda e: r.step if steps else e / r.budget.train_s',
          'at = lambda e: r.step if steps else e / r.budget.seconds',
          BUDGET),
    Fault('g16', "a stop's evaluation spends the budget", 'command.py', 'def _evaluate(',
          'if stop: r.budget.spent -= took', 'if stop: pass', BUDGET),
    Fault('g17', 'a run claims its directory by copying args.json into place (two runs started together both win)',
          'command.py', 'def _claim(', "try: os.link(tmp, out / 'args.json')", "try: shutil.copyfile(tmp, out / 'args.json')",
          ['tests/test_entries.py', '-k', 'exactly_one']),
    Fault('g13', "--init refuses the checkpoint's last position", 'command.py', 'def _take_init(',
          'if ns.max_len > c.max_len:', 'if ns.max_len >= c.max_len:', ['tests/test_pretrain.py', '-k', 'init']),
    Fault('g14', 'evaluate leaves the model in eval mode', 'pretrain.py', 'def evaluate(',
          '    model.train(was_training)\n', '', ['tests/test_contracts.py', '-k', 'evaluate']),
    Fault('f01', 'a float tensor reaches the figures as zeros (the pick-rate heatmap showed 0 everywhere)', 'checks.py',
          'def _to_numpy(', 'return (x.float() if x.dtype == torch.bfloat16 else x).numpy()',
          'return np.zeros(x.shape, np.float32) if x.dtype.is_floating_point else x.numpy()',
          ['tests/test_masking.py', '-k', 'pick_rate']),
    Fault('u03', 'the unpadded path attends to padding (no bias on the real tokens)', 'speed.py', 'def run_layers(',
          'x = layer_tokens(layer, x, bias, B, T, at)', 'x = layer_tokens(layer, x, None, B, T, at)', UNPAD),
    Fault('u04', 'padded positions of the output hold ones, not zeros', 'speed.py', 'def _grid(',
          'x.new_zeros(B * T, *x.shape[1:])', 'x.new_ones(B * T, *x.shape[1:])', UNPAD),
    Fault('k07', 'the pooler reads the last position, not [CLS]', 'bert.py', 'class BertPooler(',
          'torch.tanh(self.dense(h[:, 0]))', 'torch.tanh(self.dense(h[:, -1]))', API),
    Fault('k08', 'the pooler without its tanh', 'bert.py', 'class BertPooler(',
          'torch.tanh(self.dense(h[:, 0]))', 'self.dense(h[:, 0])', API),
    # #37: the later chapters' modules
    Fault('e01', "ELECTRA's generator takes its argmax instead of sampling", 'electra.py', 'def sample(',
          'return torch.from_numpy(np.minimum((cdf <= u[:, None]).sum(1), p.shape[1] - 1))',
          'return torch.from_numpy(p.argmax(1))', ELECTRA),
    Fault('e02', 'every picked position labelled replaced, a lucky sample too', 'electra.py', 'def electra_loss(',
          'replaced[picked] = s != target', 'replaced[picked] = True', ELECTRA),
    Fault('e03', 'the RTD loss counts the padding', 'electra.py', 'def electra_loss(',
          'up(logits[real]), replaced[real]', 'up(logits.flatten()), replaced.flatten()', ELECTRA),
    Fault('e04', 'the discriminator reads its own embedding tables', 'electra.py', 'class Electra(',
          '        for t in SHARED: setattr(self.disc, t, getattr(self.gen.encoder, t))  # one table, trained by both\n',
          '', ELECTRA),
    Fault('e05', "the discriminator reads the generator's input ([MASK]s), not its samples", 'electra.py',
          'def electra_loss(', 'model.rtd(model.disc(fake,', 'model.rtd(model.disc(inputs,', ELECTRA),
    Fault('t01', 'the classifier saved with the pooler outside bert.', 'finetune.py', 'def _save_head(',
          "sd |= {f'bert.{k}': ours[f'bert.{k}'] for k in POOLER_NAMES}", "sd |= {k: ours[f'bert.{k}'] for k in POOLER_NAMES}",
          FINETUNE),
    Fault('t02', "fine-tuning's dropout not seeded", 'finetune.py', 'def _tune(',
          '        torch.manual_seed(seed)\n', '', FINETUNE + TAGGING),
    # #35: the decoder's bias starts at the training tokens' log-frequencies
    Fault('p13', "the decoder's bias starts at zero (the run never sets it)", 'command.py', 'def _model(',
          "frequency_bias(model if a.arch == 'modernbert' else model.head, rows.take(idx)[0], tok)", 'pass', PRETRAIN),
    Fault('p14', 'the frequencies count [CLS], [SEP] and [PAD]', 'pretrain.py', 'def frequency_bias(',
          '    counts[special_ids(tok)] = 0\n', '', ['tests/test_pretrain.py', '-k', 'frequency_bias']),
    # #35: attention trains in float32 on a CPU under bf16 autocast
    Fault('a01', "bf16 training on a CPU keeps SDPA's bf16 kernel (its slow backward)", 'speed.py', 'def _attend(',
          'q.shape[-2] <= F32_ATTN_T', 'q.shape[-2] < 0', ['tests/test_unpad.py', '-k', 'attention']),
    Fault('a02', 'the float32 attention runs in inference too', 'speed.py', 'def _attend(',
          'if cpu_bf16 and q.requires_grad and', 'if cpu_bf16 and', ['tests/test_unpad.py', '-k', 'attention']),
    Fault('t03', "a task's test set drawn from its training verses", 'finetune.py', 'def verse_task(',
          'pick[a:b], pick[b:c]', 'pick[a:b], pick[:n_test]', FINETUNE),
]

FAULTS_T = ['tests/test_faults.py']
NODES = ['tests/test_reliability.py', '-k', 'agree or dies']
# Round 5 (#43): a fault in each area where the audit's hidden faults survived, and in the code this round wrote.
FAULTS += [
    Fault('h01', 'no dropout after the embeddings (a padded batch)', 'speed.py', 'def _encode(',
          'h = enc.drop(enc.embed(ids, token_type_ids, inputs_embeds))', 'h = enc.embed(ids, token_type_ids, inputs_embeds)',
          FAULTS_T + ['-k', 'dropout or drops']),
    Fault('h02', "the fast path drops nothing after attention", 'speed.py', 'def layer_tokens(',
          'return layer.ff(layer.attn_ln(x + layer.drop(y)))', 'return layer.ff(layer.attn_ln(x + y))', FAULTS_T + ['-k', 'dropout']),
    Fault('h03', 'the attention-maps path drops out at inference', 'speed.py', 'def layer_with_probs(',
          'F.dropout(w, a.dropout, a.training)', 'F.dropout(w, a.dropout, True)', FAULTS_T + ['-k', 'inference']),
    Fault('h04', "the held-out flags start again at each chunk of 10,000 lines", 'data.py', 'def _tokenize(',
          'h = list(itertools.islice(flags, len(chunk)))', 'h = held[:len(chunk)].tolist()', FAULTS_T + ['-k', 'chunk']),
    Fault('h05', 'the held-out lines are the first 2%, not a shuffle\'s', 'pretrain.py', 'def held_mask(',
          'held[shuffle(n, PCG32(seed, SPLIT))[:max(1, round(held_frac * n))]] = True',
          'held[:max(1, round(held_frac * n))] = True', FAULTS_T + ['-k', 'chunk']),
    Fault('h06', "every epoch of the loader in epoch 0's order", 'data.py', 'class _Epochs(',
          'PCG32(self.seed, 2**62 + e)', 'PCG32(self.seed, 2**62)', FAULTS_T + ['-k', 'loader']),
    Fault('h07', 'every rank trains on the same shard', 'command.py', 'def _shard(',
          'shard = slice(rank, None, world)', 'shard = slice(0, None, world)', FAULTS_T + ['-k', 'shard']),
    Fault('h08', '--steps with --minutes drops the budget', 'command.py', 'def _new_args(',
          'minutes=minutes,', 'minutes=None if ns.steps else minutes,', FAULTS_T + ['-k', 'minutes']),
    Fault('h09', 'the last step taken for the pace (a stall ends the run early)', 'command.py', 'class _Budget:',
          'step = float(np.median(self.step_s)) if self.step_s else 0.0', 'step = self.step_s[-1] if self.step_s else 0.0',
          BUDGET + ['-k', 'stall']),
    Fault('h10', '--opt=value escapes the clash checks', 'command.py', 'def main(',
          "ns.given = {t.split('=')[0] for t in argv if t.startswith('--')}", "ns.given = {t for t in argv if t.startswith('--')}",
          FAULTS_T + ['-k', 'equals']),
    Fault('h11', '_recover renames the oldest complete save into place', 'files.py', 'def _recover(',
          'os.rename(done.pop(), dir)', 'os.rename(done.pop(0), dir)', FAULTS_T + ['-k', 'recovered']),
    Fault('h12', 'load_parts takes a save with keys the model lacks', 'bert.py', 'def load_parts(',
          'bad = sorted(want.keys() ^ sd.keys())', 'bad = sorted(want.keys() - sd.keys())', FAULTS_T + ['-k', 'heads']),
    Fault('h13', 'ties matched by their count, not their names', 'bert.py', 'def _read_parts(',
          "if meta.get('shared') != shared:", "if len(meta.get('shared') or []) != len(shared):", FAULTS_T + ['-k', 'ties']),
    Fault('h14', "the tally counts a kept token as a random one", 'command.py', 'class MaskTally:',
          'self.outcome += counts', 'self.outcome += counts[[0, 2, 1]]', FAULTS_T + ['-k', 'tally']),
    Fault('h15', 'shares summing to 1 within 1e-3', 'checks.py', 'def _check_shares(',
          'abs(math.fsum(s) - 1) > 1e-6', 'abs(math.fsum(s) - 1) > 1e-3', FAULTS_T + ['-k', 'exact']),
    Fault('h16', 'a special mask may hold 2', 'checks.py', 'def _check_special(',
          'not np.isin(s, (0, 1)).all()', 'not np.isin(s, (0, 1, 2)).all()', FAULTS_T + ['-k', 'exact']),
    Fault('h17', 'the discriminator attends to the padding', 'electra.py', 'def electra_loss(',
          'model.rtd(model.disc(fake, token_type_ids, attn_mask))', 'model.rtd(model.disc(fake, token_type_ids, None))',
          FAULTS_T + ['-k', 'padding']),
    Fault('h18', "ELECTRA masks with BERT's shares (a random token at 10%)", 'electra.py', 'def train_electra(',
          'p, rng, shares=SHARES)', 'p, rng)', FAULTS_T + ['-k', 'shares']),
    Fault('h19', 'the majority class read off the test set', 'finetune.py', 'def majority(',
          "Task).train], minlength", "Task).test], minlength", FAULTS_T + ['-k', 'majority']),
    Fault('h20', "the bag of words' weight chosen on the test set", 'finetune.py', 'def bag_of_words(',
          'acc(fit(w), dev))', 'acc(fit(w), test))', FAULTS_T + ['-k', 'bag_of_words']),
    # the code of #43 itself
    Fault('n01', 'the time schedule unclamped (a negative share, a negative rate)', 'pretrain.py', 'def time_factor(',
          'share = 1.0 if math.isnan(share) else min(max(share, 0.0), 1.0)', 'pass', BUDGET + ['-k', 'whatever']),
    Fault('n02', 'a budget too short to train takes a step anyway', 'command.py', 'def _evaluate(',
          'if r.step == 0 and r.budget.train_s <= 0: _too_short(r.budget, took)', 'pass', BUDGET + ['-k', 'too_short']),
    Fault('n03', "--resume ignores budget.json (a kill's seconds given back)", 'command.py', 'def _restore(',
          "max(ck['spent'], _spent_before(r.out))", "ck['spent']", BUDGET + ['-k', 'killed']),
    Fault('n04', 'the budget recorded at checkpoints only', 'command.py', 'class _Budget:',
          'if _clock() - self.beat_t >= BEAT_S: self.record(e)', 'pass', BUDGET + ['-k', 'killed']),
    Fault('n05', 'the plots written through a link planted in the run', 'command.py', 'def write_plots(',
          "lambda h: f.savefig(h, format='png', dpi=110,", "lambda h: f.savefig(out / f'{name}.png', format='png', dpi=110,",
          ['tests/test_reliability.py', '-k', 'planted']),
    Fault('n06', "save_classifier writes its weights with safetensors' own save_file (0600)", 'finetune.py',
          'def _save_head(', "_write_safetensors(tmp / 'model.safetensors', {",
          "__import__('safetensors.torch', fromlist=['x']).save_file(filename=tmp / 'model.safetensors', tensors={",
          ['tests/test_files.py', '-k', 'umask']),
    Fault('n07', 'a part named by a path written at that path', 'bert.py', 'def save_parts(',
          'if odd := next((n for n in parts if not _plain(n)), None):', 'if odd := None:', ['tests/test_files.py', '-k', 'path']),
    Fault('n08', 'nodes never compare their settings', 'command.py', 'def _agree(',
          "if k := next((k for k in first['run'] if e['run'][k] != first['run'][k]), None):", 'if k := None:', NODES),
    Fault('n09', "a node's refusal is not shared (the other waits for it)", 'command.py', 'def _train_cmd(',
          'if world > 1: _agree(ns, None, e)', 'pass', NODES),
    Fault('n10', 'electra_loss takes a label at a padded position', 'electra.py', 'def _check_step(',
          'if ((labels != -100) & ~real).any():', 'if False:', ELECTRA),
    Fault('n11', 'train_electra takes batch_size 0', 'electra.py', 'def _check_run(',
          "_check_int('batch_size', batch_size, 1)", 'batch_size', ELECTRA),
    Fault('n12', 'a bool label taken as 1', 'finetune.py', 'def _label(',
          'isinstance(y, int) and not isinstance(y, bool)', 'isinstance(y, int)', FINETUNE),
    Fault('n13', 'fine_tune takes lr inf (every weight NaN)', 'finetune.py', 'def _tune(',
          "lr, warmup = _check_real('lr', lr, 0, open_lo=True), _check_real('warmup', warmup, 0, 1)",
          "warmup = _check_real('warmup', warmup, 0, 1)", FINETUNE),
    Fault('n14', 'plot_books drops a book the canon lacks', 'finetune.py', 'def plot_books(',
          'if odd := next((b for b in books if b not in SECTION), None):', 'if odd := None:', FINETUNE),
    Fault('n15', 'sample draws from a NaN row', 'electra.py', 'def _check_logits(',
          'bad = (logits.isnan() | (logits == torch.inf)).any(1) | (logits == -torch.inf).all(1)',
          'bad = (logits == torch.inf).any(1)', ELECTRA),
    Fault('n16', "load_classifier needs id2label (transformers' defaults omit it)", 'finetune.py', 'def _head(',
          "names = config.get('id2label') or {str(i): f'LABEL_{i}' for i in range(n)}", "names = config['id2label']",
          FINETUNE),
    Fault('n17', 'idna and the escapes taken for text encodings', 'files.py', 'def corpus_lines(',
          'or codec.name in _NOT_TEXT:', ':', ['tests/test_entries.py', '-k', 'encodings']),
    Fault('n18', 'binary read as latin-1 taken for text', 'files.py', 'def corpus_lines(',
          'if control > 0.01 * n: _binary(p, control, n)', 'pass', ['tests/test_entries.py', '-k', 'binary']),
    Fault('n19', 'a corpus of [UNK] alone prepared without a word', 'data.py', 'def _check_tokens(',
          'if words[split] == 0:', 'if False:', ['tests/test_entries.py', '-k', 'callback']),
    Fault('n20', 'the encoder takes an attn_mask of 2s', 'checks.py', 'def _check_call(',
          "if attn_mask.dtype != torch.bool: _check_range('attn_mask', attn_mask, 0, 2)", 'pass',
          ['tests/test_entries.py', '-k', 'twos']),
]

# #44: the chapter's encoder runs its layers as the equation's loop; padding and the rest go through `speed._encode`.
FAULTS += [
    Fault('q01', 'no dropout after the embeddings (the chapter\'s loop)', 'bert.py', 'class BertEncoder(',
          'h = self.drop(self.embed(ids, token_type_ids))', 'h = self.embed(ids, token_type_ids)',
          FAULTS_T + ['-k', 'dropout or drops']),
    Fault('q02', 'the loop skips the last layer', 'bert.py', 'class BertEncoder(',
          'for layer in self.layers: h = layer(h)', 'for layer in self.layers[:-1]: h = layer(h)', ENCODER),
    Fault('q03', 'a padded batch taken through the loop, its mask dropped', 'bert.py', 'class BertEncoder(',
          'if attn_mask is not None or more:', 'if more:', ENCODER),
    Fault('q04', 'the rounding bound leaves out the embeddings and the head', 'diagnostics.py', 'def rounding(',
          'return 2 * (cfg.n_layers + 1) * layer * u * scale', 'return 2 * cfg.n_layers * layer * u * scale',
          FAULTS_T + ['-k', 'rounding']),
    Fault('q05', 'the rounding bound without the keys of the weighted values', 'diagnostics.py', 'def rounding(',
          'd + d // cfg.n_heads + T + d', 'd + d // cfg.n_heads + d', FAULTS_T + ['-k', 'rounding']),
    # #45: the float32 step's decoder and loss in one autograd node, and the memory a step frees kept
    Fault('q06', 'the padding rows given a gradient', 'speed.py', 'class _DecodedLoss(',
          '        d[n:] = 0                                        # the padding rows\n', '', ENCODER),
    Fault('q07', "the loss's gradient not divided by the count", 'speed.py', 'class _DecodedLoss(',
          'd.mul_(g / max(n, 1))', 'd.mul_(g)', ENCODER),
    Fault('q08', "the label's one not taken off the softmax", 'speed.py', 'class _DecodedLoss(',
          '        d[torch.arange(n, device=d.device), y[:n]] -= 1\n', '', ENCODER),
    Fault('q09', 'the fused loss under autocast too', 'speed.py', 'def _decoded_loss(',
          ' and not torch.is_autocast_enabled(x.device.type)', '', ENCODER),
    Fault('q09b', 'the fused loss for bf16 weights too (a bf16 loss)', 'speed.py', 'def _decoded_loss(',
          'x.dtype in (torch.float32, torch.float64) and ', '', ENCODER),
    Fault('q10', 'freed memory handed back after all', 'command.py', 'def _keep_freed_memory(',
          'return bool(mallopt(-3, 32 << 20) and mallopt(-1, 1 << 30))', 'return True',
          ['tests/test_pretrain.py', '-k', 'freed']),
    # #46: ModernBERT (chapter 06), against transformers' classes, a float64 rotary formula, a brute-force band
    Fault('m01', 'rotary turns the other way', 'modernbert.py', 'def rotate(',
          'torch.cat([-x2, x1], -1)', 'torch.cat([x2, -x1], -1)', MODERN),
    Fault('m02', "rotary's frequencies from half the head", 'modernbert.py', 'def rope_tables(',
          'dtype=torch.float64, device=pos.device) / dh)', 'dtype=torch.float64, device=pos.device) / (dh // 2))',
          MODERN),
    Fault('m03', "rotary's angles in float32", 'modernbert.py', 'def rope_tables(',
          'a = pos.double()[:, None] * omega', 'a = (pos.float()[:, None] * omega.float()).double()', MODERN),
    Fault('m04', 'the band one key short on the right', 'modernbert.py', 'def band_bias(',
          '(j <= r + 2 * w)', '(j < r + 2 * w)', MODERN),
    Fault('m05', 'the band reads across rows', 'modernbert.py', 'def band_bias(',
          ' & (queries == keys[:, None])', '', MODERN),
    Fault('m06', 'the first layer normalises its attention input', 'modernbert.py', 'class ModernBertLayer(',
          'nn.Identity() if layer == 0 else norm()', 'norm()', MODERN),
    Fault('m07', 'layers 1, 4, 7 global', 'modernbert.py', 'class ModernBertConfig:',
          'layer % self.global_every == 0', 'layer % self.global_every == 1', MODERN),
    Fault('m08', "GeGLU's gate and GELU swapped", 'modernbert.py', 'class GeGLU(',
          'F.gelu(a) * gate', 'a * F.gelu(gate)', MODERN),
    Fault('m09', "global layers turn by the local base", 'modernbert.py', 'class ModernBertAttention(',
          'c.theta_global if self.is_global else c.theta_local', 'c.theta_local', MODERN),
    Fault('m10', 'global layers read padding', 'modernbert.py', 'class ModernBertAttention(',
          '_attend(q, k, v, m, p)', '_attend(q, k, v, None, p)', MODERN),
    Fault('m11', 'no final norm', 'modernbert.py', 'class ModernBertEncoder(',
          'return self.final_norm(x), b', 'return x, b', MODERN),
    Fault('m12', 'residual branches not scaled at init', 'modernbert.py', 'class ModernBertEncoder(',
          'w.div_(math.sqrt(2 * c.n_layers))', 'w.div_(1.0)', MODERN),
    Fault('m13', 'mean pooling over padding too', 'modernbert.py', 'class ModernBertClassifier(',
          'attn_mask.sum(1, keepdim=True).to(h.dtype)', 'h.new_tensor(ids.shape[1])', MODERN),
    Fault('m14', "a config's rotary bases ignored", 'modernbert.py', 'def config_from_hf(',
          "theta_global=g.get('rope_theta', d.get('global_rope_theta', 160_000.0))", 'theta_global=160_000.0',
          MODERN),
    Fault('m15', 'an untied decoder accepted', 'modernbert.py', 'def _weights(',
          "if 'decoder.weight' in sd and not torch.equal(", "if False and not torch.equal(", MODERN),
    Fault('m16', 'a float64 directory loads as float32', 'modernbert.py', 'def _load(',
          "model.to(sd['embeddings.tok_embeddings.weight'].dtype)", 'model.float()', MODERN),
    Fault('m17', 'attention masks of 2s accepted', 'modernbert.py', 'def _check_batch(',
          "if attn_mask.dtype != torch.bool: _check_range('attn_mask', attn_mask, 0, 2)", 'pass', MODERN),
    Fault('m18', 'the padding row of the word table learns from padding', 'modernbert.py', 'class ModernBertEncoder(',
          'nn.Embedding(c.vocab, c.d_model, padding_idx=c.pad_id)', 'nn.Embedding(c.vocab, c.d_model)', MODERN),
    Fault('m19', "a classifier saved without its pooling", 'modernbert.py', 'def save_modernbert(',
          'classifier_pooling=model.pooling', "classifier_pooling='cls'", MODERN),
    Fault('m20', 'irregular layer types accepted', 'modernbert.py', 'def _global_every(',
          '    if types != want or not want:', '    if not want:', MODERN),
    Fault('m21', 'a ModernBERT run saved as a BERT', 'command.py', 'def _finish(',
          "(save_modernbert if r.a.arch == 'modernbert' else save_bert)(r.model", 'save_bert(r.model', MODERN),
    Fault('m22', 'ModernBERT called with token types', 'pretrain.py', 'def _call_args(',
          "return args if hasattr(model.config, 'type_vocab') else (args[0], *args[2:])", 'return args', MODERN),
    Fault('m23', 'eval, fill and --init read every model as a BERT', 'command.py', 'def _is_modern(',
          "meta.get('model_type') == 'modernbert'", "meta.get('model_type') == 'ModernBERT'", MODERN),
    Fault('m24', "--arch modernbert's GeGLU as wide as BERT's feed-forward", 'command.py', 'def _modern(',
          'd_ff=max(1, 2 * a.d_ff // 3)', 'd_ff=a.d_ff', MODERN),
    Fault('m25', "a run's unknown arch resumed", 'command.py', 'def _read_args(',
          'if act.choices and v is not None and v not in act.choices:', 'if False:', MODERN),
    Fault('m26', "BERT's position options taken by a ModernBERT run", 'command.py', 'def _take_arch(',
          "if ns.arch == 'modernbert' and", 'if False and', MODERN),
    # #47: token classification (chapter 07) and sentence pairs (chapter 05)
    Fault('x01', 'a one-letter capital taken as UPPER', 'tagging.py', 'def case_of(',
          'if len(letters) > 1 and all(', 'if all(', TAGGING),
    Fault('x02', "the task's words keep their case (the answer in the input)", 'tagging.py', 'def truecase_task(',
          '([w.lower() for w in words_of(verses[i].text)],', '(words_of(verses[i].text),', TAGGING),
    Fault('x03', "a word's label on every piece", 'tagging.py', 'def align(',
          'IGNORE if w < 0 or wid[j - 1] == w else', 'IGNORE if w < 0 else', TAGGING),
    Fault('x04', 'a cut row loses its [SEP]', 'tagging.py', 'def align(',
          'x[:max_len - 1] + x[-1:]', 'x[:max_len]', TAGGING),
    Fault('x05', 'windows one token too long', 'tagging.py', 'def windows(',
          "_check_int('max_len', max_len, 3) - 2", "_check_int('max_len', max_len, 3) - 1", TAGGING),
    Fault('x06', 'padding labelled lower', 'tagging.py', 'class TagCollator',
          'labels=z(IGNORE)', 'labels=z(0)', TAGGING),
    Fault('x07', 'the loss a mean over every position', 'tagging.py', 'def tag_loss(',
          "reduction='sum') / keep.sum().clamp(min=1)", "reduction='sum') / keep.numel()", TAGGING),
    Fault('x09', "a word's prediction read from its last piece", 'tagging.py', 'def predict_tags(',
          'w[j] != w[j - 1]', 'w[j] != w[(j + 1) % len(w)]', TAGGING),
    Fault('x10', 'words without a case scored', 'tagging.py', 'def tag_scores(',
          '    use = flat != IGNORE\n', '    use = np.ones(len(flat), bool)\n', TAGGING),
    Fault('x11', "F1 taken as recall", 'tagging.py', 'def tag_scores(',
          '2 * ((g == c) & (p == c)).sum() / max((g == c).sum() + (p == c).sum(), 1)',
          '((g == c) & (p == c)).sum() / max((g == c).sum(), 1)', TAGGING),
    Fault('x12', 'keep ignored', 'tagging.py', 'def tag_scores(', 'if keep is not None: use &=', 'if False: use &=',
          TAGGING),
    Fault('x13', "the table's ties to the higher label", 'tagging.py', 'def by_table(',
          '(table[w][c], -c)', '(table[w][c], c)', TAGGING),
    Fault('x14', 'an UPPER first word lowered to Capitalised', 'tagging.py', 'def by_table(',
          'p[i] = max(p[i], 1)', 'p[i] = 1', TAGGING),
    Fault('x15', 'a word seen with one case taken as ambiguous', 'tagging.py', 'def ambiguous(',
          'len(table.get(w, ())) > 1', 'len(table.get(w, ())) >= 1', TAGGING),
    Fault('x16', "Trainer's labels -100 refused", 'tagging.py', 'class TaggerForTrainer',
          ' & (labels != IGNORE)).any()', ').any()', TAGGING),
    Fault('x17', 'a sentence classifier loaded as a tagger', 'finetune.py', 'def _head(',
          'if (bert.pooler is None) == pooler or', 'if', TAGGING + FINETUNE),
    Fault('y01', "a pair's negative from any book", 'finetune.py', 'def pair_task(',
          'j = start[book] + rng.below(end[book] - start[book])', 'j = rng.below(len(verses))', TAGGING),
    Fault('y02', "pairs' labels the wrong way round", 'finetune.py', 'def pair_task(',
          'if not (y := rng.below(2)):', 'if (y := rng.below(2)):', TAGGING),
    Fault('y03', "a pair's two texts in one bag", 'finetune.py', 'def bag_of_words(',
          '[V + i for i in one(t[1])[1:]]', 'one(t[1])[1:]', TAGGING + FINETUNE),
    Fault('y04', 'any text accepted', 'finetune.py', 'def _text(',
          "return isinstance(t, str) or", "return True or", TAGGING + FINETUNE),
]

def block_span(text: str, start: str) -> tuple[int, int]:
    "The span of the top-level block that starts with `start`: up to the next top-level def, class or cell marker."
    i = text.find('\n' + start) + 1
    if i == 0 or text.count('\n' + start) != 1: raise ValueError(f"{start!r} does not start exactly one block")
    m = re.compile(r'\n(?=def |class |@|# %%|[A-Za-z_]\w* *=)').search(text, i + len(start))
    return i, m.start() + 1 if m else len(text)

def apply(fault: Fault, pkg: Path):
    path = pkg / fault.file
    text = path.read_text()
    i, j = block_span(text, fault.block)
    if text[i:j].count(fault.old) != 1: raise ValueError(f"{fault.id}: the text to change is not in {fault.block} exactly once")
    path.write_text(text[:i] + text[i:j].replace(fault.old, fault.new) + text[j:])

def run_tests(fault: Fault | None, tests: list) -> tuple[bool, str, float]:
    "(passed, the first failing test or '', seconds) for the tests on a scratch copy with `fault` applied."
    with tempfile.TemporaryDirectory(prefix='mutant-') as d:
        d = Path(d)
        shutil.copytree(root / 'bert_nb', d / 'bert_nb', ignore=shutil.ignore_patterns('__pycache__'))
        shutil.copytree(root / 'tests', d / 'tests', ignore=shutil.ignore_patterns('__pycache__', '.hypothesis'))
        shutil.copytree(root / 'ports', d / 'ports')  # the JavaScript port the golden tests run
        if fault: apply(fault, d / 'bert_nb')
        env = dict(os.environ, PYTHONPATH=str(d), PYTHONDONTWRITEBYTECODE='1')
        t = time.time()
        r = subprocess.run([sys.executable, '-m', 'pytest', '-x', '-q', '-p', 'no:cacheprovider', '--rootdir', str(d), *tests],
                           cwd=d, env=env, capture_output=True, text=True)
        failed = re.search(r'^FAILED (\S+)', r.stdout, re.M)
        return r.returncode == 0, failed[1] if failed else ('' if r.returncode == 0 else r.stdout[-300:]), time.time() - t

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('ids', nargs='*', help='fault ids or prefixes (default: all)')
    ap.add_argument('-j', '--jobs', type=int, default=2)
    ap.add_argument('--dry', action='store_true', help='apply each fault to a scratch copy and compile it; run no test')
    a = ap.parse_args()
    faults = [f for f in FAULTS if not a.ids or any(f.id.startswith(i) for i in a.ids)]
    if not faults: raise SystemExit(f"no fault matches {a.ids}")
    if a.dry:
        for f in faults:
            with tempfile.TemporaryDirectory() as d:
                shutil.copytree(root / 'bert_nb', Path(d) / 'bert_nb'); apply(f, Path(d) / 'bert_nb')
                compile((Path(d) / 'bert_nb' / f.file).read_text(), f.file, 'exec')
        return print(f'{len(faults)} faults apply and compile')
    # the scratch copy must be what the tests import, and the unchanged code must pass
    files = sorted({t for f in faults for t in f.tests if t.startswith('tests/')})
    ok, first, s = run_tests(None, files)
    if not ok: raise SystemExit(f"the tests fail on the unchanged code ({first}): fix them first")
    print(f"unchanged code: {' '.join(files)} pass ({s:.0f} s)\n")
    with ThreadPoolExecutor(a.jobs) as ex: results = list(ex.map(lambda f: run_tests(f, f.tests), faults))
    print(f"| fault | what | killed by |\n|---|---|---|")
    for f, (passed, first, s) in zip(faults, results):
        print(f"| {f.id} | {f.what} | {'**SURVIVED**' if passed else first.split('::')[-1]} |")
    killed = sum(not p for p, _, _ in results)
    print(f"\n{killed} of {len(faults)} faults killed ({killed / len(faults):.0%})")
    if killed < len(faults): raise SystemExit(1)

if __name__ == '__main__': main()
