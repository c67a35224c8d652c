# Two commands do all set-up on a fresh machine: `make run` and `make test`.
SHELL := /bin/bash
GO    ?= go

# The local emulator `make run` uses (started if nothing answers there).
MOTO_PORT ?= 5000
export AWS_ENDPOINT_URL      ?= http://127.0.0.1:$(MOTO_PORT)
export AWS_REGION            ?= us-east-1
export AWS_ACCESS_KEY_ID     ?= test
export AWS_SECRET_ACCESS_KEY ?= test

.PHONY: all build run test lint moto cfn-lint chromium bench capacity docs screenshots console-assets clean schemas

all: build

build:
	$(GO) build -o bin/transit ./cmd/transit

# moto server, installed with pip only when neither form of it is present.
moto:
	@command -v moto_server >/dev/null 2>&1 || python3 -c 'import moto.server' >/dev/null 2>&1 \
		|| pip install 'moto[server]'

# Provision the stack on the local emulator, serve it, and run a short demo.
run: build moto
	@scripts/run.sh

lint:
	@test -z "$$(gofmt -l .)" || { echo "gofmt would change:"; gofmt -l .; exit 1; }
	$(GO) vet ./...

# cfn-lint, which checks the CloudFormation template in the service tests,
# installed with pip only when missing.
cfn-lint:
	@command -v cfn-lint >/dev/null 2>&1 || pip install cfn-lint

# Debian's Chromium, which the console's browser tests drive, installed
# with apt-get only when missing (as root, or with sudo).
chromium:
	@test -x /usr/bin/chromium || { SUDO=$$(test "$$(id -u)" = 0 || echo sudo); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; }

# Unit and integration tests; the integration tests start their own
# emulators on free ports, so nothing needs to be running first: moto (SQS,
# SNS, Lambda, STS, EC2, RDS, ECS) and DynamoDB Local, then again with
# DynamoDB on moto, where
# the harness skips the tests that race transactions, which moto does not
# keep atomic (DECISIONS.md). With TRANSIT_TEST_ENDPOINT (an emulator you
# run: LocalStack, moto) they run once, every service there. The service
# package alone runs for about ten minutes: the timeout leaves it room on
# a busy machine.
test: moto cfn-lint chromium lint
ifdef TRANSIT_TEST_ENDPOINT
	$(GO) test -race -count=1 -timeout 30m ./...
else
	$(GO) test -race -count=1 -timeout 30m ./...
	TRANSIT_TEST_DYNAMODB=moto $(GO) test -race -count=1 -timeout 30m ./service
endif

# The benchmark: micro-benchmarks of the hot path, then transit against a
# plain SDK loop on its own emulators (DynamoDB Local + moto; BENCH_FLAGS=--moto-only
# for moto alone). Report on stdout and in bench/out/. It is a binary of
# its own, bin/transit-bench (cmd/transit-bench), which runs transit's
# serve metered: bin/transit carries no benchmark code.
bench: moto
	$(GO) build -o bin/transit-bench ./cmd/transit-bench
	$(GO) test -run '^$$' -bench . -benchmem ./messages ./router
	bin/transit-bench bench $(BENCH_FLAGS)

# docs/capacity.md, the capacity model, from the last `make bench` report
# (bench/out/report.json): what the measured mix needs at 100 to 10,000
# commands/s, and how its prediction compares with the bench's own run.
capacity:
	$(GO) build -o bin/transit-bench ./cmd/transit-bench
	bin/transit-bench model --report bench/out/report.json --out docs/capacity.md

# The JSON Schema catalogue for producers, regenerated from the Go types
# (messages/schema.go); a test fails while it is out of date.
schemas:
	rm -rf schemas/commands schemas/events schemas/envelope.json
	$(GO) run ./cmd/transit schema --out schemas

# Rewrite the generated table sections of docs/ from store/ after changing
# a table or an item struct; a test fails while they are out of date.
docs:
	$(GO) run ./internal/docgen

# The console's screenshots in docs/console (shown in the README), taken
# by its browser test.
screenshots: moto chromium
	TRANSIT_SCREENSHOTS=1 $(GO) test -count=1 -run 'TestConsole_in_a_browser' ./service

# The console's vendored htmx files (console/static/README.md), fetched
# again from npm at the versions pinned here.
HTMX_VERSION     ?= 2.0.11
HTMX_SSE_VERSION ?= 2.2.4
console-assets:
	tmp=$$(mktemp -d) && cd $$tmp && npm pack --silent htmx.org@$(HTMX_VERSION) htmx-ext-sse@$(HTMX_SSE_VERSION) >/dev/null \
		&& tar xzf htmx.org-$(HTMX_VERSION).tgz && cp package/dist/htmx.min.js $(CURDIR)/console/static/ && rm -rf package \
		&& tar xzf htmx-ext-sse-$(HTMX_SSE_VERSION).tgz && cp package/dist/sse.min.js $(CURDIR)/console/static/ && rm -rf $$tmp

clean:
	rm -rf bin bench/out
