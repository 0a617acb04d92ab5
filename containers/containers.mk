# Containers: one lock, a Docker image built from it, an Apptainer SIF built from that image.
# Included by the main Makefile (PY, VENV, PYTHON, RESULTS, TORCH_VERSION, TORCHVISION_VERSION and
# the `setup` target come from there).
#
#   make lock         regenerate containers/requirements.lock + pillow-simd.lock (pip-compile, hashes)
#   make lock-check   the lock still matches pyproject.toml and the Makefile (offline + online re-resolve)
#   make image        docker build -> loaderbench:$(VERSION) and loaderbench:latest
#   make sif          apptainer build loaderbench_$(VERSION).sif from the docker-daemon image
#   make image-test   build the image, run containers/smoke.toml in it, check the record's fingerprint

.PHONY: lock lock-check image image-archive sif image-test

VERSION ?= $(shell sed -n 's/^version *= *"\(.*\)"/\1/p' pyproject.toml | head -n1)
IMAGE_NAME ?= loaderbench
IMAGE ?= $(IMAGE_NAME):$(VERSION)
DOCKER ?= docker
APPTAINER ?= $(shell command -v apptainer 2>/dev/null || command -v singularity 2>/dev/null)
SIF ?= $(IMAGE_NAME)_$(VERSION).sif
IMAGE_TAR ?= $(IMAGE_NAME)_$(VERSION).tar
GIT_COMMIT ?= $(shell c=$$(git rev-parse HEAD 2>/dev/null) || c=unknown; \
	if [ "$$c" != unknown ] && [ -n "$$(git status --porcelain 2>/dev/null)" ]; then c=$$c-dirty; fi; echo $$c)
SOURCE_URL ?= $(or $(shell git config --get remote.origin.url 2>/dev/null),unknown)
# The pinned base is the ARG default in the Dockerfile; override only to test another base.
BASE_IMAGE ?= $(shell sed -n 's/^ARG BASE_IMAGE=//p' containers/Dockerfile)
# When BASE_IMAGE can be neither found locally nor pulled: 0 = fail (default for `make image`),
# 1 = build on a debootstrapped Debian bookworm base (containers/make-local-base.sh) and say so.
# `make image-test` sets 1.
LOCAL_BASE_FALLBACK ?= 0
LOCAL_BASE_IMAGE ?= loaderbench-base:bookworm-local
# A CA bundle for pip inside the build (TLS-intercepting proxies); defaults to the host's $PIP_CERT.
PIP_CA_BUNDLE ?= $(PIP_CERT)
# `make lock` resolves against PyPI only, ignoring find-links/extra indexes of the local pip config.
LOCK_INDEX_URL ?= https://pypi.org/simple
LOCK_UPGRADE ?= 0
SMOKE_RESULTS ?= $(RESULTS)/image-test

CT_LOCK := containers/requirements.lock
CT_SIMD_LOCK := containers/pillow-simd.lock
CT_LOCK_INPUTS := pyproject.toml containers/build-requirements.in containers/torch-pins.txt
PIP_COMPILE = env CUSTOM_COMPILE_COMMAND='make lock' PIP_INDEX_URL='$(LOCK_INDEX_URL)' \
	PIP_EXTRA_INDEX_URL= PIP_FIND_LINKS= PIP_CONSTRAINT= \
	$(VENV)/bin/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras \
	--no-emit-index-url --no-emit-find-links --no-emit-trusted-host \
	$(if $(filter 1,$(LOCK_UPGRADE)),--upgrade)
# pip-compile resolves for the interpreter that runs it: the lock is for the image's CPython 3.11
# on Linux x86_64, so refuse any other.
define ct_lock_python_check
$(PY) -c 'import platform, sys; ok = sys.version_info[:2] == (3, 11) and platform.system() == "Linux" and platform.machine() == "x86_64"; ok or print("the lock is for the image (CPython 3.11, Linux x86_64); $(PY) is Python %s on %s %s: make a 3.11 venv (make setup PYTHON=python3.11) or run make lock in the image" % (platform.python_version(), platform.system(), platform.machine()), file=sys.stderr); sys.exit(0 if ok else 1)'
endef

lock: setup  ## regenerate the container lock files from pyproject.toml (pip-compile --generate-hashes)
	@$(ct_lock_python_check)
	$(PY) containers/lockcheck.py pins $(TORCH_VERSION) $(TORCHVISION_VERSION) > containers/torch-pins.txt
	$(PIP_COMPILE) -c containers/torch-pins.txt -o $(CT_LOCK) pyproject.toml containers/build-requirements.in
	$(PIP_COMPILE) -o $(CT_SIMD_LOCK) containers/pillow-simd.in
	$(PY) containers/lockcheck.py

lock-check: setup  ## fail when the container lock no longer matches pyproject.toml (offline, then online)
	$(PY) containers/lockcheck.py
	@$(ct_lock_python_check)
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	cp $(CT_LOCK) $(CT_SIMD_LOCK) "$$tmp/"; \
	$(PIP_COMPILE) -c containers/torch-pins.txt -o "$$tmp/requirements.lock" pyproject.toml containers/build-requirements.in; \
	$(PIP_COMPILE) -o "$$tmp/pillow-simd.lock" containers/pillow-simd.in; \
	if diff -u $(CT_LOCK) "$$tmp/requirements.lock" && diff -u $(CT_SIMD_LOCK) "$$tmp/pillow-simd.lock"; then \
		echo "lock-check: re-resolving against $(LOCK_INDEX_URL) reproduces the locks"; \
	else echo "lock-check: the locks are stale: run make lock" >&2; exit 1; fi

image: $(CT_LOCK) $(CT_SIMD_LOCK)  ## docker build loaderbench:$(VERSION) and :latest from the lock
	@set -e; command -v $(DOCKER) >/dev/null || { echo "make image: $(DOCKER) is not installed" >&2; exit 1; }; \
	base='$(BASE_IMAGE)'; \
	if $(DOCKER) image inspect "$$base" >/dev/null 2>&1 || $(DOCKER) pull "$$base"; then \
		echo "make image: base $$base"; \
	elif [ "$(LOCAL_BASE_FALLBACK)" = 1 ]; then \
		echo "################################################################################" >&2; \
		echo "# FALLBACK BASE: cannot pull $$base" >&2; \
		echo "# Building on $(LOCAL_BASE_IMAGE) instead: debootstrapped Debian 12 bookworm with" >&2; \
		echo "# Debian's python3 (3.11.2) instead of python.org's CPython 3.11.x of the pinned" >&2; \
		echo "# image. Same lock, same wheels, same pillow-simd/libjpeg-turbo build, but NOT the" >&2; \
		echo "# published image: LOADERBENCH_BASE_IMAGE and the base.name label record this base." >&2; \
		echo "################################################################################" >&2; \
		$(DOCKER) image inspect $(LOCAL_BASE_IMAGE) >/dev/null 2>&1 || containers/make-local-base.sh $(LOCAL_BASE_IMAGE); \
		base=$(LOCAL_BASE_IMAGE); \
	else \
		echo "make image: cannot pull $$base. Pull it, or build on a local Debian base with" >&2; \
		echo "  make image LOCAL_BASE_FALLBACK=1   (debootstraps $(LOCAL_BASE_IMAGE); not the published image)" >&2; \
		exit 1; \
	fi; \
	if ! $(DOCKER) buildx version >/dev/null 2>&1; then export DOCKER_BUILDKIT=0; fi; \
	rm -f containers/ca/pip-ca.crt; trap 'rm -f containers/ca/pip-ca.crt' EXIT; \
	if [ -n "$(PIP_CA_BUNDLE)" ]; then cp "$(PIP_CA_BUNDLE)" containers/ca/pip-ca.crt; fi; \
	start=$$(date +%s); \
	$(DOCKER) build -f containers/Dockerfile \
		--build-arg BASE_IMAGE="$$base" \
		--build-arg VERSION=$(VERSION) \
		--build-arg GIT_COMMIT=$(GIT_COMMIT) \
		--build-arg SOURCE_URL=$(SOURCE_URL) \
		--build-arg LOCK_SHA256=$$(sha256sum $(CT_LOCK) | cut -d' ' -f1) \
		-t $(IMAGE) -t $(IMAGE_NAME):latest . ; \
	echo "make image: built $(IMAGE) ($$($(DOCKER) image inspect --format '{{.Id}}' $(IMAGE))) in $$(( $$(date +%s) - start )) s, $$($(DOCKER) image inspect --format '{{.Size}}' $(IMAGE) | awk '{printf "%.2f GB", $$1/1e9}'), base $$base"

image-archive:  ## docker save the image to $(IMAGE_TAR), for `apptainer build` on a host without docker
	$(DOCKER) image inspect $(IMAGE) >/dev/null 2>&1 || $(MAKE) image
	$(DOCKER) save -o $(IMAGE_TAR) $(IMAGE)

sif:  ## apptainer build $(SIF) from the docker-daemon image (or from $(IMAGE_TAR) if there is no docker)
	@if [ -z "$(APPTAINER)" ]; then \
		echo "make sif: apptainer (or singularity) is not installed. Install it (https://apptainer.org/docs/admin/main/installation.html)," >&2; \
		echo "  or run 'make image-archive' here, copy $(IMAGE_TAR) into this checkout on a host with apptainer" >&2; \
		echo "  and run 'make sif' there (without a docker daemon it bootstraps from the archive)." >&2; \
		exit 1; fi
	@set -e; def=containers/apptainer.def; \
	if command -v $(DOCKER) >/dev/null && $(DOCKER) info >/dev/null 2>&1; then \
		$(DOCKER) image inspect $(IMAGE) >/dev/null 2>&1 || $(MAKE) image; \
	elif [ -f $(IMAGE_TAR) ]; then \
		tmp=$$(mktemp --suffix=.def); trap 'rm -f "$$tmp"' EXIT; \
		sed -e 's|^Bootstrap: docker-daemon|Bootstrap: docker-archive|' -e 's|^From: .*|From: $(abspath $(IMAGE_TAR))|' $$def > $$tmp; \
		def=$$tmp; echo "make sif: no docker daemon; bootstrapping from $(IMAGE_TAR)"; \
	else echo "make sif: no docker daemon and no $(IMAGE_TAR) (make image-archive on a docker host)" >&2; exit 1; fi; \
	grep -q '^From: $(IMAGE)$$' containers/apptainer.def || { echo "make sif: containers/apptainer.def does not bootstrap from $(IMAGE)" >&2; exit 1; }; \
	$(APPTAINER) build --force $(SIF) $$def; \
	$(APPTAINER) test $(SIF)

image-test: LOCAL_BASE_FALLBACK = 1
image-test: image  ## build the image, run containers/smoke.toml inside it (--shm-size=1g), check the fingerprint
	@set -e; rm -rf $(SMOKE_RESULTS); mkdir -p $(SMOKE_RESULTS); chmod a+rwx $(SMOKE_RESULTS); \
	digest=$$($(DOCKER) image inspect --format '{{.Id}}' $(IMAGE)); \
	start=$$(date +%s); \
	$(DOCKER) run --rm --shm-size=1g \
		-e LOADERBENCH_IMAGE_DIGEST=$$digest \
		-v "$(abspath $(SMOKE_RESULTS))":/results \
		$(IMAGE) run /opt/loaderbench/smoke.toml --results /results; \
	echo "image-test: study ran in $$(( $$(date +%s) - start )) s"; \
	$(PYTHON) containers/check_record.py $(SMOKE_RESULTS)/container-smoke \
		--image $(IMAGE) --digest $$digest --lock-sha256 $$(sha256sum $(CT_LOCK) | cut -d' ' -f1)
