# Two commands do everything on a fresh clone:
#   make run    -> set up .venv if needed, then the default online TTA run on the embedded benchmark
#   make test   -> set up .venv if needed, then the test suite (both tiers: what CI runs)
#   make test-fast -> the fast tier only (docs/testing.md): no rendered benchmark, no subprocess, about 90 s
#   make test-gpu  -> the CUDA tests (skipped elsewhere; CI has no GPU)
# Extra arguments: make run ARGS="model=xpool adapter=source shift=gaussian shift.severity=5"
PY ?= python3
VENV ?= .venv
# torch for CPU machines of this project; GPU users can pre-install any torch>=2.1 in the venv (kept if importable)
TORCH_SPEC ?= torch==2.14.1 torchvision==0.29.1
ARGS ?=
PYTEST_ARGS ?= -q
# the suite runs in TEST_WORKERS pytest-xdist processes (2: one per core of this project's machines; 0 = in one
# process; auto = one per core, each building its own tiny benchmark), each with one torch thread (OMP_NUM_THREADS)
TEST_WORKERS ?= 2

# INSTALLER=uv (default): uv downloads and installs in parallel, about 3x faster than pip on a fresh venv (the
# largest part of a first `make run`); it reads no pip.conf, so behind a private index use INSTALLER=pip. If uv
# cannot be installed or fails, pip does the install.
INSTALLER ?= uv
PIP_INSTALL = $(VENV)/bin/python -m pip install -q
UV_INSTALL = $(VENV)/bin/uv pip install -q --compile-bytecode --python $(VENV)/bin/python

$(VENV)/.installed: pyproject.toml
	test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	@set -e; if [ "$(INSTALLER)" = uv ] && { test -x $(VENV)/bin/uv || $(PIP_INSTALL) uv; }; then \
		echo "installing with uv (INSTALLER=pip to use pip)"; \
		$(VENV)/bin/python -c "import torch, torchvision" 2>/dev/null || $(UV_INSTALL) $(TORCH_SPEC) \
			|| $(PIP_INSTALL) $(TORCH_SPEC); \
		$(UV_INSTALL) -e ".[dev,text,video,report,slurm,loggers]" || $(PIP_INSTALL) -e ".[dev,text,video,report,slurm,loggers]"; \
	else \
		$(PIP_INSTALL) --upgrade pip; \
		$(VENV)/bin/python -c "import torch, torchvision" 2>/dev/null || $(PIP_INSTALL) $(TORCH_SPEC); \
		$(PIP_INSTALL) -e ".[dev,text,video,report,slurm,loggers]"; \
	fi
	touch $@

# WordNet 3.0 for the text shifts (Debian wordnet-base + wordnet-sense-index, read by nltk; tta/shifts/text/wordnet.py).
# Installed only when missing, as root, non-interactively; otherwise prints the command and carries on.
WORDNET_DIR ?= /usr/share/wordnet
wordnet:
	@if [ -n "$$WNSEARCHDIR" ] && [ -f "$$WNSEARCHDIR/data.noun" ]; then exit 0; fi; \
	if [ -f $(WORDNET_DIR)/data.noun ] && [ -f $(WORDNET_DIR)/index.sense ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing WordNet (Debian wordnet-base wordnet-sense-index)"; \
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends wordnet-base wordnet-sense-index \
		|| echo "WARNING: apt-get could not install wordnet-base wordnet-sense-index; the WordNet text shifts will fail"; \
	else \
		echo "WARNING: WordNet is missing; the WordNet text shifts (synonym_replace, word_insert, POS-based drops) need it:"; \
		echo "  sudo apt-get install -y wordnet-base wordnet-sense-index   (or set WNSEARCHDIR to a WordNet 3.0 dict dir)"; \
	fi

# ImageMagick's MagickWand library for the snow curtain's motion blur (Debian libmagickwand-6.q16-6, loaded by PyPI
# Wand, the `video` extra; tta/shifts/video/weather.py). Installed only when missing, as root, non-interactively;
# otherwise prints the command and carries on (shift=snow then stops with one line; shift=snow_approx needs nothing).
MAGICKWAND_PKG ?= libmagickwand-6.q16-6
imagemagick:
	@if ldconfig -p 2>/dev/null | grep -q 'libMagickWand'; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing ImageMagick's MagickWand (Debian $(MAGICKWAND_PKG))"; \
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(MAGICKWAND_PKG) \
		|| echo "WARNING: apt-get could not install $(MAGICKWAND_PKG); shift=snow will fail (shift=snow_approx works)"; \
	else \
		echo "WARNING: ImageMagick's MagickWand library is missing; shift=snow (ImageMagick motion blur) needs it:"; \
		echo "  sudo apt-get install -y $(MAGICKWAND_PKG)   (or libmagickwand-dev; shift=snow_approx runs without it)"; \
	fi

# Chromium for the test that opens the report's HTML page in a headless browser (tests/reporting/
# test_report_dashboards.py). Installed only when missing, as root, non-interactively; otherwise prints the command
# and carries on (that test then skips).
chromium:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Chromium (Debian chromium)"; \
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium \
		|| echo "WARNING: apt-get could not install chromium; the report's browser test will skip"; \
	else \
		echo "WARNING: Chromium is missing; the report's browser test skips without it:"; \
		echo "  sudo apt-get install -y chromium"; \
	fi

# A single-node SLURM cluster on this machine (slurmctld + slurmd + munge on localhost, launch/slurm_local.sh), for
# trying hydra/launcher=slurm and for tests/run/test_slurm.py. Needs root; installs Debian's slurm-wlm and munge when
# missing. Elsewhere it prints why and carries on (those tests then skip). Afterwards: export SLURM_CONF=<printed>.
SLURM_DIR ?= /tmp/tta-slurm
slurm:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		launch/slurm_local.sh $(SLURM_DIR) || echo "WARNING: the local SLURM cluster did not start; the SLURM tests will skip"; \
	else \
		echo "WARNING: a local SLURM cluster needs root and apt-get (sudo make slurm); the SLURM tests skip without it"; \
	fi

# slurm-wlm and munge for the SLURM tests (their fixture starts the cluster itself); only `make test` installs them
slurm-packages:
	@if command -v slurmctld >/dev/null 2>&1 && command -v munged >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing SLURM and munge (Debian slurm-wlm munge)"; \
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge \
		|| echo "WARNING: apt-get could not install slurm-wlm munge; the SLURM tests will skip"; \
	else \
		echo "WARNING: SLURM is missing; the SLURM tests skip without it: sudo apt-get install -y slurm-wlm munge"; \
	fi

# what runs need; Chromium serves only the report's browser test, so only `make test` installs it
setup: $(VENV)/.installed wordnet imagemagick

run: setup
	$(VENV)/bin/python -m tta.run $(ARGS)

# --dist loadscope keeps a test module on one worker, so its module-scoped fixtures (a sweep, a built run) run once
test: setup chromium slurm-packages
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(VENV)/bin/python -m pytest -n $(TEST_WORKERS) --dist loadscope $(PYTEST_ARGS)

# the developer loop: tests marked fast by tests/conftest.py (one torch thread: the tiny models run fastest so)
test-fast: setup
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(VENV)/bin/python -m pytest -m fast -n $(TEST_WORKERS) $(PYTEST_ARGS)

# the CUDA tier on a GPU machine (docs/testing.md, "On a GPU"): one process, since the tests share the one GPU and
# each real-path case already runs three whole runs
test-gpu: setup
	$(VENV)/bin/python -m pytest -m gpu -p no:xdist -rs $(PYTEST_ARGS)

.PHONY: setup run test test-fast test-gpu wordnet imagemagick chromium slurm slurm-packages
