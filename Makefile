# ringleader: `make demo` and `make test` do all set-up on a fresh Debian machine.
#   TORCH_SPEC=...   override the torch pin (default: the CPU build torch==2.13.0)
#   PYTHON=...       interpreter used to create the venv (default: python3)
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
PYTEST_ARGS ?=
#   TEST_WORKERS=N   pytest-xdist workers for `make test` (default 2: most tests wait on
#                    servers, hosts and ranks, so two overlap well even on 2 cores)
TEST_WORKERS ?= 2
APT_PACKAGES := python3-venv cmake g++ openssh-server openssh-client iproute2 openmpi-bin libopenmpi-dev rsync git passwd procps util-linux postgresql sudo slurm-wlm munge chromium fonts-dejavu-core podman runc catatonit mmdebstrap docker-registry docker.io
STAMP := $(VENV)/.ringleader-installed
#   HOROVOD_VENV=DIR   where `make horovod` makes the Horovod environment (default .horovod)
HOROVOD_VENV ?= .horovod
HOROVOD_STAMP := $(HOROVOD_VENV)/.ringleader-installed
PODMAN_DROP_IN := /etc/containers/containers.conf.d/50-ringleader.conf

.PHONY: setup system horovod demo demo-image demo-stop test test-gpu lint docs docs-serve docs-screenshots bench bench-slurm bench-ui clean

setup: system $(STAMP)

# System packages via apt, only when root and only what is missing.
system:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	  if [ -n "$$missing" ]; then \
	    echo "apt-get install$$missing"; \
	    echo "(another apt, such as unattended-upgrades on a fresh VM, is waited for up to 10 minutes)"; \
	    apt-get update -q -o DPkg::Lock::Timeout=600 >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=600 --no-install-recommends $$missing >/dev/null; \
	  fi; \
	else echo "not root: skipping apt (needs:$(APT_PACKAGES))"; fi
	@if [ "$$(id -u)" = 0 ] && command -v podman >/dev/null 2>&1 && [ ! -e $(PODMAN_DROP_IN) ]; then \
	  mkdir -p $$(dirname $(PODMAN_DROP_IN)) && printf '%s\n' \
	    '# ringleader (make setup): containers get the rlimits of the process that starts them,' \
	    '# as process pods do; podman'"'"'s defaults (nofile, nproc) exceed what some VMs allow,' \
	    '# and runc then fails with "error setting rlimit type 7". Remove to undo.' \
	    '[containers]' 'default_ulimits = []' > $(PODMAN_DROP_IN); \
	  echo "wrote $(PODMAN_DROP_IN)"; fi

$(STAMP): pyproject.toml constraints.txt
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	@echo "pip: $(TORCH_SPEC) into $(VENV) (the first time: a minute or two)"
	$(VENV)/bin/pip install -q "$(TORCH_SPEC)"
	@echo "pip: ringleader and its packages (TensorFlow, JAX, XGBoost...; a few minutes the first time)"
	$(VENV)/bin/pip install -q -c constraints.txt -e ".[examples,mpi,kubeflow,dev,docs]"
	touch $(STAMP)
	@echo "ready: . $(VENV)/bin/activate puts ringleader on your PATH"

# Horovod 0.28.1 built for TensorFlow 2.12 in its own venv (scripts/horovod-env.sh): about
# 3 minutes the first time on 2 cores, the wheel then cached in ~/.cache/ringleader/wheels.
horovod: $(HOROVOD_STAMP)

$(HOROVOD_STAMP): scripts/horovod-env.sh constraints-horovod.txt | system
	PYTHON=$(PYTHON) RINGLEADER_VENV=$(abspath $(VENV)) scripts/horovod-env.sh $(HOROVOD_VENV)

# The embedded server (left running, state in ./.ringleader-demo), the digits example as a
# 2-worker PyTorch workload, its merged logs, its accuracy and the API's URL.
demo: setup
	$(VENV)/bin/python -m ringleader.examples.demo

# The same workload in ringleader's PyTorch CPU image (root: rootful podman), made from
# examples/images/pytorch-cpu when podman lacks it (about 2 minutes the first time).
demo-image: setup
	$(VENV)/bin/python -m ringleader.examples.demo --image

demo-stop:
	$(VENV)/bin/python -m ringleader.examples.demo --stop

# The manual's site (MkDocs + Material) into site/: the CLI and REST reference pages are
# regenerated from the code first; --strict fails on a broken link or a page not in the nav.
docs: setup
	$(VENV)/bin/python -m ringleader.cli.docs_reference
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The manual's screenshots (docs/ui/*.png) taken afresh by the browser tests that make them.
docs-screenshots: setup
	RINGLEADER_DOC_SCREENSHOTS=1 CI=true $(VENV)/bin/pytest -q tests/server/ui -k browser

docs-serve: docs
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --dev-addr 127.0.0.1:8000

test: setup horovod
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The tests that need a CUDA GPU (tests/gpu: NCCL, devices bound by the scheduler, the
# memory cap of a fraction, nvidia-smi's facts); they skip, never fail, without one.
# torch comes from TORCH_SPEC like everywhere else: its default (torch==2.13.0 from PyPI)
# is the CPU build on which every GPU test skips, so on a GPU machine install a CUDA build
# first (a fresh venv: make test-gpu TORCH_SPEC="torch==2.13.0 --index-url URL", URL being
# PyTorch's CUDA wheel index, which needs the network).
test-gpu: setup
	$(VENV)/bin/pytest tests/gpu -v $(PYTEST_ARGS)

bench: setup
	$(VENV)/bin/python bench/launch.py

# srun torchrun vs launch --slurm vs the server's Slurm backend, on a throw-away cluster (root).
bench-slurm: setup
	$(VENV)/bin/python bench/slurm.py --runs 5 --epochs 3

# The web UI's workloads page with 10,000 workloads (SQLite and PostgreSQL).
bench-ui: setup
	$(VENV)/bin/python bench/ui.py

lint: setup
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench

clean:
	-test ! -x $(VENV)/bin/python || $(VENV)/bin/python -m ringleader.examples.demo --stop
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .ruff_cache .ringleader-demo site
