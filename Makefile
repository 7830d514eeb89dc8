# osd build, test and benchmark entry points. Every target runs as root on Debian 12.
SHELL := /bin/bash
GO ?= go
export CGO_ENABLED := 1
export GONOSUMDB := github.com/k3s-io/k3s
export GOTOOLCHAIN := local
export GOFLAGS := -mod=mod -buildvcs=false

TAGS := ctrd netcgo osusergo providerless urfave_cli_no_docs sqlite_omit_load_extension apparmor seccomp no_cri_dockerd
# osd's version: the tag vX.Y.Z, or vX.Y.Z-N-gHASH N commits after it (v0.0.0-N-gHASH before
# the first tag), -dirty with uncommitted changes. It only grows along the history, so a
# package built from a later commit upgrades one built from an earlier one.
VERSION ?= $(shell git describe --tags --dirty --match 'v[0-9]*' 2>/dev/null || \
	{ n=$$(git rev-list --count HEAD) && h=$$(git rev-parse --short=7 HEAD) && \
	  echo "v0.0.0-$$n-g$$h$$(git diff --quiet HEAD -- 2>/dev/null || echo -dirty)"; } 2>/dev/null || echo v0.0.0-dev)
# The same in Debian's syntax (and the snap's): 0.0.0+N.gHASH, no revision (native).
PKG_VERSION := $(shell echo '$(VERSION)' | sed -e 's/^v//' -e 's/-\([0-9]*\)-g/+\1.g/' -e 's/-dirty$$/.dirty/' -e 's/-dev$$/+dev/')
PKG_MAINTAINER ?= $(shell git log --reverse --format='%an <%ae>' 2>/dev/null | head -1)
export SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || date +%s)
DIST := dist
LDFLAGS_BASE := -s -w -X github.com/k3s-io/k3s/pkg/version.UpstreamGolang=$(shell $(GO) env GOVERSION)
LDFLAGS := $(LDFLAGS_BASE) -X github.com/osdcloud/osd/daemon/api.Version=$(VERSION)
# The version of bin/osd-next (make next): the same source, linked again as a later version.
NEXT_VERSION := $(VERSION).next
GOBUILD := $(GO) build -tags "$(TAGS)" -ldflags "$(LDFLAGS)"
GOTEST := $(GO) test -tags "$(TAGS)"

STATE_DIR ?= /var/lib/osd

.PHONY: build test test-epoxy unit integration up bench e2e upgrade-e2e fuzz clean deps deb snap packages next print-pkg-version cluster-e2e storage-e2e
build:
	$(GOBUILD) -o bin/osd ./cmd/osd

deps:
	./test/deps.sh

# Packages (dist/): the .deb, built with dpkg-dev and checked by the tests with lintian, and
# the snap, a squashfs made with squashfs-tools (checked with snap pack where snapd is).
deb: build
	snap/deb/build.sh '$(PKG_VERSION)' bin/osd $(DIST) '$(PKG_MAINTAINER)'

snap: build
	snap/local/build.sh '$(PKG_VERSION)' bin/osd $(DIST)

packages: deb snap

# bin/osd-next: bin/osd linked again as version NEXT_VERSION (only the link step runs again).
# make test's "package upgrade" group restarts the shared cloud on it through the .deb's
# postinst, as installing a newer package does.
next: build
	$(GO) build -tags "$(TAGS)" -ldflags "$(LDFLAGS_BASE) -X github.com/osdcloud/osd/daemon/api.Version=$(NEXT_VERSION)" -o bin/osd-next ./cmd/osd

print-pkg-version:
	@echo '$(PKG_VERSION)'

# Unit tests first (fast, no root needed), then the integration suites that start the real
# daemon, k3s, OVS and libvirt. OSD_BIN points the integration tests at the built binary.
# The package tests install the .deb in a clean Debian root and inspect the snap, and the
# upgrade checks run its postinst with bin/osd-next: make test builds them first and names
# them (OSD_DEB, OSD_SNAP, OSD_NEXT_BIN). test/failures.sh repeats what failed at the end.
test: build packages next
	OSD_E2E=1 OSD_DEB=$(CURDIR)/$(DIST)/osd_$(PKG_VERSION)_amd64.deb OSD_SNAP=$(CURDIR)/$(DIST)/osd_$(PKG_VERSION)_amd64.snap \
		OSD_NEXT_BIN=$(CURDIR)/bin/osd-next \
		$(GOTEST) -count=1 -timeout 80m -p 1 ./... 2>&1 | tee test-output.txt; \
		rc=$${PIPESTATUS[0]}; test/failures.sh test-output.txt; exit $$rc

# The end-to-end suites on 2025.1 Epoxy (Debian 13's packages) instead of the default
# release: every cloud they deploy is asked for it (osd init --release), and the image and
# chart tests build and run that release's images.
test-epoxy: build packages next
	OSD_TEST_RELEASE=epoxy OSD_E2E=1 OSD_DEB=$(CURDIR)/$(DIST)/osd_$(PKG_VERSION)_amd64.deb OSD_SNAP=$(CURDIR)/$(DIST)/osd_$(PKG_VERSION)_amd64.snap \
		OSD_NEXT_BIN=$(CURDIR)/bin/osd-next \
		$(GOTEST) -count=1 -timeout 80m -p 1 ./test/ 2>&1 | tee test-epoxy-output.txt; \
		rc=$${PIPESTATUS[0]}; test/failures.sh test-epoxy-output.txt; exit $$rc

unit:
	$(GOTEST) -count=1 -short ./...

up: build
	install -m 0755 bin/osd /usr/local/bin/osd
	/usr/local/bin/osd init --state-dir $(STATE_DIR)

bench: build
	OSD_BENCH=1 OSD_E2E=1 $(GOTEST) -run '^$$' -bench . -benchtime 1x -count 1 -timeout 60m ./... | tee bench-output.txt

# The end-to-end deployment: osd init with every service image, a daemon killed mid-way,
# convergence, Keystone tokens through Debian's openstack client, a no-op re-run.
# Its last group upgrades the cloud with the .deb's postinst and bin/osd-next.
e2e: build deb next
	OSD_E2E=1 OSD_DEB=$(CURDIR)/$(DIST)/osd_$(PKG_VERSION)_amd64.deb OSD_NEXT_BIN=$(CURDIR)/bin/osd-next \
		$(GOTEST) -count=1 -timeout 90m -v -run 'TestOpenStackE2E' ./test/ 2>&1 | tee e2e-output.txt; \
		rc=$${PIPESTATUS[0]}; test/failures.sh e2e-output.txt; exit $$rc

# The upgrade from the previous release's package (TestPackageUpgrade): the .deb built from
# OSD_UPGRADE_FROM (default HEAD~1) in a git worktree is installed on this host and brings a
# cloud up in /var/lib/osd (a deployment of its own: 30 to 60 minutes, so not in make test),
# then the current .deb is installed over it. The host must have no osd package and no
# /var/lib/osd; the test ends with osd reset and dpkg --purge osd.
upgrade-e2e: deb
	OSD_E2E=1 OSD_UPGRADE_E2E=1 OSD_DEB=$(CURDIR)/$(DIST)/osd_$(PKG_VERSION)_amd64.deb \
		$(GOTEST) -count=1 -timeout 150m -v -run '^TestPackageUpgrade$$' ./test/ 2>&1 | tee upgrade-e2e-output.txt; exit $${PIPESTATUS[0]}

# The block storage groups alone (make test runs them too, with the other groups), then the
# audit that nothing is left behind.
storage-e2e: build
	set -o pipefail; OSD_E2E=1 $(GOTEST) -count=1 -timeout 90m -v -run 'TestOpenStackE2E/(block_storage|block_storage_restarts|nothing_left_behind)$$' ./test/ 2>&1 | tee storage-e2e-output.txt

# The compute node test alone: the end-to-end cloud is node 1, a second node in namespaces of
# its own joins with the compute role, runs servers that talk to node 1's over Geneve, goes
# into maintenance, is removed and joins again; then the audit that nothing is left behind.
# make test runs it too, with the other groups. It prints its figures at the end.
cluster-e2e: build
	set -o pipefail; OSD_E2E=1 $(GOTEST) -count=1 -timeout 90m -v -run 'TestOpenStackE2E/(compute-node|nothing_left_behind)' ./test/ 2>&1 | tee cluster-e2e-output.txt; \
		rc=$$?; echo "--- figures"; grep -h 'figure: ' cluster-e2e-output.txt || true; exit $$rc

FUZZTIME ?= 20s
fuzz:
	$(GOTEST) -run '^$$' -fuzz FuzzDecodeRequest -fuzztime $(FUZZTIME) ./daemon/rest/
	$(GOTEST) -run '^$$' -fuzz FuzzDecodeToken -fuzztime $(FUZZTIME) ./daemon/cluster/
	$(GOTEST) -run '^$$' -fuzz FuzzJoinRequest -fuzztime $(FUZZTIME) ./daemon/cluster/
	$(GOTEST) -run '^$$' -fuzz '^FuzzImportBundle$$' -fuzztime $(FUZZTIME) ./bootstrap/images/bundle/
	$(GOTEST) -run '^$$' -fuzz '^FuzzImportBundleEntry$$' -fuzztime $(FUZZTIME) ./bootstrap/images/bundle/

clean:
	rm -rf bin $(DIST) test-output.txt bench-output.txt e2e-output.txt upgrade-e2e-output.txt cluster-e2e-output.txt
