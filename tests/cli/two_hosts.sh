#!/usr/bin/env bash
# Two "hosts" on one machine: ranks 0 and 1 in two network namespaces joined
# by a veth pair, started through torchrun's environment variables. Same-host
# detection must see two hosts (the namespaces differ), so point-to-point
# goes over Gloo/TCP across the veth link, and a short training run works.
# Skips (exit 77) when the machine refuses network namespaces.
set -u
baton=$1
peer="$(dirname "$baton")/tests/comm_peer"
[ -x "$peer" ] || { echo "SKIP: $peer is not built (a torch-free build)"; exit 77; }
tmp=$(mktemp -d)
a=baton_a_$$; b=baton_b_$$
cleanup() { ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

if ! ip netns add "$a" 2>"$tmp/why" || ! ip netns add "$b" 2>>"$tmp/why"; then
  echo "SKIP: network namespaces are refused here: $(head -1 "$tmp/why")"; exit 77
fi
ip link add "veth_$$a" type veth peer name "veth_$$b" || { echo "SKIP: no veth pairs"; exit 77; }
ip link set "veth_$$a" netns "$a" && ip link set "veth_$$b" netns "$b" || fail "cannot move veth ends"
ip -n "$a" addr add 10.77.0.1/24 dev "veth_$$a" && ip -n "$b" addr add 10.77.0.2/24 dev "veth_$$b" || fail "addresses"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set "veth_$$a" up && ip -n "$b" link set "veth_$$b" up || fail "links up"

run_pair() {  # run_pair <tag> <command...>: rank 0 in $a, rank 1 in $b
  local tag=$1; shift
  local port=$(( 20000 + RANDOM % 20000 )) pids=() rc=0
  for r in 0 1; do
    local ns=$a ifname="veth_$$a"; [ $r -eq 1 ] && ns=$b && ifname="veth_$$b"
    ip netns exec "$ns" env RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \
      MASTER_ADDR=10.77.0.1 MASTER_PORT=$port GLOO_SOCKET_IFNAME="$ifname" \
      timeout 120 "$@" > "$tmp/$tag.out$r" 2> "$tmp/$tag.err$r" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  return $rc
}

run_pair peer "$peer" ping 20000 auto || fail "comm_peer across namespaces failed: $(cat "$tmp"/peer.err*)"
for r in 0 1; do
  grep -qx "transport gloo" "$tmp/peer.out$r" || fail "rank $r did not use gloo across hosts: $(cat "$tmp/peer.out$r")"
  grep -q "ok from rank $r" "$tmp/peer.out$r" || fail "rank $r: $(cat "$tmp/peer.out$r")"
done

run_pair peer_shm "$peer" ping 20000 shm && fail "--transport shm across hosts was accepted"
grep -q "transport shm needs every rank on this host" "$tmp/peer_shm.err0" "$tmp/peer_shm.err1" \
  || fail "forcing shm across hosts did not say why: $(cat "$tmp"/peer_shm.err*)"

run_pair train "$baton" train --model mlp --layers 4 --hidden 16 --in-features 16 --batch 16 \
  --microbatches 4 --pp 2 --steps 5 --threads 1 --timeout 60 \
  || fail "training across namespaces failed: $(cat "$tmp"/train.err*)"
grep -q "^step 5/5" "$tmp/train.out0" || fail "rank 0 did not finish: $(cat "$tmp/train.out0")"
echo "ok: two namespaces, gloo across the veth link"
