# All set-up goes through `make`: a fresh machine needs only Python 3.11, Java 17, Maven and
# make. Versions are locked in uv.lock (Python; pyproject.toml holds the supported ranges)
# and pinned in docker/jars/pom.xml (JVM jars);
# this file only says how to install them.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
UV_VERSION := 0.13.9
MVN    ?= mvn
# The classpaths of docker/jars/pom.xml's two profiles (jars stay in Maven's local cache)
JARS   := .jars
# Data Docs' CSS, scripts and fonts (spark_jobs/lake/data_docs_assets.json, from npm's registry)
WEB    := .web/data-docs

.PHONY: setup demo image cluster-demo test-containers k8s-check k8s-demo check test lint typecheck bench-learn bench-quality clean

# podman's settings for the project's containers (runc, no default ulimits: docker/local)
export CONTAINERS_CONF ?= $(CURDIR)/docker/local/containers.conf

# The quick tier: every test that starts no JVM, Airflow, browser or server (tests are
# marked by the fixtures they use: tests/conftest.py).
QUICK := not (spark or airflow or browser or postgres or s3 or kafka or container or kubernetes)
# pytest-xdist workers: each keeps its own Spark session; files stay whole on one worker so
# module fixtures are built once, queued longest first (tests/scheduling.py, not xdist's
# most-tests-first order, which left the long single-test files to the end).
WORKERS ?= 2

setup: $(VENV)/.installed $(VENV)/.bytecode $(VENV)/.zip-bytecode $(JARS)/.resolved $(WEB)/.resolved $(VENV)/.kernels

# the locked versions (uv.lock), exactly: --frozen never re-resolves, so what runs here is
# what CI and the image run; --inexact keeps uv itself in the environment
$(VENV)/.installed: pyproject.toml uv.lock
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required, found " + sys.version' 
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	UV_PROJECT_ENVIRONMENT=$(VENV) $(BIN)/uv sync --quiet --frozen --inexact --compile-bytecode --extra dev
	@# the checkout's dev tools and benchmarks (devtools/, benchmarks/: in no wheel) on the path
	@$(BIN)/python -c 'import pathlib, sysconfig; pathlib.Path(sysconfig.get_paths()["purelib"], "s3tm_checkout.pth").write_text(str(pathlib.Path.cwd()) + "\n")'
	@touch $@

# The project's own modules compiled to bytecode once (the installed packages are, by uv's
# --compile-bytecode): where PYTHONDONTWRITEBYTECODE is set, as on CI machines, every process
# would otherwise compile each module it imports from source, every time (Airflow's task
# runners, each Spark Python worker: imports took 2-3x as long)
SOURCES := core schemas spark_jobs s3tm dags benchmarks devtools tests
$(VENV)/.bytecode: $(VENV)/.installed $(shell find $(SOURCES) -name '*.py' 2>/dev/null)
	@$(BIN)/python -m compileall -q -j 0 $(SOURCES) >/dev/null || { echo "make setup: compiling the project's modules failed" >&2; exit 1; }
	@touch $@

# ... and pyspark's modules inside the zips Spark puts first on the path of each Python
# worker and spark-submit driver (spark_jobs/runtime/zip_bytecode.py): zipimport compiled them from
# source in every such process
$(VENV)/.zip-bytecode: $(VENV)/.installed spark_jobs/runtime/zip_bytecode.py
	@env -u SPARK_HOME $(BIN)/python -m spark_jobs.runtime.zip_bytecode >/dev/null || { echo "make setup: compiling pyspark's zips failed" >&2; exit 1; }
	@touch $@

# numba compiles a kernel on first use and caches it beside its module: compiled once here,
# not by every process (and every Spark Python worker) that meets it first
$(VENV)/.kernels: $(VENV)/.installed $(wildcard core/*/_*kernels.py) core/warm_kernels.py
	@echo "compiling the numba kernels once (about a minute the first time)"
	@$(BIN)/python -m core.warm_kernels || { echo "make setup: compiling the numba kernels failed: the error is above" >&2; exit 1; }
	@touch $@

# Delta, S3A and the Kafka source for Spark; the KRaft broker of `s3tm kafka` and the tests.
$(JARS)/.resolved: docker/jars/pom.xml
	@command -v $(MVN) >/dev/null 2>&1 || { echo "make setup: Maven (mvn) is needed to resolve the JVM jars of docker/jars/pom.xml; install it (apt-get install maven)" >&2; exit 1; }
	@mkdir -p $(JARS)
	@echo "resolving docker/jars/pom.xml with Maven (first time: about 700 MB into ~/.m2)"
	@$(MVN) --batch-mode --file docker/jars/pom.xml dependency:build-classpath \
	    -Dmdep.outputFile=$(CURDIR)/$(JARS)/spark.classpath > $(JARS)/maven.log 2>&1 \
	  || { tail -40 $(JARS)/maven.log >&2; echo "make setup: Maven could not resolve docker/jars/pom.xml (Spark jars): its error is above" >&2; exit 1; }
	@$(MVN) --batch-mode --file docker/jars/pom.xml --activate-profiles kafka-broker \
	    dependency:build-classpath -Dmdep.outputFile=$(CURDIR)/$(JARS)/kafka-broker.classpath >> $(JARS)/maven.log 2>&1 \
	  || { tail -40 $(JARS)/maven.log >&2; echo "make setup: Maven could not resolve docker/jars/pom.xml (Kafka broker): its error is above" >&2; exit 1; }
	@cp=$$(cat $(JARS)/spark.classpath); \
	  printf '# written by make setup: the jars of docker/jars/pom.xml for spark-submit (Airflow tasks)\nspark.driver.extraClassPath %s\nspark.executor.extraClassPath %s\n' "$$cp" "$$cp" > $(JARS)/spark-defaults.conf
	@touch $@

# The pages of Great Expectations' Data Docs load these from CDNs: served beside them instead
$(WEB)/.resolved: spark_jobs/lake/data_docs_assets.json $(VENV)/.installed
	@$(BIN)/python -m spark_jobs.lake.data_docs resolve $(WEB) >/dev/null \
	  || { echo "make setup: could not resolve the Data Docs assets from the npm registry: the error is above" >&2; exit 1; }
	@touch $@

## README command one: set up and run the demo on generated data.
demo: setup
	$(BIN)/s3tm demo

## The platform image (docker/Dockerfile) with podman, or Docker where podman is absent;
## bases from Debian's packages where no container registry answers (docker/build.sh).
image: setup
	@docker/build.sh

## README command three: docker/compose.yaml in containers of that image (podman or Docker).
cluster-demo: image
	$(BIN)/python docker/cluster_demo.py

## CI, after `make test`: the image's tests, then the cluster demo in containers.
test-containers: image
	@start=$$(date +%s); \
	$(BIN)/python -m pytest -m container tests/deploy && $(BIN)/python docker/cluster_demo.py; \
	code=$$?; echo "make test-containers: exit $$code in $$(( $$(date +%s) - start ))s"; exit $$code

## The platform on a one-node Kubernetes cluster built here (root; infra/k8s/local): the
## Spark operator from its chart, `kubectl apply -k` of the local overlay, the ingest and
## remap DAGs run through Airflow's API (their Spark jobs submitted to the cluster), and the
## matcher's SparkApplication reading the topic on the published version.
k8s-demo: image
	@start=$$(date +%s); \
	$(BIN)/python infra/k8s/local/k8s_demo.py; \
	code=$$?; echo "make k8s-demo: exit $$code in $$(( $$(date +%s) - start ))s"; exit $$code

## The manifests of infra/k8s applied server-side to a kube-apiserver built here (once per
## machine, with its kubectl, from their Go module) on etcd (Debian's etcd-server), with
## the CRDs they use.
k8s-check: setup
	@infra/k8s/local/build-kubernetes.sh >/dev/null
	$(BIN)/python -m pytest -m kubernetes tests/deploy

## Before every commit: lint, types and the quick tier (under 3 minutes on 2 cores).
check: setup
	@start=$$(date +%s); \
	$(BIN)/ruff check core schemas spark_jobs s3tm benchmarks dags tests docker infra/k8s/local && \
	$(BIN)/ruff format --check core schemas spark_jobs s3tm benchmarks dags tests docker infra/k8s/local && \
	$(BIN)/mypy && \
	S3TM_TEST_TIER=check $(BIN)/python -m pytest -q -m "$(QUICK)" -n $(WORKERS) --dist loadfile --no-loadscope-reorder; \
	code=$$?; echo "make check: exit $$code in $$(( $$(date +%s) - start ))s"; exit $$code

## README command two (CI runs this): set up and run every test.
test: setup
	@start=$$(date +%s); \
	$(BIN)/python -m pytest -m "not (container or kubernetes)" -n $(WORKERS) --dist loadfile --no-loadscope-reorder; \
	code=$$?; echo "make test: exit $$code in $$(( $$(date +%s) - start ))s"; exit $$code

lint: setup
	$(BIN)/ruff check core schemas spark_jobs s3tm benchmarks dags tests docker infra/k8s/local
	$(BIN)/ruff format --check core schemas spark_jobs s3tm benchmarks dags tests docker infra/k8s/local

typecheck: setup
	$(BIN)/mypy

bench-learn: setup
	$(BIN)/s3tm bench learn

bench-quality: setup
	$(BIN)/s3tm bench quality

clean:
	rm -rf $(VENV) $(JARS) .pytest_cache .hypothesis build *.egg-info
