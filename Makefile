# The two commands a newcomer runs are `make demo` and `make test`; both work on a fresh clone.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# setuptools says "Editable installation ... be careful with folders named like your package" on every editable
# install of a package-dir mapping (providers/ -> gpuplan.providers): information, not a problem; keep it quiet so
# the first thing `make demo` shows is the demo (the packaging config itself builds without warnings).
PIP := PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip --disable-pip-version-check -q
GPUPLAN := $(VENV)/bin/gpuplan
# The demo keeps its database and run folders inside the checkout so it never touches a user's real books.
DEMO_HOME := $(CURDIR)/.demo
# The local machine is billed at a pretend $2.50/h in the demo so the books have something to show.
DEMO_ENV := GPUPLAN_DB=sqlite:///$(DEMO_HOME)/gpuplan.db GPUPLAN_HOME=$(DEMO_HOME) GPUPLAN_LOCAL_PRICE_PER_HOUR=2.50

.PHONY: install install-test demo test fuzz bench lint docs docs-serve clean ui ui-screenshots

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip setuptools wheel

# torch==2.13.0 is pinned: on these machines it is a CPU build on local disk; a looser pin pulls CUDA (GBs).
# The demo trains a tiny GPT, so `install` takes the bench extra; the core CLI never imports torch at start-up.
$(VENV)/.installed: $(PY) pyproject.toml
	$(PIP) install -e '.[bench,postgres,plot,ui]' 'torch==2.13.0' numpy
	touch $@

# The docs extra too, so `make test` can build the site strictly (tests/docs/test_site.py).
$(VENV)/.installed-test: $(VENV)/.installed
	$(PIP) install -e '.[bench,test,postgres,plot,ui,docs,azure]' 'torch==2.13.0' numpy
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

demo: install
	@mkdir -p $(DEMO_HOME)
	$(DEMO_ENV) bash scripts/demo.sh $(GPUPLAN)

# The dashboard over the demo's books (`make demo` first): http://127.0.0.1:8765/, Ctrl-C stops it.
ui: install
	$(DEMO_ENV) $(GPUPLAN) ui

# The screenshots in docs/ui/ (headless Chromium over the demo's books; `make demo` first).
ui-screenshots: install-test
	$(DEMO_ENV) $(PY) scripts/ui_screenshots.py --db sqlite:///$(DEMO_HOME)/gpuplan.db

# The suite runs on TEST_WORKERS pytest-xdist workers: twice the CPUs, at most 8 (most tests wait on child processes,
# so 4 workers on 2 cores cut the wall time from ~14 to ~7.5 min). Each worker has its own session services
# (PostgreSQL, the Slurm cluster, moto servers); worksteal rebalances the long tests at the end.
# `make test TEST_WORKERS=0` runs it in one process.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$(( n * 2 > 8 ? 8 : n * 2 )))
TEST_DIST ?= worksteal

# The static checks `make test` (what CI runs) and `make lint` share: ruff, mypy (scripts/typecheck.sh, cached in
# .mypy_cache: a few seconds once warm) and vulture (dead code; framework-used names in scripts/vulture_whitelist.py).
CHECK_STATIC = $(VENV)/bin/ruff check . && MYPY=$(CURDIR)/$(VENV)/bin/mypy bash scripts/typecheck.sh && \
	$(VENV)/bin/vulture gpuplan providers jobs scripts/vulture_whitelist.py --min-confidence 61

test: install-test
	bash scripts/test-services.sh
	$(CHECK_STATIC)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist $(TEST_DIST) $(PYTEST_ARGS)

# The property fuzz of the job spec and of every command's options, long: thousands of random examples (minutes).
# `make test` runs the same properties on a small derandomized slice (tests/support/fuzzing.py).
# Each long property runs for minutes on a shared machine: past the suite's 300 s per test (pyproject), so the
# per-test timeout is an hour here (every child process still has its own timeout). GPUPLAN_FUZZ_OUTCOMES=FILE
# records each refusal and failure for counting (tests/support/fuzzing.py).
fuzz: install-test
	GPUPLAN_FUZZ=1 $(PY) -m pytest tests/fuzz -p no:cacheprovider --timeout 3600 $(PYTEST_ARGS)

bench: install-test
	$(PY) bench/run_all.py

# The documentation site (docs/, mkdocs.yml): warnings are errors, so a broken link or a missing page fails.
# The CLI, job-spec, config-file and error references are generated from the code at build time
# (scripts/docsite/hooks.py). `make test` builds it the same way and runs every ```console example in docs/.
DOCS_ADDR ?= 127.0.0.1:8000

docs: install-test
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir $(CURDIR)/site

docs-serve: install-test
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --strict --dev-addr $(DOCS_ADDR)

lint: install-test
	$(CHECK_STATIC)

clean:
	rm -rf $(VENV) .demo build site *.egg-info .pytest_cache .mypy_cache
