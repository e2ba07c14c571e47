#!/bin/sh
# tool-args.sh TOOL - tally-xdp-agg refuses what the XDP program cannot
# run before it loads anything: a K that is no whole number of 32-lane
# half passes up to 832 (tly_switch_k_ok), more than 32 workers, a bad group,
# the same in a config file; each with exit 2 and the option named.
# No root needed: nothing is loaded.
set -u
tool=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tally-xdp-args-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

# refuses ARGS... with exit 2 and MSG on stderr (MSG is the first arg)
refuses() {
	msg=$1
	shift
	"$tool" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ $rc -ne 2 ] || ! grep -qF -- "$msg" "$tmp/err"; then
		echo "tool-args: '$*': exit $rc, wanted 2 and '$msg':" >&2
		cat "$tmp/err" >&2
		fail=1
	fi
}

for k in 0 8 16 48 255 257 336 400 864 1024; do
	refuses "bad --k" --ifname tlynoif0 --k $k
done
refuses "bad --workers" --ifname tlynoif0 --workers 33
refuses "bad --group" --ifname tlynoif0 --group 239.1.1.1
printf 'k = 80\n' > "$tmp/job.conf"
refuses "job.conf:1: bad line" --config "$tmp/job.conf"
# the good K values get past the options (to the interface check: no
# such interface, the usage and exit 2, but no "bad --k")
for k in 32 64 96 128 192 256 320 352 384 832; do
	"$tool" --ifname tlynoif0 --k $k >/dev/null 2>"$tmp/err"
	if grep -q "bad --k" "$tmp/err"; then
		echo "tool-args: --k $k refused" >&2
		fail=1
	fi
done
[ $fail -eq 0 ] && echo "tool-args: ok"
exit $fail
