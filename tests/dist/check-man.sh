#!/bin/sh
# check-man.sh MANDIR MAPFILE [MANDOC] - the man pages of tally:
#  - every exported symbol of libtally (MAPFILE) has a page in MANDIR, or
#    a line of MANDIR/aliases naming the page that documents it, and that
#    page names it in its NAME section (.Nm);
#  - every page is installed (listed in MANDIR/meson.build);
#  - `mandoc -T lint -W warning` says nothing about any page.
# Exit 0, 1 with the reasons, or 77 (skip) when mandoc is missing after
# the other checks passed.
set -u
mandir=$1
map=$2
mandoc=${3:-mandoc}
fail=0

say() { echo "check-man: $*" >&2; fail=1; }

syms=$(sed -n 's/^[[:space:]]*\(tally_[a-z0-9_]*\);.*/\1/p' "$map")
[ -n "$syms" ] || say "no symbols found in $map"
for s in $syms; do
	page=$s.3
	if [ ! -f "$mandir/$page" ]; then
		page=$(awk -v a="$s.3" '$1 == a { print $2 }' "$mandir/aliases")
		if [ -z "$page" ]; then
			say "$s is exported but has no man page: write" \
			    "man/$s.3 or add it to man/aliases"
			continue
		fi
		[ -f "$mandir/$page" ] ||
			{ say "man/aliases: $s.3 -> $page, which is missing"; continue; }
	fi
	grep -q "^\.Nm $s\( ,\)\{0,1\}\$" "$mandir/$page" ||
		say "$page documents $s but has no '.Nm $s' line"
done
for f in "$mandir"/*.[1-8]; do
	b=$(basename "$f")
	grep -q "'$b'" "$mandir/meson.build" ||
		say "$b is not installed: add it to man/meson.build"
done
[ $fail -eq 0 ] || exit 1

command -v "$mandoc" >/dev/null 2>&1 ||
	{ echo "check-man: $mandoc not found, lint skipped" >&2; exit 77; }
out=$("$mandoc" -T lint -W warning "$mandir"/*.[1-8] 2>&1)
if [ -n "$out" ]; then
	echo "$out" >&2
	exit 1
fi
exit 0
