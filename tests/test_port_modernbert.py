"""Chapter 06's ModernBERT in JavaScript (ports/js/modernbert.mjs, for the play page): a save_modernbert directory's
logits and attention, computed in float64 from its float32 weights, equal transformers' ModernBertForMaskedLM run in
float64 on the same weights, its rotary tables too (hf_rope_float64: one formula in float64, far below any fault's
difference), the band of the local layers included; its reach equals the float64 Jacobian of our encoder; a file that is not such a model is refused by name."""
import json, shutil, subprocess
from pathlib import Path
import pytest
import torch
from bert_nb import PCG32, WordPieceTokenizer
from bert_nb.modernbert import ModernBertConfig, ModernBertForMLM
from bert_nb.modernbert_files import save_modernbert

PORT = Path(__file__).parents[1] / 'ports' / 'js' / 'modernbert.mjs'
pytestmark = pytest.mark.skipif(shutil.which('node') is None, reason='node is not installed')
TOKENS = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + [f'w{i}' for i in range(43)]
# 4 layers: local, local, global, local; a window of 4 (2 each side) that rows of 12 outreach
CFG = ModernBertConfig(len(TOKENS), d_model=16, n_heads=2, n_layers=4, d_ff=12, window=4, global_every=3,
                       theta_global=1_000.0, theta_local=50.0, max_len=24)

@pytest.fixture(scope='module')
def model_dir(tmp_path_factory) -> Path:
    model = ModernBertForMLM(CFG, PCG32(0))
    with torch.no_grad(): model.bias.copy_(torch.randn(CFG.vocab, generator=torch.Generator().manual_seed(1)))
    return save_modernbert(model, tmp_path_factory.mktemp('m') / 'model', WordPieceTokenizer.from_tokens(TOKENS))

def run(model: Path, rows: list[list[int]], tmp_path: Path, what: str = 'logits') -> subprocess.CompletedProcess:
    (tmp_path / 'rows.json').write_text(json.dumps(rows))
    return subprocess.run(['node', str(PORT), str(model), str(tmp_path / 'rows.json'), what], capture_output=True,
                          text=True, timeout=120)

ROWS = [[2, 9, 4, 17, 30, 5, 8, 41, 4, 12, 6, 3], [2, 4, 3], [2] + list(range(5, 27)) + [3]]

def theirs(model_dir: Path):
    from transformers import ModernBertForMaskedLM
    return ModernBertForMaskedLM.from_pretrained(str(model_dir), attn_implementation='eager').double().eval()

def test_logits_equal_transformers_in_float64(hf_rope_float64, model_dir, tmp_path):
    r = run(model_dir, ROWS, tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    hf = theirs(model_dir)
    for ids, js in zip(ROWS, json.loads(r.stdout)):
        with torch.no_grad(): want = hf(torch.tensor([ids])).logits[0]
        torch.testing.assert_close(torch.tensor(js, dtype=torch.float64), want, rtol=0, atol=1e-9)

def test_attention_is_the_float64_formula_and_keeps_to_the_band(model_dir, tmp_path):
    """Each head's probabilities from the float64 formula on our model's own inputs to each attention (softmax of
    rotated q·k/√dh, keys more than window/2 away masked in a local layer): transformers' eager attention takes its
    softmax in float32, so it is no float64 oracle here."""
    from bert_nb.modernbert import rope_tables
    from bert_nb.modernbert_files import load_modernbert
    r = run(model_dir, ROWS[:1], tmp_path, 'attention')
    assert r.returncode == 0, r.stderr[-2000:]
    js, n, dh = json.loads(r.stdout)[0], len(ROWS[0]), CFG.d_model // CFG.n_heads
    model, seen = load_modernbert(model_dir).double(), []
    for layer in model.encoder.layers: layer.attn.register_forward_hook(lambda m, args, out: seen.append(args[0]))
    with torch.no_grad(): model(torch.tensor(ROWS[:1]))
    far = (torch.arange(n)[:, None] - torch.arange(n)).abs() > CFG.window // 2
    for l, (heads, x) in enumerate(zip(js, seen)):
        attn = model.encoder.layers[l].attn
        q, k, _ = (x @ attn.Wqkv.weight.T).view(n, 3, CFG.n_heads, dh).unbind(1)
        cos, sin = rope_tables(torch.arange(n), dh, attn.theta, torch.float64)
        turn = lambda y: y * cos + torch.cat([-y[..., dh // 2:], y[..., :dh // 2]], -1) * sin
        s = torch.einsum('ihe,jhe->hij', turn(q), turn(k)) / dh ** 0.5
        want = s.masked_fill(far & (not CFG.is_global(l)), -torch.inf).softmax(-1)
        got = torch.tensor(heads, dtype=torch.float64).view(CFG.n_heads, n, n)
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
        assert (got[:, far] == 0).all() != CFG.is_global(l)  # the band: local layers read 2 each side, global all

@pytest.mark.filterwarnings('ignore:There is a performance drop')  # vmap of the band's unfold: slow, not wrong
def test_reach_is_the_float64_jacobian_of_the_encoder(model_dir, tmp_path):
    "|d output_i / d x_j| (Frobenius) from the embeddings' norm to the final norm, by torch.func.jacrev in float64."
    from bert_nb.modernbert_files import load_modernbert
    from bert_nb.modernbert import layout
    ids = ROWS[0][:8]
    r = run(model_dir, [ids], tmp_path, 'reach')
    assert r.returncode == 0, r.stderr[-2000:]
    enc = load_modernbert(model_dir).double().encoder
    b = layout(enc.config, torch.tensor([ids]), None, torch.float64)
    def out(x):
        for layer in enc.layers: x = layer(x, b)
        return enc.final_norm(x)
    x0 = enc.emb_norm(enc.tok_emb(torch.tensor(ids)))
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):  # math attention: its backward batches
        J = torch.func.jacrev(out)(x0)  # (n, d, n, d)
    want = J.pow(2).sum((1, 3)).sqrt()
    torch.testing.assert_close(torch.tensor(json.loads(r.stdout)[0], dtype=torch.float64).view(8, 8), want,
                               rtol=1e-9, atol=1e-12)

@pytest.mark.parametrize('damage, says', [
    ('bert', 'not a ModernBERT'), ('encoder', 'lacks head.dense.weight'), ('norm_bias', 'norm_bias must be false'),
    ('rope', "only plain RoPE (rope_type 'default')"), ('odd window', 'local_attention must be even'),
    ('layer types', 'layer_types must make layers 0, n, 2n, ... global'), ('untied', 'decoder.weight is not the word table')])
def test_a_file_that_is_not_such_a_model_is_refused(model_dir, tmp_path, damage, says):
    from safetensors.torch import load_file, save_file
    d = tmp_path / 'model'
    shutil.copytree(model_dir, d)
    conf, st = json.loads((d / 'config.json').read_text()), d / 'model.safetensors'
    if damage == 'bert': conf['model_type'] = 'bert'
    if damage == 'norm_bias': conf['norm_bias'] = True
    if damage == 'rope': conf['rope_parameters']['sliding_attention']['rope_type'] = 'linear'
    if damage == 'odd window': conf['local_attention'] = 5
    if damage == 'layer types': conf['layer_types'] = ['sliding_attention'] + ['full_attention'] * 3
    (d / 'config.json').write_text(json.dumps(conf))
    if damage in ('encoder', 'untied'):
        sd = load_file(str(st))
        if damage == 'encoder': sd = {k: v for k, v in sd.items() if not k.startswith(('head.', 'decoder.'))}
        else: sd['decoder.weight'] = sd['model.embeddings.tok_embeddings.weight'] + 1
        save_file(sd, str(st))
    r = run(d, [[2, 5, 3]], tmp_path)
    assert r.returncode != 0 and says in r.stderr, r.stderr[-500:]
