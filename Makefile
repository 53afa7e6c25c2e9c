# Engram — see README.md.
GO ?= go
PKGS := ./...

.PHONY: build run test test-ollama bench lint fuzz redis ollama

build:
	$(GO) build -o bin/ ./cmd/...

run:
	$(GO) run ./cmd/engram serve

# test starts what the tests need (Redis 8 standalone + cluster, the pinned
# Ollama server) and runs the whole suite.
test:
	bash scripts/test.sh

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
