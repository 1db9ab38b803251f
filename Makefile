# nfstune build, test and lab targets. `make check` runs every test; `make demo` runs the lab demo.
GO       ?= go
BIN      := bin/nfstune
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X github.com/nfstune/nfstune/internal/version.Version=$(VERSION)

.PHONY: all build test vet check lab-test demo clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/nfstune

vet:
	$(GO) vet ./...

test:
	$(GO) test -count=1 ./...

# check runs every test: unit tests, then the real-kernel lab tests.
check: vet test lab-test

clean:
	rm -rf bin
