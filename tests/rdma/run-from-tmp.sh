#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# run-from-tmp.sh - run-qemu.sh from a folder under /tmp, with one more
# program there, as a checkout under /tmp would have it: the guest's fresh
# tmpfs on /tmp must not hide them (the guest cd's into the folder first
# and runs the program from it; either failing fails the run).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /tmp/tally-rdma-cwd.XXXXXX)
trap 'rm -rf "$dir"' EXIT INT TERM
cat > "$dir/seen-from-guest.sh" <<'EOT'
#!/bin/sh
echo "guest: sees $(pwd) and its program"
EOT
chmod +x "$dir/seen-from-guest.sh"
cd "$dir"
"$here/run-qemu.sh" "$@" "$dir/seen-from-guest.sh"
