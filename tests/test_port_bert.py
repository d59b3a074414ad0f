"""The chapter's BERT in JavaScript (ports/js/bert.mjs, for the page of #59): the shipped model's logits, computed in
float64 from its save_bert directory, equal PyTorch's float32 logits within the float32 bound of tests/tol.py, and
give the same top five at every position of 50 held-out verses with a blank; a file that is not such a model is
refused with one clear message."""
import json, shutil, subprocess, sys, warnings
from pathlib import Path
import pytest
import torch
from bert_nb import KJV, BertConfig, BertEncoder, WordPieceTokenizer, kjv_verses, load_bert, save_bert
from safetensors.torch import load_file, save_file
from tol import encoder_tol
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'tools'))
from kjv import widen  # noqa: E402  the snapshots' int8 rows as float32

PORT = Path(__file__).parents[1] / 'ports' / 'js' / 'bert.mjs'
pytestmark = pytest.mark.skipif(shutil.which('node') is None, reason='node is not installed')

def run(model: Path, rows: list[list[int]], tmp_path: Path) -> subprocess.CompletedProcess:
    (tmp_path / 'rows.json').write_text(json.dumps(rows))
    return subprocess.run(['node', str(PORT), str(model), str(tmp_path / 'rows.json')], capture_output=True, text=True)

SNAPSHOTS = Path(__file__).parents[1] / 'nbs' / 'kjv-snapshots'

@pytest.mark.parametrize('snapshot', [None, 1, -1], ids=['model', 'early snapshot', 'late snapshot'])
def test_the_shipped_model_as_pytorch_computes_it(tmp_path, snapshot):
    "The shipped model, and two of its int8 snapshots (the page's slider) widened by their rows' scales to float32."
    src = KJV
    if snapshot is not None:  # the snapshot's weights in the shipped model's directory
        src = tmp_path / 'snapshot'
        shutil.copytree(KJV, src)
        save_file(widen(load_file(sorted(SNAPSHOTS.glob('step-*.safetensors'))[snapshot])), src / 'model.safetensors')
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        model = load_bert(src).float().eval()
    tok = WordPieceTokenizer.from_vocab(KJV)
    verses = kjv_verses()[-50:] if snapshot is None else kjv_verses()[-10:]  # the model: 50; a snapshot: 10
    rows = [ids[:2] + [tok.mask_id] + ids[3:32] for ids in (tok.encode(v.text) for v in verses)]
    r = run(src, rows, tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    for ids, theirs in zip(rows, json.loads(r.stdout)):
        with torch.no_grad(): ours = model(torch.tensor([ids]))[0][0]
        js = torch.tensor(theirs, dtype=torch.float64)
        bound = encoder_tol(model.config, len(ids), torch.float32, ours.abs().max().item())  # float32's error alone
        assert (js - ours.double()).abs().max().item() <= bound
        assert torch.equal(js.topk(5).indices, ours.double().topk(5).indices)  # at every position, [MASK] included

@pytest.mark.parametrize('damage, says', [
    ('text', 'not a safetensors file'), ('cut', 'cut short'), ('bool', 'only float32, bfloat16, float16 and int8 rows'),
    ('encoder', 'not an MLM BERT'), ('modernbert', 'not a BERT'), ('heads', 'must divide hidden_size')])
def test_a_file_that_is_not_such_a_model_is_refused(tmp_path, damage, says):
    d = tmp_path / 'model'
    shutil.copytree(KJV, d)
    st, conf = d / 'model.safetensors', json.loads((d / 'config.json').read_text())
    if damage == 'text': st.write_text('hello')
    if damage == 'cut': st.write_bytes(st.read_bytes()[:100_000])
    if damage == 'bool':
        from safetensors.torch import save_file
        save_file({'bert.embeddings.LayerNorm.bias': torch.zeros(128, dtype=torch.bool)}, st)
    if damage == 'encoder':
        save_bert(BertEncoder(BertConfig(8192, max_len=32, d_model=128, n_heads=2, n_layers=2, d_ff=512)), d)
    if damage == 'modernbert': conf['model_type'] = 'modernbert'
    if damage == 'heads': conf['num_attention_heads'] = 7  # divides no width a model is built with
    if damage in ('modernbert', 'heads'): (d / 'config.json').write_text(json.dumps(conf))
    r = run(d, [[2, 5, 3]], tmp_path)
    assert r.returncode != 0 and says in r.stderr, r.stderr[-500:]

def test_the_audits_javascript_cases():
    "tools/audit_js.mjs: every bad input to ports/js's exported functions is refused by an error of ours, naming it."
    r = subprocess.run(['node', str(PORT.parents[2] / 'tools' / 'audit_js.mjs'), str(KJV)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert len(out) >= 60 and {k: v for k, v in out.items() if v not in ('clear', 'correct')} == {}
    assert sum(v == 'correct' for v in out.values()) == 13  # the valid edge cases, accepted
