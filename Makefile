# srt-mcp: the two commands of the README are `make run` and `make test`.
# Both work on a fresh Debian 12 machine as root; they install what they need.

SHELL   := /bin/bash
GO      ?= go
BIN     ?= bin/srt-mcp
TAGS    := urfave_cli_no_docs
export CGO_ENABLED := 0
LDFLAGS       := -trimpath -ldflags "-s -w"
GOFLAGS_BUILD := -tags $(TAGS) $(LDFLAGS)

# The languages execute_code runs (profiles/runtimes/runtimes.json): those
# LibreChat names (py js ts c cpp java php rs go d f90 r bash).
APT_LANGS := nodejs node-typescript gcc g++ libc6-dev golang-go default-jdk-headless rustc php-cli \
            r-base-core gfortran gdc
APT_RUN  := bubblewrap python3 python3-pandas python3-numpy python3-matplotlib python3-seaborn \
            python3-reportlab python3-openpyxl python3-scipy python3-pip $(APT_LANGS)
APT_TEST := $(APT_RUN) python3-pip python3-requests util-linux procps git curl ca-certificates chromium haproxy

.PHONY: server-image run test build deps deps-test clients peers check unit integration bench clean docker-up docker-down image assets

# The release binary is light (CLI, runner, in-sandbox stage) and embeds
# the full build for srt-mcp serve (cmd/srt-mcp/serve_embedded.go) and the
# small stage binary its servers' sandboxes run (cmd/srt-mcp-stage).
build: assets
	$(GO) build $(GOFLAGS_BUILD) -o cmd/srt-mcp/embedded/srt-mcp-stage ./cmd/srt-mcp-stage
	$(GO) build $(GOFLAGS_BUILD) -o cmd/srt-mcp/embedded/srt-mcp-full ./cmd/srt-mcp
	$(GO) build -tags "$(TAGS) embedserver" $(LDFLAGS) -o $(BIN) ./cmd/srt-mcp

# The playground's code editor (CodeMirror 5 from npm), copied where the
# binary embeds it (playground/static/vendor; not committed).
CM := playground/npm/node_modules/codemirror
CM_MODES := addon/mode/simple.js mode/xml/xml.js mode/javascript/javascript.js mode/css/css.js mode/htmlmixed/htmlmixed.js \
            mode/clike/clike.js mode/php/php.js mode/python/python.js mode/go/go.js mode/rust/rust.js mode/r/r.js \
            mode/fortran/fortran.js mode/d/d.js mode/shell/shell.js
assets: playground/static/vendor/codemirror.js
playground/static/vendor/codemirror.js: playground/npm/package-lock.json
	@command -v npm >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm)
	cd playground/npm && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	cp $(CM)/lib/codemirror.css playground/static/vendor/
	cat $(addprefix $(CM)/,$(CM_MODES)) > playground/static/vendor/modes.js
	cp $(CM)/lib/codemirror.js playground/static/vendor/

# Install the system packages the sandbox and the Python data profile use.
deps:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		missing=""; for p in $(APT_RUN); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
		if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi; \
	else echo "not root or no apt-get: install $(APT_RUN) yourself"; fi

deps-test: clients
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		missing=""; for p in $(APT_TEST); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
		if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi; \
	else echo "not root or no apt-get: install $(APT_TEST) yourself"; fi

# The unmodified third-party MCP clients the integration suite drives.
clients:
	@command -v npm >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm)
	cd integration/mcpclient && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	cd integration/mcpclient/langchain && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error

# The peers bench --costs weighs srt-mcp against, and its tokenizer: only
# the bench needs them (Pyodide is large), so make test does not fetch them.
peers:
	@command -v npm >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm)
	cd bench/peers && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error

# Set up and run: check the host, then serve MCP (and the playground, the
# LibreChat API, health and metrics) on http://127.0.0.1:8080 with the
# embedded defaults, until Ctrl-C.
run: deps build
	./$(BIN) doctor
	./$(BIN) serve

# Set up and run every test: static checks, unit tests, and the black-box
# integration suite against the built binary, as root and as nobody; as
# root also on the Docker backend (a dockerd started here and stopped by
# its PID afterwards, and the registry-free image, kept between runs).
# Docker Compose v2 (for deploy/compose.yaml) builds from source in the
# background meanwhile, and must have succeeded before the suite starts.
COMPOSE_LOG := /tmp/srt-mcp-compose-plugin.log
test:
	@( ./scripts/compose-plugin.sh > $(COMPOSE_LOG) 2>&1; echo "rc=$$?" >> $(COMPOSE_LOG) ) & \
	$(MAKE) --no-print-directory deps-test check unit; rc=$$?; wait; \
	if [ $$rc -ne 0 ]; then exit $$rc; fi; \
	cat $(COMPOSE_LOG); grep -qx 'rc=0' $(COMPOSE_LOG) || exit 1; \
	set -o pipefail; ./scripts/dockerd.sh start && $(MAKE) --no-print-directory image && \
		$(MAKE) --no-print-directory integration ITEST_ENV="$$( [ "$$(id -u)" = 0 ] && echo SRT_MCP_DOCKER=1 )"; \
		rc=$$?; ./scripts/dockerd.sh stop; exit $$rc

# The server image (deploy/Dockerfile), registry-free: FROM the data image
# below, with bubblewrap from the Debian mirror; see the Dockerfile for how
# to run it.
server-image: image
	docker build -f deploy/Dockerfile --build-arg BASE=srt-mcp-python:latest -t srt-mcp:latest $(dir $(BIN))

# The Docker backend's Python data image, from Debian's packages (root;
# skipped when the image's recipe is unchanged).
image: build
	@if [ "$$(id -u)" = 0 ] && docker info >/dev/null 2>&1; then ./$(BIN) image build; \
	else echo "image: needs root and a running Docker engine (scripts/dockerd.sh start)"; fi

docker-up:
	./scripts/dockerd.sh start
docker-down:
	./scripts/dockerd.sh stop

# Static checks of both builds: the full one (TAGS) and the light release
# binary (LIGHT_TAGS), on Linux and for macOS. The light build embeds the
# binaries make build puts in cmd/srt-mcp/embedded; check does not build
# them: an overlay (go's -overlay, passed in GOFLAGS so that staticcheck's
# go list sees it too) stands an empty file in for each, in a temporary
# directory, and leaves the tree and any real build's files as they are.
LIGHT_TAGS   := $(TAGS) embedserver
EMBEDDED_DIR := $(CURDIR)/cmd/srt-mcp/embedded
STATICCHECK  := $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
check:
	@test -z "$$(gofmt -l .)" || (echo "gofmt needed:"; gofmt -l .; exit 1)
	$(GO) vet -tags $(TAGS) ./...
	GOOS=darwin $(GO) build -tags $(TAGS) ./...
	GOOS=darwin $(GO) vet -tags $(TAGS) ./...
	$(STATICCHECK) -tags $(TAGS) ./...
	@set -e; ov=$$(mktemp -d); trap 'rm -rf "$$ov"' EXIT; : > "$$ov/empty"; \
	printf '{"Replace":{"%s/srt-mcp-full":"%s/empty","%s/srt-mcp-stage":"%s/empty"}}\n' \
		"$(EMBEDDED_DIR)" "$$ov" "$(EMBEDDED_DIR)" "$$ov" > "$$ov/overlay.json"; \
	export GOFLAGS="$$GOFLAGS -overlay=$$ov/overlay.json"; set -x; \
	$(GO) vet -tags "$(LIGHT_TAGS)" ./...; \
	GOOS=darwin $(GO) build -tags "$(LIGHT_TAGS)" ./...; \
	GOOS=darwin $(GO) vet -tags "$(LIGHT_TAGS)" ./...; \
	$(STATICCHECK) -tags "$(LIGHT_TAGS)" ./...

# Every package but the sandbox suites (runner, integration: see below).
unit:
	$(GO) test -tags $(TAGS) -count=1 $$($(GO) list ./... | grep -v -e /runner$$ -e /integration$$)
	$(GO) test -tags $(TAGS) -count=1 -run 'Golden|Posture|Seccomp|Plan|Sweep|Unsafe|EventJSON|Seatbelt' ./runner/

# The sandbox suites (the runner package and the black-box integration
# suite against the built binary) are compiled once and run twice: as root,
# and as the unprivileged user nobody (setpriv), from a directory both can
# read. Each run's full log is kept next to the binaries.
ITEST_DIR ?= /tmp/srt-mcp-itest
SUITES    := runner integration
integration:
	rm -rf $(ITEST_DIR) && mkdir -p $(ITEST_DIR)/home-root $(ITEST_DIR)/home-nobody $(ITEST_DIR)/artifacts
	chmod 1777 $(ITEST_DIR)/artifacts
	$(MAKE) --no-print-directory build BIN=$(ITEST_DIR)/srt-mcp
	for s in $(SUITES); do $(GO) test -tags $(TAGS) -c -o $(ITEST_DIR)/$$s.test ./$$s || exit 1; done
	cp -r integration/mcpclient $(ITEST_DIR)/mcpclient
	cp -r examples/marketing-report $(ITEST_DIR)/mcpclient/example
	cp -r deploy $(ITEST_DIR)/deploy
	chmod -R a+rX $(ITEST_DIR)/mcpclient $(ITEST_DIR)/deploy
	chmod 755 $(ITEST_DIR) $(ITEST_DIR)/*.test $(ITEST_DIR)/srt-mcp
	chown 65534:65534 $(ITEST_DIR)/home-nobody 2>/dev/null || true
	@set -o pipefail; for s in $(SUITES); do \
		echo "== $$s as $$(id -un)"; \
		( cd $(ITEST_DIR) && env $(ITEST_ENV) SRT_MCP_ARTIFACTS=$(ITEST_DIR)/artifacts SRT_MCP_BIN=$(ITEST_DIR)/srt-mcp SRT_MCP_CLIENTS=$(ITEST_DIR)/mcpclient SRT_MCP_REQUIRE_CLIENTS=1 \
			HOME=$(ITEST_DIR)/home-root TMPDIR=$(ITEST_DIR)/home-root \
			./$$s.test -test.count=1 -test.timeout=20m -test.parallel=4 -test.v -test.skip '^TestGolden' $(ITEST_ARGS) ) > $(ITEST_DIR)/$$s-root.log 2>&1; rc=$$?; \
		grep -E '^(--- |FAIL|ok|PASS|panic)' $(ITEST_DIR)/$$s-root.log | grep -v '^--- PASS' ; \
		if [ $$rc -ne 0 ]; then tail -50 $(ITEST_DIR)/$$s-root.log; awk -f scripts/failures.awk $(ITEST_DIR)/$$s-root.log; exit $$rc; fi; \
		if [ "$$(id -u)" = 0 ]; then \
			echo "== $$s as nobody"; \
			( cd $(ITEST_DIR) && setpriv --reuid=65534 --regid=65534 --clear-groups env -i PATH=/usr/local/bin:/usr/bin:/bin \
				HOME=$(ITEST_DIR)/home-nobody TMPDIR=$(ITEST_DIR)/home-nobody SRT_MCP_BIN=$(ITEST_DIR)/srt-mcp SRT_MCP_ARTIFACTS=$(ITEST_DIR)/artifacts \
				SRT_MCP_CLIENTS=$(ITEST_DIR)/mcpclient SRT_MCP_REQUIRE_CLIENTS=1 \
				./$$s.test -test.count=1 -test.timeout=20m -test.parallel=4 -test.v -test.skip '^TestGolden' $(ITEST_ARGS) ) > $(ITEST_DIR)/$$s-nobody.log 2>&1; rc=$$?; \
			grep -E '^(--- |FAIL|ok|PASS|panic)' $(ITEST_DIR)/$$s-nobody.log | grep -v '^--- PASS' ; \
			if [ $$rc -ne 0 ]; then tail -50 $(ITEST_DIR)/$$s-nobody.log; awk -f scripts/failures.awk $(ITEST_DIR)/$$s-nobody.log; exit $$rc; fi; \
		fi; \
	done

# Every row of the speed goals against its anchor, in one run, then one
# table (as root; as nobody: setpriv --reuid=65534 ... bin/srt-mcp bench).
bench: build clients peers
	SRT_MCP_CLIENTS=$(CURDIR)/integration/mcpclient ./$(BIN) bench --all

clean:
	rm -rf bin $(ITEST_DIR)
