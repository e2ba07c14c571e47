#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# test-netlab.sh NETLAB - tools/netlab's promises (docs/netlab.md): the
# bridge and the links' bridge ends in the lab's switch namespace with the
# bridge's netfilter hooks off there and the root namespace untouched,
# shaping on both ends, every link carrying TCP, `down` leaving nothing,
# a failing `up` cleaning after itself, someone else's namespace refused
# and left alone, and `agg-port` setting up a port that faces an XDP
# aggregator.  Needs root (suite integration).
set -u
netlab=${1:?usage: test-netlab.sh NETLAB}
name=nl$(($$ % 100000))
subnet=10.86.$(($$ % 200))
fails=0
state=$(mktemp -d)
export NETLAB_STATE_DIR=$state

ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
check() {	# check WHAT CMD...: CMD must succeed
	local what=$1
	shift
	if "$@" >/dev/null 2>&1; then ok "$what"; else bad "$what"; fi
}
refute() {	# refute WHAT CMD...: CMD must fail
	local what=$1
	shift
	if "$@" >/dev/null 2>&1; then bad "$what"; else ok "$what"; fi
}
ns_list() { ip netns list | awk '{print $1}' | grep -E "^${name}(sw|[0-9]+)$" | sort; }
cleanup() {
	"$netlab" down --name "$name" >/dev/null 2>&1
	ip netns del "${name}sw" 2>/dev/null
	rm -rf "$state"
}
trap cleanup EXIT

[ "$(id -u)" -eq 0 ] || { echo "test-netlab.sh needs root"; exit 1; }
root_nf=$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null || echo none)

if ! "$netlab" up 3 --rate 100mbit --mgmt --name "$name" --subnet "$subnet"; then
	echo "FAIL up"
	exit 1
fi
sw=$("$netlab" ns --name "$name" switch)
check "ns switch names ${name}sw" [ "$sw" = "${name}sw" ]
check "four namespaces: three hosts and the switch" \
	[ "$(ns_list | tr '\n' ' ')" = "${name}0 ${name}1 ${name}2 ${name}sw " ]
for l in "${name}br" "${name}mg" "${name}0-h" "${name}2-m"; do
	check "$l is in the switch namespace" ip -n "$sw" link show dev "$l"
	refute "$l is not in the root namespace" ip link show dev "$l"
done
check "host 1's bridge end is on the bridge" \
	sh -c "ip -n $sw -o link show dev ${name}1-h | grep -q 'master ${name}br'"
if [ "$root_nf" != none ]; then
	for f in iptables ip6tables arptables; do
		check "bridge-nf-call-$f is 0 in the switch namespace" [ \
			"$(ip netns exec "$sw" cat /proc/sys/net/bridge/bridge-nf-call-$f)" = 0 ]
	done
	check "the root namespace's bridge-nf-call-iptables is untouched" \
		[ "$(cat /proc/sys/net/bridge/bridge-nf-call-iptables)" = "$root_nf" ]
else
	echo "skip the netfilter checks: br_netfilter is not loaded"
fi
check "tbf on host 1's upload (eth0)" \
	sh -c "ip -n ${name}1 -o link show dev eth0 >/dev/null && tc -n ${name}1 qdisc show dev eth0 | grep -q tbf"
check "tbf on host 1's download (its bridge end)" \
	sh -c "tc -n $sw qdisc show dev ${name}1-h | grep -q tbf"
check "exec switch runs in the switch namespace" \
	sh -c "\"$netlab\" exec --name $name switch ip -o link show dev ${name}br"
check "every link carries a TCP stream (netlab check)" \
	"$netlab" check --name "$name" --bytes 2000000
# a TCP connection over the management bridge, host 0 -> host 2
mgmt2=$("$netlab" mgmt-ip --name "$name" 2)
"$netlab" exec --name "$name" 2 timeout 20 python3 -c "
import socket
s = socket.socket(); s.bind(('$mgmt2', 5998))
s.listen(1); s.settimeout(15); c, _ = s.accept(); c.sendall(b'k')" &
server=$!
check "the management network carries TCP from host 0 to host 2" \
	"$netlab" exec --name "$name" 0 timeout 20 python3 -c "
import socket, time
for _ in range(100):
    try:
        c = socket.create_connection(('$mgmt2', 5998), timeout=2)
        break
    except OSError:
        time.sleep(0.05)
assert c.recv(1) == b'k'"
wait "$server"

# agg-port: a stand-in for tally-xdp-agg records where it ran and on what
pass="$state/pass"
printf '#!/bin/sh\necho "$* $(ip netns identify)" >"%s.args"\n' "$pass" >"$pass"
chmod +x "$pass"
gro() {	# gro LINK: "on on" when GRO and UDP GRO forwarding are on
	ip netns exec "$sw" ethtool -k "$1" |
		awk '/^generic-receive-offload:|^rx-udp-gro-forwarding:/ {printf "%s ", $2}'
}
refute "agg-port without --xdp-pass fails" "$netlab" agg-port --name "$name" 2
check "agg-port 2" "$netlab" agg-port --name "$name" 2 --xdp-pass "$pass"
check "agg-port ran TOOL --pass on host 2's bridge end, in the switch namespace" \
	[ "$(cat "$pass.args")" = "--pass ${name}2-h $sw" ]
check "agg-port turned the bridge's multicast snooping off" [ \
	"$(ip netns exec "$sw" cat /sys/class/net/${name}br/bridge/multicast_snooping)" = 0 ]
check "agg-port turned GRO on at host 2's bridge end" [ "$(gro ${name}2-h)" = "on on " ]
check "agg-port --no-gro" "$netlab" agg-port --name "$name" 1 --xdp-pass "$pass" --no-gro
check "agg-port --no-gro left GRO off at host 1's bridge end" [ "$(gro ${name}1-h)" = "off off " ]
refute "agg-port fails when TOOL fails" "$netlab" agg-port --name "$name" 0 --xdp-pass false

check "down" "$netlab" down --name "$name"
check "down leaves no namespace" [ -z "$(ns_list)" ]
check "down leaves no state file" [ ! -e "$state/$name.state" ]

refute "up with a bad rate fails" \
	"$netlab" up 2 --rate bogus --name "$name" --subnet "$subnet"
check "the failed up left no namespace" [ -z "$(ns_list)" ]
check "the failed up left no state file" [ ! -e "$state/$name.state" ]

mtu() {	# mtu NS DEV: the device's MTU
	ip -n "$1" -o link show dev "$2" | sed -n 's/.* mtu \([0-9]*\) .*/\1/p'
}
check "up --mtu 3400" "$netlab" up 2 --mtu 3400 --name "$name" --subnet "$subnet"
check "--mtu: host 1's eth0" [ "$(mtu "${name}1" eth0)" = 3400 ]
check "--mtu: host 1's bridge end" [ "$(mtu "${name}sw" "${name}1-h")" = 3400 ]
check "--mtu: the bridge" [ "$(mtu "${name}sw" "${name}br")" = 3400 ]
dgram() {	# dgram BYTES: host 0 sends a UDP datagram with DF to host 1
	ip netns exec "${name}0" python3 -c "import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, 10, 2)	# IP_MTU_DISCOVER, IP_PMTUDISC_DO
s.connect(('$subnet.2', 9))
s.send(b'x' * $1)" 2>/dev/null
}
check "--mtu: a 3400-byte IP packet leaves whole" dgram 3372
refute "--mtu: a 3401-byte one does not" dgram 3373
check "down" "$netlab" down --name "$name"
refute "up with a bad MTU fails" \
	"$netlab" up 2 --mtu 3400x --name "$name" --subnet "$subnet"
check "the failed up left no namespace" [ -z "$(ns_list)" ]

ip netns add "${name}sw"
refute "up refuses when the switch namespace is someone else's" \
	"$netlab" up 2 --name "$name" --subnet "$subnet"
check "someone else's namespace is left alone" [ -e "/run/netns/${name}sw" ]
ip netns del "${name}sw"

echo "test-netlab: $fails failed"
[ "$fails" -eq 0 ]
