#!/bin/sh
# Install the Debian packages hcomm needs to build and test itself.
# Idempotent: does nothing (and needs no network) when all are present.
# libjson-c-dev: libhcomm reads JSON rank tables.
# rdma-core .. iproute2: the network test bed (scripts/netvm.sh): rdma_rxe
# tools, verbs/rdma_cm, perftest and iperf3, used inside its VMs.
# openssh-server, openssh-client: lib/tests/vm/mpi.sh starts its own sshd
# (own config and keys in the run directory) in a VM as Open MPI's remote
# agent; the package's service is not started (policy-rc.d below) or
# used on the host.
set -eu

PKGS="build-essential pkg-config cpio kmod xz-utils bc flex bison dkms
libelf-dev libssl-dev python3 sparse liburing-dev libdrm-dev libjson-c-dev
python3-numpy python3-pytest python3-venv python3-pip python3-setuptools
qemu-system-x86 busybox-static
linux-source-6.12
linux-image-amd64 linux-headers-amd64
linux-image-6.12-amd64 linux-headers-6.12-amd64
openmpi-bin libopenmpi-dev
libopenblas-dev libtbb-dev libstarpu-dev chromium graphviz
rdma-core ibverbs-utils libibverbs-dev librdmacm-dev rdmacm-utils perftest
iperf3 iproute2
openssh-server openssh-client"

# "install-deps.sh kernel": only what the debug kernel's build needs, so
# that check.sh can start that build while the rest downloads.
[ "${1:-}" = kernel ] && PKGS="build-essential cpio kmod xz-utils bc flex
bison libelf-dev libssl-dev linux-source-6.12"

missing=""
for p in $PKGS; do
	st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$st" = installed ] || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: need root to install:$missing" >&2
	exit 1
fi
echo "install-deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# No recommends: we do not want initramfs-tools or a boot loader hook.
# No service starts meanwhile (openssh-server's sshd would, on the host):
# a policy-rc.d that refuses (101) while apt runs, unless one exists.
prc=/usr/sbin/policy-rc.d
if [ ! -e "$prc" ]; then
	trap 'rm -f "$prc"' EXIT INT TERM
	printf '#!/bin/sh\nexit 101\n' > "$prc"
	chmod 755 "$prc"
fi
apt-get install -y -q --no-install-recommends $missing
