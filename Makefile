# csi-mock developer entry points. `make run` and `make test` do all set-up themselves.
PYTHON ?= python3
NODE_ID ?= node-1
STATE_DIR ?= /tmp/csi-mock
ENDPOINT ?= unix:///tmp/csi-mock/csi.sock
REPORTS ?= reports

.PHONY: install run test lint unit sanity tools doctor bench clean

install:  ## install csi-mock and its development dependencies
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -e '.[dev]'

run: install  ## run the driver on $(ENDPOINT) with a 100Gi pool for $(NODE_ID)
	csi-mock serve --nodeid=$(NODE_ID) --endpoint=$(ENDPOINT) --statedir=$(STATE_DIR) \
		--capacity=default=100Gi

lint: install
	$(PYTHON) scripts/gen_proto.py --check
	$(PYTHON) -m ruff check csi_mock harness tests scripts benchmarks
	$(PYTHON) -m ruff format --check csi_mock harness tests scripts benchmarks
	$(PYTHON) -m mypy

tools:  ## build every pinned external tool into the cache (subset: TOOLS="csi-sanity kubectl"; docs/toolchain.md)
	bash scripts/tools.sh build $(TOOLS)

doctor:  ## list every pinned tool: version, present or missing
	bash scripts/tools.sh doctor

test: install lint  ## everything CI runs: lint, unit, driver, crash, csi-sanity
	bash scripts/tools.sh build csi-sanity
	mkdir -p $(REPORTS)
	$(PYTHON) -m pytest -ra --junitxml=$(REPORTS)/junit.xml

bench: install  ## RPC benchmarks over the unix socket (results: docs/benchmarks.md)
	$(PYTHON) benchmarks/bench_rpc.py

clean:
	rm -rf $(REPORTS) .pytest_cache .mypy_cache .ruff_cache
