# Two commands do everything on a fresh clone:
#   make run    -> set up .venv if needed, then the default online TTA run on the embedded benchmark
#   make test   -> set up .venv if needed, then the test suite
# Extra arguments: make run ARGS="model=xpool adapter=source shift=gaussian shift.severity=5"
PY ?= python3
VENV ?= .venv
# torch for CPU machines of this project; GPU users can pre-install any torch>=2.1 in the venv (kept if importable)
TORCH_SPEC ?= torch==2.14.1 torchvision==0.29.1
ARGS ?=
PYTEST_ARGS ?= -q

$(VENV)/.installed: pyproject.toml
	test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -c "import torch, torchvision" 2>/dev/null || $(VENV)/bin/python -m pip install -q $(TORCH_SPEC)
	$(VENV)/bin/python -m pip install -q -e ".[dev,text,report,slurm]"
	touch $@

setup: $(VENV)/.installed

run: setup
	$(VENV)/bin/python -m tta.run $(ARGS)

test: setup
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

.PHONY: setup run test
