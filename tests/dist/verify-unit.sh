#!/bin/sh
# verify-unit.sh UNIT DROPIN TALLYD MANDIR - `systemd-analyze verify` on
# dist/systemd/tallyd.service, alone and with the kernel-bypass drop-in
# appended, offline: the unit's /usr/bin/tallyd is replaced by the build's
# TALLYD (verify checks that ExecStart= is executable), and its
# Documentation= man pages are looked up in MANDIR (verify runs man(1) on
# them), so a page the unit names must exist.  Any message fails.
# Exit 0, 1, or 77 (skip) without systemd-analyze or man.
set -u
unit=$1
dropin=$2
tallyd=$3
mandir=$4

for p in systemd-analyze man; do
	command -v $p >/dev/null 2>&1 ||
		{ echo "verify-unit: no $p, skipped" >&2; exit 77; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tally-unit-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
for s in 1 3 5 8; do
	mkdir -p "$tmp/man/man$s"
	for f in "$mandir"/*.$s; do
		[ -f "$f" ] && ln -s "$(readlink -f "$f")" "$tmp/man/man$s/"
	done
done
grep -q '^ExecStart=/usr/bin/tallyd ' "$unit" ||
	{ echo "verify-unit: ExecStart= does not run /usr/bin/tallyd" >&2; exit 1; }
mkdir "$tmp/plain" "$tmp/bypass"
sed "s|/usr/bin/tallyd|$tallyd|" "$unit" > "$tmp/plain/tallyd.service"
{ cat "$tmp/plain/tallyd.service"; echo; cat "$dropin"; } \
	> "$tmp/bypass/tallyd.service"
fail=0
for d in plain bypass; do
	out=$(cd "$tmp/$d" && MANPATH="$tmp/man" \
	      systemd-analyze verify ./tallyd.service 2>&1)
	rc=$?
	if [ $rc -ne 0 ] || [ -n "$out" ]; then
		echo "verify-unit ($d): exit $rc" >&2
		echo "$out" >&2
		fail=1
	fi
done
exit $fail
