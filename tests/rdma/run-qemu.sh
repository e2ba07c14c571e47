#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# run-qemu.sh - run test programs inside a QEMU guest that has a real
# soft-RoCE device (rdma_rxe on a dummy netdev), for the rdma transport's
# tests on machines whose own kernel has no RDMA support.
#
#   tests/rdma/run-qemu.sh [-t SECONDS] [-e VAR=VALUE]... PROGRAM...
#
# The guest runs Debian's kernel (package linux-image-amd64) under TCG
# software emulation (no KVM needed) with a tiny initramfs: static busybox,
# the modules for virtio-9p and rdma_rxe, and an init that mounts the
# host's / read-only over virtio-9p and chroots into it, so host-built
# programs and the host's rdma-core run unchanged.  A second, read-write
# 9p share carries the results back.  The guest gets fresh tmpfs on /tmp
# and /run; the folders there that the run needs (the current directory's
# and each PROGRAM's, e.g. a checkout under /tmp) are bound back from the
# host's root first.  In the guest: dummy0 gets 10.0.0.1
# (MTU 9000, so rxe's path MTU is 4096), rxe0 sits on it with the RoCEv2
# GID ::ffff:10.0.0.1 at index 1, and each PROGRAM runs in turn from the
# current directory with its output sent to this script's stdout.  The
# exit status is 0 only when every PROGRAM exited 0; a guest that does not
# come back within SECONDS (default 300) fails the run.
#
# Needs root (the kernel image under /boot is root's; 9p exports /) and
# the packages tools/install-deps installs.
set -eu

timeout_s=300
envs=""
while [ $# -gt 0 ]; do
	case "$1" in
	-t) timeout_s=$2; shift 2 ;;
	-e) envs="$envs
export $2"; shift 2 ;;
	--) shift; break ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || { echo "usage: $0 [-t SECONDS] [-e VAR=VALUE]... PROGRAM..." >&2; exit 2; }

fail() {
	echo "run-qemu: $*" >&2
	exit 1
}

# the newest Debian kernel that ships rdma_rxe, and its image
kver=""
for d in /lib/modules/*/kernel/drivers/infiniband/sw/rxe; do
	[ -d "$d" ] || continue
	v=${d#/lib/modules/}
	v=${v%%/*}
	[ -f "/boot/vmlinuz-$v" ] && kver=$v
done
[ -n "$kver" ] || fail "no kernel with rdma_rxe under /lib/modules and /boot (install linux-image-amd64: make deps)"
kernel=/boot/vmlinuz-$kver
[ -r "$kernel" ] || fail "$kernel is not readable (run as root)"
qemu=$(command -v qemu-system-x86_64) || fail "qemu-system-x86_64 missing (make deps)"
busybox=/bin/busybox
file_out=$(LC_ALL=C od -An -c -N4 "$busybox" 2>/dev/null | tr -d ' ') || true
[ "$file_out" = '177ELF' ] || fail "$busybox missing (busybox-static)"
command -v cpio >/dev/null || fail "cpio missing"
command -v modprobe >/dev/null || fail "modprobe missing (kmod)"

work=$(mktemp -d /tmp/tally-rdma-qemu.XXXXXX)
cleanup() { rm -rf "$work"; }
trap cleanup EXIT INT TERM
root=$work/initramfs
out=$work/out
mkdir -p "$root/bin" "$root/lib/modules" "$root/proc" "$root/sys" \
	"$root/dev" "$root/newroot" "$out"
cp "$busybox" "$root/bin/busybox"
for a in sh mount insmod mkdir cat echo poweroff chroot sleep; do
	ln -s busybox "$root/bin/$a"
done

# the modules in dependency order; crc32_generic explicitly: without it
# rxe fails with "failed to init crc32 algorithm"
: > "$root/modlist"
for m in crc32_generic virtio_pci 9pnet_virtio 9p udp_tunnel ip6_udp_tunnel \
	 ib_core ib_uverbs rdma_rxe ib_cm iw_cm rdma_cm rdma_ucm dummy; do
	modprobe -S "$kver" --show-depends "$m" 2>/dev/null |
		awk '$1 == "insmod" { print $2 }' > "$work/deps" ||
		fail "modprobe --show-depends $m for $kver"
	[ -s "$work/deps" ] || fail "module $m not found for $kver"
	while read -r f; do
		b=$(basename "$f")
		grep -qx "$b" "$root/modlist" && continue
		cp "$f" "$root/lib/modules/$b"
		echo "$b" >> "$root/modlist"
	done < "$work/deps"
done

cat > "$root/init" <<'EOF'
#!/bin/sh
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modlist); do
	insmod /lib/modules/$m || echo "guest: insmod $m failed"
done
o=trans=virtio,version=9p2000.L,msize=512000
if mount -t 9p -o $o,ro,cache=loose hostroot /newroot; then
	mount -t proc proc /newroot/proc
	mount -t sysfs sys /newroot/sys
	mount -t devtmpfs dev /newroot/dev
	mkdir -p /newroot/dev/shm /host/tmp /host/run
	mount -t tmpfs shm /newroot/dev/shm
	# keep the host's /tmp and /run reachable under the fresh tmpfs
	mount -o bind /newroot/tmp /host/tmp
	mount -o bind /newroot/run /host/run
	mount -t tmpfs tmp /newroot/tmp
	mount -t tmpfs run /newroot/run
	mkdir -p /newroot/tmp/out
	mount -t 9p -o $o out /newroot/tmp/out
	for b in $(cat /binds); do
		mkdir -p /newroot$b
		mount -o bind /host$b /newroot$b ||
			echo "guest: cannot bind $b"
	done
	chroot /newroot /bin/sh /tmp/out/run.sh
else
	echo "guest: cannot mount the host's root"
fi
poweroff -f
EOF
chmod +x "$root/init"
# the top folders under /tmp and /run this run needs from the host
for p in "$(pwd)" "$@"; do
	case $p in
	/tmp/?* | /run/?*)
		top=${p#/*/}
		top=${top%%/*}
		d=${p#/}
		echo "/${d%%/*}/$top" ;;
	esac
done | sort -u > "$root/binds"
(cd "$root" && find . | cpio -o -H newc --quiet) | gzip -1 > "$work/initrd"

# what runs in the guest, from the host's root
{
	echo "cd '$(pwd)'"
	echo 'export PATH=/usr/sbin:/usr/bin:/sbin:/bin'
	echo "$envs"
	cat <<'EOF'
o=/tmp/out
grep -c . /proc/mounts >/dev/null || { ls -la /proc | head; cat /proc/self/mounts; }
echo "guest: up at $(cut -d' ' -f1 /proc/uptime) s"
ip link set lo up
ip link set dummy0 mtu 9000
ip addr add 10.0.0.1/24 dev dummy0
ip link set dummy0 up
rdma link add rxe0 type rxe netdev dummy0 || echo "guest: rdma link add failed"
g=/sys/class/infiniband/rxe0/ports/1/gids/1
for i in $(seq 100); do
	[ "$(cat $g 2>/dev/null)" = "0000:0000:0000:0000:0000:ffff:0a00:0001" ] && break
	sleep 0.1
done
echo "guest: rxe0 ready at $(cut -d' ' -f1 /proc/uptime) s, GID 1 $(cat $g 2>/dev/null)"
ibv_devinfo -d rxe0 | grep -E 'state|active_mtu|link_layer'
rc=0
EOF
	for p in "$@"; do
		cat <<EOF
t0=\$(cut -d' ' -f1 /proc/uptime)
echo "guest: running $p"
'$p' < /dev/null 2>&1 || { echo "guest: $p failed: \$?"; rc=1; }
echo "guest: $p took \$(echo "\$(cut -d' ' -f1 /proc/uptime) \$t0" | awk '{ print \$1 - \$2 }') s"
EOF
	done
	echo 'echo $rc > $o/rc'
} > "$out/run.sh"

echo "run-qemu: kernel $kver, ${timeout_s} s limit: $*"
start=$(date +%s)
set +e
timeout -k 5 "$timeout_s" "$qemu" -accel tcg -cpu max -m 2048 -smp 2 -nographic \
	-no-reboot -nic none -kernel "$kernel" -initrd "$work/initrd" \
	-append "console=ttyS0 panic=-1 quiet loglevel=3 rdinit=/init" \
	-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
	-virtfs local,path="$out",mount_tag=out,security_model=none \
	< /dev/null
qrc=$?
set -e
echo "run-qemu: guest ran $(($(date +%s) - start)) s"
[ $qrc -eq 124 ] || [ $qrc -eq 137 ] && fail "the guest did not finish within $timeout_s s"
[ -f "$out/rc" ] || fail "the guest ended without a result (qemu exit $qrc)"
[ "$(cat "$out/rc")" = 0 ] || fail "a test failed in the guest"
echo "run-qemu: all passed"
