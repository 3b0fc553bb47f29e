# hcomm top level.
#   make            libhcomm, libpypto, the Python extension, selftests, hcomm.ko for
#                   every kernel with headers
#                   in /lib/modules/*/build (output in build/kmod/<version>/)
#   make check      everything, host tests, and the VM tests (scripts/check.sh)
#   make demo       boot a stock 6.12 VM and run hcomm_demo and the data-path
#                   benchmark (scripts/demo.sh)
#   make lint       scripts/lint.sh
#   make install    install libhcomm, libpypto, the Python packages and the
#                   man pages (PREFIX, DESTDIR as in
#                   lib/Makefile)
#   make modules_install [KVER=...]  on a node: hcomm.ko for KVER (default
#                   the running kernel) into /lib/modules/KVER/updates,
#                   depmod, the udev rule (dist/60-hcomm.rules)
#   make dkms_install  the module's sources as /usr/src/hcomm-1.0 for dkms
#   make uninstall, make modules_uninstall  take back what those installed
#   make clean
# `make` never needs the debug kernel; `make check` builds it (cached).

BUILD := $(CURDIR)/build
# Kernel versions whose headers are installed (sorted, newest last).
KVERS ?= $(shell for d in /lib/modules/*/build; do \
	[ -d "$$d" ] && basename "$$(dirname "$$d")"; done | sort -V)

.PHONY: all lib pypto python selftests bench libvm man modules check demo fuzz lint install \
	uninstall modules_install modules_uninstall dkms_install clean

all: lib pypto python selftests bench libvm modules

lib:
	$(MAKE) -C lib

pypto: lib
	$(MAKE) -C pypto

python: pypto
	$(MAKE) -C python

selftests: lib
	$(MAKE) -C selftests

bench: lib pypto
	$(MAKE) -C bench

libvm: lib
	$(MAKE) -C lib/tests/vm

modules:
	@[ -n "$(KVERS)" ] || { echo "no kernel headers in /lib/modules/*/build" >&2; exit 1; }
	@set -e; for v in $(KVERS); do \
		echo "== hcomm.ko for $$v"; \
		mkdir -p $(BUILD)/kmod/$$v; \
		$(MAKE) -C kernel KDIR=/lib/modules/$$v/build O=$(BUILD)/kmod/$$v; \
	done

check:
	scripts/check.sh

demo:
	scripts/demo.sh

# The uapi fuzzer with a long budget on the debug kernel (FUZZ_OPS,
# FUZZ_SEED, FUZZ_THREADS; Documentation/reliability.rst).
fuzz:
	scripts/fuzz.sh

lint:
	scripts/lint.sh

PREFIX ?= /usr/local
DESTDIR ?=
KVER ?= $(shell uname -r)
DKMS_VERSION := 1.0

install:
	$(MAKE) -C lib install
	$(MAKE) -C pypto install
	$(MAKE) -C python install
	$(MAKE) -C man install
	install -D -m 644 dist/hcomm.modprobe.conf \
		$(DESTDIR)$(PREFIX)/share/doc/hcomm/examples/modprobe.d-hcomm.conf
	install -D -m 644 dist/60-hcomm.rules \
		$(DESTDIR)$(PREFIX)/share/doc/hcomm/examples/60-hcomm.rules

uninstall:
	$(MAKE) -C lib uninstall
	$(MAKE) -C pypto uninstall
	$(MAKE) -C python uninstall
	$(MAKE) -C man uninstall
	rm -f $(DESTDIR)$(PREFIX)/share/doc/hcomm/examples/modprobe.d-hcomm.conf \
		$(DESTDIR)$(PREFIX)/share/doc/hcomm/examples/60-hcomm.rules
	-rmdir $(DESTDIR)$(PREFIX)/share/doc/hcomm/examples \
		$(DESTDIR)$(PREFIX)/share/doc/hcomm 2>/dev/null

modules_uninstall:
	$(MAKE) -C kernel uninstall KVER=$(KVER)
	rm -f $(DESTDIR)/lib/udev/rules.d/60-hcomm.rules

modules_install:
	$(MAKE) -C kernel KDIR=/lib/modules/$(KVER)/build O=$(BUILD)/kmod/$(KVER)
	$(MAKE) -C kernel install KVER=$(KVER) O=$(BUILD)/kmod/$(KVER)
	install -D -m 644 dist/60-hcomm.rules $(DESTDIR)/lib/udev/rules.d/60-hcomm.rules

dkms_install:
	rm -rf $(DESTDIR)/usr/src/hcomm-$(DKMS_VERSION)
	install -d $(DESTDIR)/usr/src/hcomm-$(DKMS_VERSION)/kernel/tests \
		$(DESTDIR)/usr/src/hcomm-$(DKMS_VERSION)/uapi/linux
	install -m 644 dkms.conf $(DESTDIR)/usr/src/hcomm-$(DKMS_VERSION)/
	install -m 644 kernel/Makefile kernel/Kbuild kernel/*.c kernel/*.h \
		$(DESTDIR)/usr/src/hcomm-$(DKMS_VERSION)/kernel/
	install -m 644 kernel/tests/*.c $(DESTDIR)/usr/src/hcomm-$(DKMS_VERSION)/kernel/tests/
	install -m 644 uapi/linux/hcomm.h $(DESTDIR)/usr/src/hcomm-$(DKMS_VERSION)/uapi/linux/

clean:
	-$(MAKE) -C lib clean
	-$(MAKE) -C pypto clean
	-$(MAKE) -C selftests clean
	-$(MAKE) -C bench clean
	rm -rf $(BUILD)
