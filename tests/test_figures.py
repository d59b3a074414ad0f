"""A stored figure comes from the code as it is now (#25). nbdev_test and the site's kernel run skip `#| slow` cells,
so their figures are stored in the notebook; `tools/nbrun.py --slow` reruns them and stamps each figure with a
digest of what drew it (the cell, and every function of bert_nb its `plot_*` calls reach). A figure whose stamp is
not today's digest was drawn by other code."""
import re, sys
from pathlib import Path
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'tools'))
from nbrun import directives, made_by  # noqa: E402

NOTEBOOKS = sorted((ROOT / 'nbs').glob('*.ipynb'))

CHAPTERS = {'00_rng', '01_wordpiece', '02_bert', '03_pretrain', '04_electra', '05_finetune', '06_modernbert', '07_tagging', '08_map'}

def stale(path: Path) -> list[str]:
    """What is wrong with the notebook's stored figures: a slow cell that draws must store its figure, and so must
    every drawing cell of a chapter (a reader opens it on GitHub, #44); every stored figure must be stamped with the
    digest of the code as it is."""
    out = []
    for c in nbformat.read(path, as_version=4).cells:
        if c.cell_type != 'code': continue
        figs = [o for o in c.outputs if 'image/png' in o.get('data', {})]
        must = 'slow' in directives(c) or path.stem in CHAPTERS and not {'hide', 'export'} & set(directives(c))
        if must and re.search(r'\bplot_\w+\(|fig-cap:', c.source) and not figs:
            out.append(f'a cell draws but stores no figure: {c.source.splitlines()[-1][:60]!r}')
        for o in figs:
            if o.metadata.get('image/png', {}).get('made_by') != made_by(c.source):
                out.append(f'a figure not drawn by the code as it is: {c.source.splitlines()[-1][:60]!r}')
    how = '--slow' if path.stem not in CHAPTERS else '--store (and --slow for the slow cells)'
    return [f'{path.name}: {w} (run `python tools/nbrun.py {how} nbs/{path.name}`)' for w in out]

@pytest.mark.parametrize('path', NOTEBOOKS, ids=lambda p: p.stem)
def test_slow_figures_come_from_the_code_as_it_is(path):
    assert not stale(path)

def test_the_digest_follows_the_plotting_code():
    "The digest changes with the cell and with the code its plot_* calls reach, not with other code."
    a = made_by('plot_losses(m)')
    assert a == made_by('plot_losses(m)') and a != made_by('plot_losses(m);')
    assert made_by('x = 1') == made_by('x = 1')  # no plot_* call: the cell alone
    reach = made_by('plot_attention_reach(a, b)')
    assert reach != made_by('plot_attention_maps(a, b)')

def test_a_stale_figure_fails(tmp_path):
    cell = nbformat.v4.new_code_cell('#| slow\nplot_losses(m);')
    fig = nbformat.v4.new_output('display_data', data={'image/png': 'iVBORw0KGgo='},
                                 metadata={'image/png': {'made_by': made_by(cell.source)}})
    cell.outputs = [fig]
    nb = nbformat.v4.new_notebook(cells=[cell])
    nbformat.write(nb, tmp_path / 'x.ipynb')
    assert stale(tmp_path / 'x.ipynb') == []
    fig.metadata['image/png']['made_by'] = 'older'
    nbformat.write(nb, tmp_path / 'x.ipynb')
    assert 'not drawn by the code as it is' in stale(tmp_path / 'x.ipynb')[0]
    cell.outputs = []
    nbformat.write(nb, tmp_path / 'x.ipynb')
    assert 'stores no figure' in stale(tmp_path / 'x.ipynb')[0]

def test_docs_check_flags_escape_codes_and_temporary_paths():
    "An output with a terminal's colour codes or a temporary directory fails the site's check (#34); plain ones pass."
    from docs_check import output_problems
    assert output_problems('\x1b[1mBertModel LOAD REPORT\x1b[0m') and output_problems('[1mkey[0m | status')
    assert output_problems('saved to /tmp/tmpab3x9_qz/kjv') and output_problems('written to tmpk2j4h8ax/model')
    assert output_problems('UserWarning: the run did not learn')
    assert not output_problems('held-out accuracy 40.0% after 2,719 steps [x86_64, 2 cores]: 8,192 tokens')

def test_the_site_build_finds_a_warning_in_a_hidden_cell():
    "Jupyter shows hidden cells: a warning there (tqdm's IProgress, #44) fails the site's build like any other."
    import nbformat
    from nbrun import kernel_warnings
    cell = nbformat.v4.new_code_cell('#| hide\nimport transformers')
    cell.outputs = [nbformat.v4.new_output('stream', name='stderr', text='tqdm/auto.py:21: TqdmWarning: IProgress not found.')]
    nb = nbformat.v4.new_notebook(cells=[cell])
    assert kernel_warnings(nb) == ['TqdmWarning: IProgress not found.']
    cell.outputs[0].text = 'loading 3 files'
    assert kernel_warnings(nb) == []

def test_docs_check_flags_a_machines_timings():
    "Trainer's closing metrics and a progress bar's rate differ on every machine: not on a page (#44)."
    from docs_check import output_problems
    assert output_problems("{'train_runtime': 12.3, 'train_samples_per_second': 650.2, 'epoch': 2.0}")
    assert output_problems('100%|##########| 50/50 [00:03<00:00, 14.2it/s]') and output_problems('3.1 s/it')
    assert not output_problems('{"loss": 0.41, "epoch": 2.0}: 88.2% on 2,000 verses, 3 seconds per split')

def test_the_site_build_finds_a_stale_stored_output():
    "A stored output that the code no longer prints fails the site's build (#34); a cell marked `varies:` is exempt."
    import nbformat
    from nbrun import stale_outputs
    def nb(printed: str, head: str = ''):
        out = nbformat.v4.new_output('stream', name='stdout', text=printed)
        return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(head + 'print(x)', outputs=[out])])
    assert stale_outputs(nb('god watered\n'), nb('god watered\n')) == []
    assert 'god zilpah' in stale_outputs(nb('god zilpah\n'), nb('god watered\n'))[0]
    assert stale_outputs(nb('12 ms\n', '#| varies: a time\n'), nb('15 ms\n', '#| varies: a time\n')) == []

def test_docs_check_flags_a_figure_that_a_phone_cannot_open_full_size():
    """At 390 px a figure's text is too small to read: it must link to the page that shows it at its own size (#34);
    a link to the bare PNG is not enough, since a phone's browser fits it to the screen again (#44)."""
    from docs_check import on_phone
    said, f = [], dict(src='02_bert_files/x.png', link='', text_px=12.0, shown=358, natural=1100)
    on_phone(f, said.append)
    assert said and 'no link to the page' in said[0] and '3.9 px' in said[0]
    said.clear(); on_phone(f | dict(link='02_bert_files/x.png'), said.append); assert 'no link to the page' in said[0]
    said.clear(); on_phone(f | dict(link='02_bert_files/x.png.html'), said.append); assert said == []
    on_phone(f | dict(link='02_bert_files/x.png.html', text_px=7.0), said.append)
    assert 'smallest text is 7.0 px' in said[0]

def test_the_site_writes_a_page_that_shows_a_figure_at_its_own_size(tmp_path):
    "The page a phone opens: the PNG at its intrinsic size (no max-width), the page scrolling sideways (#44)."
    import importlib.util
    spec = importlib.util.spec_from_file_location('site_build', Path(__file__).parents[1] / 'tools' / 'site.py')
    site = importlib.util.module_from_spec(spec); spec.loader.exec_module(site)
    (tmp_path / 'x.png').write_bytes(b'')
    site.full_size(tmp_path / 'x.png')
    page = (tmp_path / 'x.png.html').read_text()
    assert '<img src="x.png"' in page and 'max-width: none' in page and 'overflow-x: auto' in page
