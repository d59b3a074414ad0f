"""Build the chapters as a static site in _docs/: executed notebooks as Markdown pages, an API page, mkdocs-material.

Why this way: Quarto (nbdev_docs) cannot be installed here. mkdocs-material installs from PyPI and gives the
navigation, the per-page table of contents, prev/next links and a search that works from file:// (its offline
plugin). nbconvert's Markdown exporter turns each executed notebook into an ordinary page, so headings, anchors
and math go through the same Markdown pipeline as every other page. Everything a page loads at reading time is
copied beside it: MathJax 2.7 from PyPI's jupyter-server-mathjax, the iframe-worker shim that file:// search needs
from the npm registry. Nothing is fetched from a network when the pages are read.
"""
import argparse, html, importlib, inspect, json, os, pprint, re, shutil, subprocess, sys, tarfile, tempfile, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
import nbformat
from markdown.extensions.toc import slugify
from nbconvert import MarkdownExporter
from nbconvert.preprocessors import TagRemovePreprocessor
from nbrun import root, in_kernel, directives, strip_directives, stale_outputs, kernel_warnings
from bundle import bundle

SRC, SITE = root / '_proc' / 'site', root / '_docs'
TEMPLATES = root / 'tools' / 'site_templates'
CHAPTERS = ['index', '00_rng', '01_wordpiece', '02_bert', '03_pretrain', '04_electra', '05_finetune', '06_modernbert',
            '07_tagging', '08_map', '09_results', '10_data', '11_files', '12_command', '12a_run', '12b_rundir',
            '12c_nodes', '12d_budget', '12e_arch', '13_diagnostics', '14_speed', '15_checks', '16_modernbert_files',
            '17_course']
MODULES = {'rng': '00_rng', 'wordpiece': '01_wordpiece', 'bert': '02_bert', 'pretrain': '03_pretrain',
           'electra': '04_electra', 'finetune': '05_finetune', 'modernbert': '06_modernbert', 'tagging': '07_tagging',
           'data': '10_data', 'files': '11_files', 'command': '12_command', 'run': '12a_run', 'rundir': '12b_rundir',
           'nodes': '12c_nodes', 'budget': '12d_budget', 'arch': '12e_arch',
           'diagnostics': '13_diagnostics', 'speed': '14_speed',
           'checks': '15_checks', 'modernbert_files': '16_modernbert_files', 'course': '17_course'}
SHIM = 'iframe-worker@1.0.4'

def reader_cells(nb):
    """The cells a reader sees: no `#| hide` cells, no directive-only cells (`default_exp`), no directive lines, only
    the output of an `#| echo: false` cell; a figure takes its caption and alt text from `#| fig-cap:`, `#| fig-alt:`."""
    cells = []
    for c in nb.cells:
        if c.cell_type == 'code':
            d = directives(c)
            if 'hide' in d: continue
            if d.get('echo:') == ['false']: c.metadata.setdefault('tags', []).append('remove_input')  # output only
            cap = re.sub(r'`([^`]+)`', r'<code>\1</code>', html.escape(' '.join(d.get('fig-cap:', []))))
            for o in c.outputs:
                if 'image/png' in o.get('data', {}):
                    o.metadata.setdefault('image/png', {}).update(caption_html=cap, alt=' '.join(d.get('fig-alt:', [])))
            strip_directives(c)
            if not c.source.strip() and not c.outputs: continue
        cells.append(c)
    nb.cells = cells
    return nb

def chapter_links(md: str) -> str:
    """Links between chapters name the notebooks, and the play page its source (which Jupyter and GitHub open); on
    the site they are the pages built from them."""
    md = md.replace('](../tools/site_templates/play.md', '](play.md')
    return re.sub(r'\]\((\d\d[a-z]?_\w+|index)\.ipynb(#[\w-]*)?\)', r'](\1.md\2)', md)

def page(stem: str, nb) -> str:
    "One executed notebook as Markdown (outputs in ```text fences, images as files beside the page)."
    nb.metadata['language_info'] = {'name': 'python'}  # nbdev_clean strips it; code fences need it
    exporter = MarkdownExporter(extra_template_basedirs=[str(TEMPLATES)], template_name='site')
    exporter.register_preprocessor(TagRemovePreprocessor(remove_input_tags={'remove_input'}), enabled=True)
    body, res = exporter.from_notebook_node(nb, resources={'output_files_dir': f'{stem}_files'})
    for name, data in res.get('outputs', {}).items():
        (SRC / name).parent.mkdir(parents=True, exist_ok=True)
        (SRC / name).write_bytes(data)
    return chapter_links(body)

def sections(stem: str) -> list[tuple[str, str]]:
    "(heading, exported source) for every exported code cell of a chapter, under its nearest heading."
    nb, heading, out = nbformat.read(root / 'nbs' / f'{stem}.ipynb', as_version=4), '', []
    for c in nb.cells:
        if c.cell_type == 'markdown':
            hs = [l.lstrip('#').strip() for l in c.source.splitlines() if re.match(r'#{1,3} ', l)]
            if hs: heading = hs[-1]
        elif 'export' in directives(c): out.append((heading, c.source))
    return out

def defined_in(name: str, cells, owner: str | None = None) -> str:
    "The heading of the section whose exported code defines `name` (a method: in its class or patched onto it)."
    pats = [rf'^\s*def {name}\((self: |cls: type\[){owner}\b', rf'^class {owner}\b'] if owner else \
           [rf'^(def|class) {name}\b', rf'^{name}\s*[:=]', rf'^[\w, ]*\b{name}\b[\w, ]* = ']
    for p in pats:
        for heading, src in cells:
            if re.search(p, src, re.M): return heading
    return cells[0][0]

def value(obj) -> str:
    "A constant as the API page writes it: a path inside the package relative to the package, not to this machine."
    pkg = Path(importlib.import_module('bert_nb').__file__).parent
    if isinstance(obj, Path) and obj.is_relative_to(pkg):
        return f"Path(bert_nb.__file__).parent / {obj.relative_to(pkg).as_posix()!r}"
    return pprint.pformat(obj, width=100)

def signature(head: str, obj) -> str:
    "`head(params)` with the annotations as written, one parameter a line when it would be long."
    try: sig = inspect.signature(obj)
    except (TypeError, ValueError): return head
    params, star = [], False
    for p in sig.parameters.values():
        if p.kind == p.KEYWORD_ONLY and not star: params.append('*')  # keyword-only from here on
        star |= p.kind in (p.KEYWORD_ONLY, p.VAR_POSITIONAL)
        params.append(str(p).replace("'", ''))
    ret = '' if sig.return_annotation is inspect.Signature.empty else f' -> {sig.return_annotation}'.replace("'", '')
    line = f"{head}({', '.join(params)}){ret}"
    return line if len(line) <= 100 else f"{head}(\n" + ''.join(f'    {p},\n' for p in params) + f"){ret}"

def api_page() -> str:
    "Every name in each module's __all__ (and each public method): signature, docstring, the section building it."
    sys.path.insert(0, str(root))
    lines = ['# API', '', 'Every name each module exports, with its signature, its docstring and a link to the section of '
             'the chapter that builds and checks it.', '']
    for mod, stem in MODULES.items():
        m, cells = importlib.import_module(f'bert_nb.{mod}'), sections(stem)
        title = nbformat.read(root / 'nbs' / f'{stem}.ipynb', as_version=4).cells[0].source.splitlines()[0].lstrip('# ')
        lines += [f'## bert_nb.{mod}', '', f'From the chapter [{title}]({stem}.md).', '']
        for name in m.__all__:
            obj = getattr(m, name)
            where = defined_in(name, cells)
            link = f'[{stem} § {where}]({stem}.md#{slugify(where, "-")})'
            if callable(obj):
                kind = 'class' if inspect.isclass(obj) else 'def'
                lines += [f'### `{name}`', '', f'```python\n{signature(f"{kind} {name}", obj)}\n```', '',
                          inspect.getdoc(obj) or '', '', f'Built in {link}.', '']
                if inspect.isclass(obj):  # its methods, those of its bases in this package included
                    owners = [k for k in reversed(obj.__mro__) if k.__module__ == obj.__module__]
                    for owner, meth, f in [(k.__name__, n, f) for k in owners for n, f in vars(k).items()]:
                        f = f.__func__ if isinstance(f, (classmethod, staticmethod)) else f
                        if meth.startswith('_') or not inspect.isfunction(f): continue
                        mwhere = defined_in(meth, cells, owner=owner)
                        lines += [f'#### `{name}.{meth}`', '', f'```python\n{signature(f"def {meth}", f)}\n```', '',
                                  inspect.getdoc(f) or '', '',
                                  f'Built in [{stem} § {mwhere}]({stem}.md#{slugify(mwhere, "-")}).', '']
            else:
                lines += [f'### `{name}`', '', f'```python\n{name} = {value(obj)}\n```', '',
                          f'Defined in {link}.', '']
    return '\n'.join(lines) + '\n'

def assets(dest: Path):
    "MathJax (PyPI) and the iframe-worker shim (npm) beside the pages, and the site's own CSS and MathJax config."
    import jupyter_server_mathjax
    shutil.copytree(Path(jupyter_server_mathjax.__file__).parent / 'static', dest / 'mathjax', dirs_exist_ok=True)
    shim = dest / 'iframe-worker' / 'shim.js'
    if not shim.is_file():
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(['npm', 'pack', SHIM, '--silent', '--pack-destination', tmp], check=True, capture_output=True)
            with tarfile.open(next(Path(tmp).glob('*.tgz'))) as t:
                shim.parent.mkdir(parents=True, exist_ok=True)
                shim.write_bytes(t.extractfile('package/shim/index.js').read())
    for f in ('extra.css', 'mathjax-config.js'): shutil.copy(TEMPLATES / f, dest / f)

def play(dest: Path, model: Path, snapshots: Path):
    """The page's script and the shipped model as a script (base64): a page from file:// may not fetch a file. Its
    training's snapshots (int8 rows, `snapshots`) go with it for the slider; the last one is the model itself."""
    import base64, json
    b64 = lambda f: base64.b64encode(f.read_bytes()).decode()
    (dest / 'play').mkdir(parents=True, exist_ok=True)
    (dest / 'play' / 'bert-nb.js').write_text(bundle())
    shipped = {'name': 'the shipped model (bert_nb.KJV)', 'config': (model / 'config.json').read_text(),
               'vocab': (model / 'vocab.txt').read_text(encoding='utf-8'), 'safetensors': b64(model / 'model.safetensors')}
    m = json.loads((model / 'metrics.json').read_text())
    if m.get('snapshots'):  # a script a snapshot (its int8 weights in base64), loaded once the page is usable
        shipped['run'] = {'metrics': json.dumps({k: m[k] for k in ('snapshots', 'eval')}), 'files': {}}
        for s in m['snapshots'][:-1]:
            name = f"kjv-{Path(s['dir']).name}.js"
            shipped['run']['files'][s['dir']] = f'assets/play/{name}'
            (dest / 'play' / name).write_text(f"(globalThis.BERT_NB_SNAPSHOTS ??= {{}})[{json.dumps(s['dir'])}] = "
                                              f"'{b64(snapshots / (Path(s['dir']).name + '.safetensors'))}';\n")
    (dest / 'play' / 'kjv-model.js').write_text(f'globalThis.BERT_NB_SHIPPED = {json.dumps(shipped)};\n')

VIEWER = '''<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{name}, full size</title><style>body {{ margin: 0; overflow-x: auto; }} img {{ max-width: none; display: block; }}</style>
</head><body><img src="{name}" alt="the figure {name} at its own size: scroll sideways to read it"></body></html>
'''

def full_size(png: Path):
    "A page beside the figure that shows it at its own size: a phone's browser fits a bare PNG to the screen."
    png.with_name(png.name + '.html').write_text(VIEWER.format(name=png.name))

def build(execute_nbs: bool = True):
    if SRC.exists(): shutil.rmtree(SRC)
    SRC.mkdir(parents=True)
    stale, tried = [], {}
    sys.path.insert(0, str(root / 'tests'))
    import test_exercises as answers  # its answers, tried in the kernel the chapter ran in: the chapter runs once
    def run(stem: str):  # Run All, in a real kernel; a stored output the code no longer prints is an error
        p = root / 'nbs' / f'{stem}.ipynb'
        if not execute_nbs: return nbformat.read(p, as_version=4), None
        t = time.perf_counter()
        nb = in_kernel(p, extra=[answers.trial(stem)] if stem in answers.ANSWERS else [])
        if stem in answers.ANSWERS:
            tried[stem] = dict(digest=answers.digest(stem), found=answers.found(nb.metadata.pop('extra_outputs')))
            stale.extend(f'{stem}: exercise {f}' for f in tried[stem]['found'])
        stale.extend(f'{stem}: {s}' for s in stale_outputs(nbformat.read(p, as_version=4), nb))
        stale.extend(f'{stem}: a warning in Jupyter, hidden cells included: {w}' for w in kernel_warnings(nb))
        return nb, time.perf_counter() - t
    # two kernels at a time on one thread each: two of two threads each fought over two cores and took longer
    os.environ.setdefault('OMP_NUM_THREADS', '1')
    import torch  # the kernels the notebooks run on (the Makefile's KERNELS, or this CPU's own)
    print(f"Run All on torch's {torch.backends.cpu.get_cpu_capability()} kernels" + ''.join(
        f', {k}={os.environ[k]}' for k in ('MKL_ENABLE_INSTRUCTIONS', 'ONEDNN_MAX_CPU_ISA') if k in os.environ))
    with ThreadPoolExecutor(2) as ex:
        for stem, (nb, secs) in zip(CHAPTERS, ex.map(run, CHAPTERS)):
            (SRC / f'{stem}.md').write_text(page(stem, reader_cells(nb)))
            print(f'page {stem}.md' + (f' (Run All, slow cells skipped: {secs:.0f} s)' if secs else ''))
    if tried: answers.KEPT.write_text(json.dumps(tried, indent=1) + '\n')  # for pytest, which reruns none of them
    if stale: raise SystemExit('stored outputs that the code no longer prints (store the new ones: '
                               '`python tools/nbrun.py --refresh NB`), exercises, or warnings:\n  ' + '\n  '.join(stale))
    (SRC / 'api.md').write_text(api_page())
    shutil.copy(TEMPLATES / 'play.md', SRC / 'play.md')
    assets(SRC / 'assets')
    play(SRC / 'assets', root / 'bert_nb' / 'models' / 'kjv', root / 'nbs' / 'kjv-snapshots')
    for png in SRC.rglob('*.png'): full_size(png)
    subprocess.run([sys.executable, '-m', 'mkdocs', 'build', '--quiet', '--strict', '-f', str(root / 'mkdocs.yml')],
                   check=True, env={**os.environ, 'NO_MKDOCS_2_WARNING': '1'})
    print(f'The site is in {SITE}/ (open {SITE / "index.html"}).')

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--no-execute', action='store_true', help='use the outputs stored in the notebooks')
    build(not ap.parse_args().no_execute)
