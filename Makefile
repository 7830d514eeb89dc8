# osd build, test and benchmark entry points. Every target runs as root on Debian 12.
SHELL := /bin/bash
GO ?= go
export CGO_ENABLED := 1
export GONOSUMDB := github.com/k3s-io/k3s
export GOTOOLCHAIN := local
export GOFLAGS := -mod=mod -buildvcs=false

TAGS := ctrd netcgo osusergo providerless urfave_cli_no_docs sqlite_omit_load_extension apparmor seccomp no_cri_dockerd
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w \
	-X github.com/k3s-io/k3s/pkg/version.UpstreamGolang=$(shell $(GO) env GOVERSION) \
	-X github.com/osdcloud/osd/daemon/api.Version=$(VERSION)
GOBUILD := $(GO) build -tags "$(TAGS)" -ldflags "$(LDFLAGS)"
GOTEST := $(GO) test -tags "$(TAGS)"

STATE_DIR ?= /var/lib/osd

.PHONY: build test unit integration up bench e2e fuzz clean deps
build:
	$(GOBUILD) -o bin/osd ./cmd/osd

deps:
	./test/deps.sh

# Unit tests first (fast, no root needed), then the integration suites that start the real
# daemon, k3s, OVS and libvirt. OSD_BIN points the integration tests at the built binary.
test: build
	OSD_E2E=1 $(GOTEST) -count=1 -timeout 80m -p 1 ./... 2>&1 | tee test-output.txt; exit $${PIPESTATUS[0]}

unit:
	$(GOTEST) -count=1 -short ./...

up: build
	install -m 0755 bin/osd /usr/local/bin/osd
	/usr/local/bin/osd init --state-dir $(STATE_DIR)

bench: build
	OSD_BENCH=1 OSD_E2E=1 $(GOTEST) -run '^$$' -bench . -benchtime 1x -count 1 -timeout 60m ./... | tee bench-output.txt

# The end-to-end deployment: osd init with every service image, a daemon killed mid-way,
# convergence, Keystone tokens through Debian's openstack client, a no-op re-run.
e2e: build
	OSD_E2E=1 $(GOTEST) -count=1 -timeout 90m -v -run 'TestOpenStackE2E' ./test/ 2>&1 | tee e2e-output.txt; exit $${PIPESTATUS[0]}

FUZZTIME ?= 20s
fuzz:
	$(GOTEST) -run '^$$' -fuzz FuzzDecodeRequest -fuzztime $(FUZZTIME) ./daemon/rest/
	$(GOTEST) -run '^$$' -fuzz FuzzDecodeToken -fuzztime $(FUZZTIME) ./daemon/cluster/
	$(GOTEST) -run '^$$' -fuzz FuzzJoinRequest -fuzztime $(FUZZTIME) ./daemon/cluster/
	$(GOTEST) -run '^$$' -fuzz '^FuzzImportBundle$$' -fuzztime $(FUZZTIME) ./bootstrap/images/
	$(GOTEST) -run '^$$' -fuzz '^FuzzImportBundleEntry$$' -fuzztime $(FUZZTIME) ./bootstrap/images/

clean:
	rm -rf bin test-output.txt bench-output.txt
