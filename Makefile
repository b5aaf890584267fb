# Thin wrapper over CMake: `make run` and `make test` set up a fresh Debian 12 machine and go.
BUILD ?= build
JOBS ?= $(shell nproc)
# Debian packages the build needs: LLVM 19 (NVPTX, linked statically), yaml-cpp,
# Catch2 v2, CLI11 (the CLI's argument parser), the compression libraries llvm-config lists for a
# static LLVM, and clang-14 with libclang-rt-14-dev for the bounded libFuzzer run of the spec
# front end (fuzz/run.sh); pkg-config and python3-venv for the tests that build examples/embed/
# against the installed tree and pip-install python/ (offline) into a virtual environment.
PACKAGES := cmake g++ make llvm-19-dev libyaml-cpp-dev catch2 libcli11-dev zlib1g-dev libzstd-dev clang-14 libclang-rt-14-dev \
            pkg-config python3 python3-venv
# `make install PREFIX=...`: where the library, headers, CLI, CMake package and flashjit.pc go.
PREFIX ?= /usr/local

.PHONY: all deps configure build run test install deb clean

all: build

deps:
	@missing=""; for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" -ne 0 ]; then \
	    echo "flashjit: missing Debian packages:$$missing"; \
	    echo "flashjit: run as root, or: sudo apt-get update && sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	  echo "flashjit: installing$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# The main job on the built-in default spec (bf16, d=128, causal). Exit 69 means "no GPU here:
# compiled only" and is not a failure of `make run`.
run: build
	@$(BUILD)/flashjit run; rc=$$?; \
	if [ $$rc -eq 69 ]; then echo "make run: compiled only (no GPU driver on this machine)"; exit 0; fi; exit $$rc

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

install: build
	@cmake --install $(BUILD) --prefix "$(PREFIX)"

# A Debian package of the same tree under /usr (CPack): `dpkg -i $(BUILD)/flashjit_*.deb` on a GPU node.
deb: build
	@cd $(BUILD) && cpack -G DEB && ls -l flashjit_*.deb

clean:
	rm -rf $(BUILD)
