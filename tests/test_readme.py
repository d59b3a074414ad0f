"""The README's code runs as printed. Each Python block runs in a fresh interpreter in an empty folder (its
placeholder paths replaced by real ones: make demo's vocabulary by the shipped model's, any BERT directory by
all-MiniLM-L6-v2) and prints what the README shows under it; each command line names only options and targets
that exist."""
import ast, re, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / 'README.md').read_text()
# A block, then the output nbconvert renders under it (indented four spaces), if any.
BLOCK = re.compile(r'```(\w*)\n(.*?)```\n((?:\n|    [^\n]*\n)*)', re.S)

def blocks(lang: str) -> list[tuple[str, str]]:
    return [(code, re.sub(r'(?m)^    ', '', out).strip()) for kind, code, out in BLOCK.findall(README) if kind == lang]

def placeholders(minilm_dir: Path) -> dict[str, str]:
    import bert_nb
    return {"'runs/demo/model/vocab.txt'": repr(str(Path(bert_nb.KJV) / 'vocab.txt')),
            "'path/to/a/transformers/bert'": repr(str(minilm_dir))}

RUN = """import ast, sys
tree = ast.parse(sys.stdin.read())
last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
exec(compile(tree, 'README', 'exec'))
value = last and eval(compile(ast.Expression(last.value), 'README', 'eval'))
if value is not None:  # as Jupyter shows it: the last expression's value
    import pprint; pprint.pprint(value, width=79)
"""

def test_the_readme_has_the_blocks_this_file_runs():
    assert len(blocks('python')) >= 3 and len(blocks('sh')) >= 2

@pytest.mark.parametrize('i', range(len(blocks('python'))))
def test_each_python_block_runs_as_printed(i, tmp_path, minilm_dir):
    code, shown = blocks('python')[i]
    for k, v in placeholders(minilm_dir).items(): code = code.replace(k, v)
    ast.parse(code)
    r = subprocess.run([sys.executable, '-c', RUN], input=code, capture_output=True, text=True, cwd=tmp_path,
                       timeout=600)  # a hang's guard: a block takes seconds
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == shown.split()  # what the README shows under it, if anything, to the whitespace

def test_the_in_code_block_reloads_what_it_saved(tmp_path, minilm_dir):
    "save_bert's directory is the path it was given: load_bert reads it back there, not from a model/ inside it."
    code = next(c for c, _ in blocks('python') if 'save_bert(' in c)
    for k, v in placeholders(minilm_dir).items(): code = code.replace(k, v)
    code += "\nassert cls.load_report and pooled.shape == (2, 128) and (Path('runs/mine') / 'model.safetensors').is_file()"
    r = subprocess.run([sys.executable, '-c', 'from pathlib import Path\n' + code], capture_output=True, text=True,
                       cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]

def test_each_command_line_names_what_exists():
    "`make X` names a target of the Makefile; `bert-nb SUB --opt` an option of SUB's --help."
    targets = set(re.findall(r'(?m)^([\w-]+):', (ROOT / 'Makefile').read_text()))
    helps, checked = {}, set()
    for code, _ in blocks('sh'):
        for line in re.sub(r'\\\n|\n\s+(?=\[)', ' ', code).splitlines():  # a command's continued lines are one
            line = line.split('#')[0]
            if m := re.match(r'make (\S+)', line): assert m[1] in targets, line
            if m := re.match(r'(?:bert-nb|torchrun .*bert_nb/command\.py) (\w+)', line):
                if m[1] not in helps:
                    helps[m[1]] = subprocess.run([sys.executable, '-m', 'bert_nb.command', m[1], '--help'],
                                                 capture_output=True, text=True, cwd=ROOT).stdout
                opts = set(re.findall(r'(?<![\w-])--[\w-]+', line)) - {'--nproc_per_node'}
                assert opts <= set(re.findall(r'--[\w-]+', helps[m[1]])), (line, opts)
                checked |= opts
    assert {'make demo', 'make test'} <= set(re.findall(r'make \w+', README)) and len(checked) >= 10
