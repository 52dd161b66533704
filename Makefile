# srt-mcp: the two commands of the README are `make run` and `make test`.
# Both work on a fresh Debian 12 machine as root; they install what they need.

SHELL   := /bin/bash
GO      ?= go
BIN     ?= bin/srt-mcp
TAGS    := urfave_cli_no_docs
export CGO_ENABLED := 0
GOFLAGS_BUILD := -tags $(TAGS) -trimpath -ldflags "-s -w"

APT_RUN  := bubblewrap python3 python3-pandas python3-numpy python3-matplotlib python3-seaborn \
            python3-reportlab python3-openpyxl python3-scipy
APT_TEST := $(APT_RUN) util-linux procps git curl ca-certificates

.PHONY: run test build deps deps-test check unit integration bench clean

build:
	$(GO) build $(GOFLAGS_BUILD) -o $(BIN) ./cmd/srt-mcp

# Install the system packages the sandbox and the Python data profile use.
deps:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		missing=""; for p in $(APT_RUN); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
		if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi; \
	else echo "not root or no apt-get: install $(APT_RUN) yourself"; fi

deps-test:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		missing=""; for p in $(APT_TEST); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
		if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi; \
	else echo "not root or no apt-get: install $(APT_TEST) yourself"; fi

# Set up and run: check the host, then run a command in the sandbox.
run: deps build
	./$(BIN) doctor
	./$(BIN) exec -- /usr/bin/python3 -c 'import platform; print("hello from the sandbox, python", platform.python_version())'

# Set up and run every test: static checks, unit tests, and the black-box
# integration suite against the built binary, as root and as nobody.
test: deps-test check unit integration

check:
	@test -z "$$(gofmt -l .)" || (echo "gofmt needed:"; gofmt -l .; exit 1)
	$(GO) vet -tags $(TAGS) ./...
	GOOS=darwin $(GO) build -tags $(TAGS) ./...
	GOOS=darwin $(GO) vet -tags $(TAGS) ./...

unit:
	$(GO) test -tags $(TAGS) -count=1 ./policy/... ./runner/... ./profiles/... ./cmd/...

# The integration suite is compiled once and run twice: as root, and as the
# unprivileged user nobody (setpriv), against the same built binary.
ITEST_DIR ?= /tmp/srt-mcp-itest
integration:
	rm -rf $(ITEST_DIR) && mkdir -p $(ITEST_DIR)/tmp-root $(ITEST_DIR)/tmp-nobody
	$(GO) build $(GOFLAGS_BUILD) -o $(ITEST_DIR)/srt-mcp ./cmd/srt-mcp
	$(GO) test -tags $(TAGS) -c -o $(ITEST_DIR)/integration.test ./integration
	chmod 755 $(ITEST_DIR) $(ITEST_DIR)/srt-mcp $(ITEST_DIR)/integration.test
	chown 65534:65534 $(ITEST_DIR)/tmp-nobody 2>/dev/null || true
	cd $(ITEST_DIR) && SRT_MCP_BIN=$(ITEST_DIR)/srt-mcp TMPDIR=$(ITEST_DIR)/tmp-root \
		./integration.test -test.count=1 -test.timeout=15m -test.v $(ITEST_ARGS) 2>&1 | tee $(ITEST_DIR)/root.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)' ; test $${PIPESTATUS[0]} -eq 0
	@if [ "$$(id -u)" = 0 ]; then \
		cd $(ITEST_DIR) && setpriv --reuid=65534 --regid=65534 --clear-groups env -i PATH=/usr/bin:/bin \
			HOME=$(ITEST_DIR)/tmp-nobody TMPDIR=$(ITEST_DIR)/tmp-nobody SRT_MCP_BIN=$(ITEST_DIR)/srt-mcp \
			./integration.test -test.count=1 -test.timeout=15m -test.v $(ITEST_ARGS) 2>&1 | tee $(ITEST_DIR)/nobody.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)' ; test $${PIPESTATUS[0]} -eq 0; \
	else echo "not root: the unprivileged run is the one above"; fi

bench: build
	./$(BIN) bench

clean:
	rm -rf bin $(ITEST_DIR)
