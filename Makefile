# streamkeep developer entry points (GNU make).

PY   ?= python3
VENV  = .venv
VPY   = $(VENV)/bin/python
PIP   = $(VPY) -m pip

# Use sudo for apt only when we are not root and sudo is available.
SUDO := $(shell if [ "$$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then echo sudo; fi)

.PHONY: venv dev run demo test soak lint docs kernels bench crashbench export-demo clean redis-server lua-headers \
	redis-sentinel redis-exporter iproute2 iptables java disk-tools crcmod-check chromium etcd

# ---------------------------------------------------------------- environments

$(VPY):
	test -x $(VPY) || $(PY) -m venv $(VENV)

# The compiled core's sources: a changed kernel, or a .pxd the kernels share, reinstalls,
# which recompiles them (setup.py).
KERNELS := $(shell find . -path ./.venv -prune -o -path ./build -prune -o \( -name '_*_c.pyx' -o -name '*.pxd' \) -print)
# The command path mypyc compiles (setup.py's COMPILED): an edited one is compiled again, in
# place, before `make run` and `make test` (a stale build would not run: engine/wire/compiled.py).
COMPILED := $(shell sed -n '/^COMPILED = \[/,/^\]/p' setup.py | grep -o '"[^"]*\.py"' | tr -d '"')

$(VENV)/.stamp-run: pyproject.toml setup.py $(KERNELS) | $(VPY) lua-headers
	$(PIP) install --upgrade pip
	$(PIP) install -e .
	touch $@ $(VENV)/.stamp-compiled

# The dev install is a superset of the runtime install, so it refreshes both stamps.
# The Spark export's extra (pyspark, pyarrow, numpy): `make export-demo` without the dev tools.
$(VENV)/.stamp-spark: pyproject.toml setup.py $(KERNELS) | $(VPY) lua-headers
	$(PIP) install --upgrade pip
	$(PIP) install -e '.[spark]'
	touch $(VENV)/.stamp-run $(VENV)/.stamp-compiled $@

$(VENV)/.stamp-dev: pyproject.toml setup.py $(KERNELS) | $(VPY) lua-headers
	$(PIP) install --upgrade pip
	$(PIP) install -e '.[dev]'
	touch $(VENV)/.stamp-run $(VENV)/.stamp-spark $(VENV)/.stamp-compiled $@

venv: $(VENV)/.stamp-run $(VENV)/.stamp-compiled

$(VENV)/.stamp-compiled: $(COMPILED) | $(VENV)/.stamp-run
	$(VPY) setup.py -q build_ext --inplace
	touch $@

dev: $(VENV)/.stamp-dev $(VENV)/.stamp-compiled redis-server redis-sentinel redis-exporter iproute2 iptables java \
	disk-tools crcmod-check chromium etcd

# The compiled Lua host (engine/exec/_lua_host_c.pyx) links the system's Lua 5.1, the Lua
# Redis embeds. Without its headers that kernel is left out and scripts run on lupa's Lua
# (an error under STREAMKEEP_REQUIRE_EXTENSIONS, which `make test` sets).
lua-headers:
	@if [ ! -f /usr/include/lua5.1/lua.h ]; then \
		echo "Lua 5.1 headers not found; installing Debian liblua5.1-0-dev"; \
		$(SUDO) apt-get update && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y liblua5.1-0-dev || \
		echo "liblua5.1-0-dev could not be installed: scripts will run on lupa's Lua" >&2; \
	fi

# A Debian package installed when its command is missing: $(call apt_tool,COMMAND,PACKAGES)
define apt_tool
	@if ! command -v $(1) >/dev/null 2>&1; then \
		echo "$(1) not found; installing Debian $(2)"; \
		$(SUDO) apt-get update && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y $(2); \
	fi
	@command -v $(1) >/dev/null 2>&1 || { \
		echo "ERROR: $(1) is still not on PATH after installation" >&2; exit 1; }
endef

# `ss` (iproute2): the tcp-keepalive attack test reads the server's keepalive timer with it.
iproute2:
	$(call apt_tool,ss,iproute2)

# The partition test's faults are firewall rules inside network namespaces (root only).
iptables:
	$(call apt_tool,iptables,iptables)

redis-server:
	$(call apt_tool,redis-server,redis-server redis-tools)

# The exporter test scrapes Debian's Prometheus exporter for Redis against both servers.
redis-exporter:
	$(call apt_tool,prometheus-redis-exporter,prometheus-redis-exporter)

# tests/ha: three real Sentinels fail a streamkeep primary over.
redis-sentinel:
	$(call apt_tool,redis-sentinel,redis-sentinel)

# The cluster controller keeps the cluster's topology in etcd; its tests start a real etcd
# (Debian's etcd-server, etcd 3.4) and etcdctl comes with etcd-client. The package's service is
# not used: the tests start their own etcd in a directory of their own.
etcd:
	$(call apt_tool,etcd,etcd-server etcd-client)

# The disk-full and failing-device tests mount a small tmpfs and ext4 on a loop device.
disk-tools:
	$(call apt_tool,losetup,mount)
	$(call apt_tool,mkfs.ext4,e2fsprogs)

# tests/tools/report: each --html report opened in a real headless browser, Debian's chromium
# driven through its chromedriver (selenium, a dev dependency).
chromium:
	$(call apt_tool,chromium,chromium chromium-driver)
	$(call apt_tool,chromedriver,chromium-driver)

# pyspark (the Spark export and its tests) starts a JVM: Java 17 or later.
java:
	@if ! java -version >/dev/null 2>&1; then \
		echo "java not found; installing Debian openjdk-17-jre-headless"; \
		$(SUDO) apt-get update && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y openjdk-17-jre-headless; \
	fi
	@java -version >/dev/null 2>&1 || { \
		echo "ERROR: java is still not on PATH after installation" >&2; exit 1; }

crcmod-check: $(VENV)/.stamp-dev
	@$(VPY) -c "import crcmod._crcfunext" 2>/dev/null || { \
		echo "ERROR: crcmod's C extension (crcmod._crcfunext) does not import;" >&2; \
		echo "       CRC-32C would fall back to pure Python and be far too slow." >&2; \
		echo "       Install the Python headers (python3-dev) and run:" >&2; \
		echo "       $(PIP) install --force-reinstall --no-binary crcmod crcmod" >&2; \
		exit 1; }

# ---------------------------------------------------------------------- tasks

# The main job: the network server on ./data, port 6390, loopback only (Ctrl-C stops it cleanly).
run: venv
	$(VENV)/bin/streamkeep serve --dir ./data --port 6390

demo: venv
	$(VENV)/bin/streamkeep demo

# A data directory with a few streams and a group, compacted, exported to Parquet by Spark
# (local[2]), then exported incrementally; a few rows read back (./export-demo).
export-demo: $(VENV)/.stamp-spark java
	$(VPY) -m streamkeep.tools.export.demo --dir ./export-demo

# CI runs the bounded suite; `make soak` runs the long fuzz/soak variants too.
# The whole suite, then the differential and property suites again with every stream node,
# list node and run of a hash's or set's buckets cold (read back from a snapshot after every
# command: tests/support/cold_nodes.py).
# Then the same two suites once more on the pure-Python twins of the compiled kernels.
# STREAMKEEP_REQUIRE_EXTENSIONS: a kernel that failed to build fails the build and the tests,
# never hides behind the pure-Python fallback.
# All three runs go on whatever the others found, then the target fails naming the runs that
# failed; Ctrl-C stops them all. The whole suite runs three workers on two cores: its tests
# wait on child processes, JVMs, fsyncs and sockets for about half their time.
# Their temporary files go to a fresh directory on /dev/shm when it is a tmpfs with
# TEST_SHM_GB free (.ci/test-tmpdir says why), removed when the runs end; pytest's own
# (--basetemp) directly in it, so that the Unix sockets the tests bind in theirs have paths
# no longer than under /tmp/pytest-of-<user>/pytest-<n> (a socket's path is 107 bytes at most).
TEST_SHM_GB ?= 8
test: export STREAMKEEP_REQUIRE_EXTENSIONS = 1
test: dev
	@failed=""; interrupted=""; basetemp=""; \
	tmp=$$(.ci/test-tmpdir $$$$ $(TEST_SHM_GB)); \
	if [ -n "$$tmp" ]; then \
		export TMPDIR="$$tmp"; trap 'rm -rf "$$tmp"' EXIT; basetemp="--basetemp=$$tmp/t"; \
		echo "make test: temporary files in $$tmp (a tmpfs)"; \
	fi; \
	trap 'interrupted=1' INT; \
	run() { \
		label="$$1"; shift; echo "make test: $$label: $$*"; \
		"$$@"; code=$$?; \
		if [ -n "$$interrupted" ]; then echo "make test: interrupted" >&2; exit 130; fi; \
		if [ $$code -ne 0 ]; then failed="$$failed$${failed:+; }$$label (pytest exit $$code)"; fi; \
	}; \
	run "the whole suite" $(VPY) -m pytest $$basetemp -n 3 --dist worksteal -q -m "not slow"; \
	run "differential + property, cold nodes" $(VPY) -m pytest $$basetemp \
		-n 2 --dist worksteal -q -m "not slow" --cold-nodes tests/differential tests/property; \
	run "differential + property, pure Python" env STREAMKEEP_NO_EXTENSIONS=1 \
		$(VPY) -m pytest $$basetemp -n 2 --dist worksteal -q -m "not slow" tests/differential tests/property; \
	if [ -n "$$failed" ]; then echo "make test: FAILED: $$failed" >&2; exit 1; fi; \
	echo "make test: all three pytest runs passed"

# Rebuild the compiled core in place after editing a .pyx or a compiled module (an editable
# install tracks Python files only; mypyc's cache in build/ keeps a rebuild incremental).
kernels: $(VENV)/.stamp-dev
	STREAMKEEP_REQUIRE_EXTENSIONS=1 $(VPY) setup.py -q build_ext --inplace
	touch $(VENV)/.stamp-compiled

soak: export STREAMKEEP_REQUIRE_EXTENSIONS = 1
soak: dev
	$(VPY) -m pytest -n 2 -q

# ruff, then mypy over every source file, each under its module name (streamkeep/folders.py
# maps the folders to the streamkeep.* packages): .ci/typecheck.py.
lint: $(VENV)/.stamp-dev
	$(VENV)/bin/ruff check .
	$(VPY) .ci/typecheck.py

# The manual: docs/mkdocs.yml (MkDocs, Material theme), pages in docs/src, built into docs/site.
# --strict: a broken link or anchor, a page missing from the nav or a failing generator (the
# reference's tables come from the code: docs/hooks.py) fails the build.
docs: $(VENV)/.stamp-dev
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --config-file docs/mkdocs.yml

bench: venv
	$(VENV)/bin/streamkeep bench

# The full crash-recovery bench: exhaustive power loss under every policy (2,000 operations
# each), random power loss, SIGKILL of streamkeep and of redis-server side by side, then the
# sorted-set/hash/set/function workload exhaustively and under SIGKILL. CI runs
# a bounded configuration as tests/tools/crashbench/test_cli.py.
crashbench: dev
	$(VENV)/bin/streamkeep crashbench --policy all --ops 2000 --json crashbench-exhaustive.json --force
	$(VENV)/bin/streamkeep crashbench --mode random --policy all --seconds 60
	$(VENV)/bin/streamkeep crashbench --mode sigkill --policy all --points 30
	$(VENV)/bin/streamkeep crashbench --mode sigkill --target redis-server --policy all --points 30
	$(VENV)/bin/streamkeep crashbench --workload types --policy all --ops 2000 --json crashbench-types.json --force
	$(VENV)/bin/streamkeep crashbench --workload types --mode sigkill --policy all --points 30

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis build dist \
		*.egg-info docs/site
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
