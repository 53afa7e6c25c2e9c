# Engram — see README.md.
GO ?= go
PKGS := ./...

.PHONY: build run test test-ollama chaos chaos-full bench lint fuzz redis ollama

# build stamps the commit (engram version, the MCP serverInfo) also where
# the go command cannot (a git worktree; GOFLAGS=-buildvcs=false).
ENGRAM_COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
build:
	$(GO) build -ldflags "-X github.com/engram-memory/engram/internal/buildinfo.stampedCommit=$(ENGRAM_COMMIT)" -o bin/ ./cmd/...

run:
	$(GO) run ./cmd/engram serve

# test starts what the tests need (Redis 8 standalone + cluster, the pinned
# Ollama server) and runs the whole suite.
test:
	bash scripts/test.sh

# chaos runs the multi-process chaos suite at the CI size (scripts/chaos.sh);
# chaos-full runs the 10,000-turn replay with a 10-minute model outage.
chaos:
	bash scripts/chaos.sh

chaos-full:
	CHAOS_FULL=1 bash scripts/chaos.sh

# test-ollama builds the pinned Ollama when missing and runs the real-Ollama suite.
test-ollama:
	bash scripts/ollama.sh test -v

bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x $(PKGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	@# staticcheck when the module proxy serves it (it refused 2025.1.1 here); its absence does not fail lint.
	-$(GO) run honnef.co/go/tools/cmd/staticcheck@2025.1.1 $(PKGS)

fuzz:
	bash scripts/fuzz.sh

redis:
	bash scripts/redis8.sh start

ollama:
	bash scripts/ollama.sh build
