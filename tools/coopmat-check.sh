#!/usr/bin/env bash
# Runs the cooperative-matrix tests on a driver that has cooperative matrices, on a machine
# with no GPU: Mesa 26's lavapipe (VK_KHR_cooperative_matrix, fp16), which Debian ships only in
# unstable, for a newer glibc than Debian 12's. So it runs in a minimal Debian unstable userland
# in .drivers/unstable/: Mesa's, the validation layer's and Brigade's libraries with every
# package they depend on, unpacked (about 0.7 GB; kept for the next run). The checkout is
# bind-mounted there at its own path, and Brigade's tests, built here, run inside it under
# unstable's validation layer: the matrix-unit kernel cases (Conv2d's matrix form's on a
# 16-bit x among them, and its taking that form where Winograd's would pay), and fp16
# fashion-mlp pipelined
# (whose products take the matrix units by default there) against one device, with the
# 16-bit numerics cases over every preset, the GPT ones again with attention on the matrix
# units (BRIGADE_ATTENTION=fused).
# With --whole, instead: the vk, model, kernels and pipeline suites whole inside it, under
# unstable's validation layer, which knows more than Debian 12's (1.3.239), on Mesa 26's
# lavapipe with the products where a CPU device puts them.
# Needs root (chroot, mounts).
#   tools/coopmat-check.sh [BUILD_DIR]          default build/
#   tools/coopmat-check.sh --whole [BUILD_DIR]
#   tools/coopmat-check.sh --prepare            only make the userland (CI: while Brigade builds)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prepare=0 whole=0
[ "${1:-}" = "--prepare" ] && { prepare=1; shift; }
[ "${1:-}" = "--whole" ] && { whole=1; shift; }
[ $prepare = 1 ] || build=$(cd "${1:-$root/build}" && pwd)
dest=$root/.drivers/unstable
min_mesa=26

[ "$(id -u)" -eq 0 ] || { echo "coopmat-check: needs root (chroot and mounts)" >&2; exit 1; }
# One at a time: each sweeps the mounts under $dest that a killed run left.
mkdir -p "$root/.drivers"
exec 9>"$root/.drivers/unstable.lock"
flock 9

# Mounts a run that was killed left behind (its trap never ran): with the checkout mounted
# inside .drivers/, a later `rm -rf .drivers` would reach the checkout itself, and /proc or
# /dev under $dest would stop the rm below.
sweep() { for m in $(findmnt -rn -o TARGET | grep "^$dest/" | sort -r || true); do umount "$m" 2>/dev/null || umount -l "$m"; done; }
sweep
# Made by unpacking the packages rather than installing them (no maintainer scripts, no
# package database: a third of debootstrap's CPU time); the versions are kept beside.
if [ ! -f "$dest/.unpacked" ]; then
  t0=$SECONDS
  rm -rf --one-file-system "$dest" "$dest.deb"
  echo "coopmat-check: unpacking a Debian unstable userland into $dest"
  source "$root/tools/debian-fetch.sh"
  debian_fetch --with-depends unstable "$dest.deb" mesa-vulkan-drivers vulkan-validationlayers libtomlplusplus3 \
    libopenmpi40 || { echo "coopmat-check: could not fetch Debian unstable's packages" >&2; exit 1; }
  for deb in "$dest.deb"/*.deb; do dpkg-deb -x "$deb" "$dest"; done
  # The merged /usr's links (the programs built here load /lib64/ld-linux-x86-64.so.2), and
  # what the tests take from the system: /proc and /dev are mounted below.
  for d in bin sbin lib lib64; do [ -e "$dest/$d" ] || ln -s "usr/$d" "$dest/$d"; done
  mkdir -p "$dest/proc" "$dest/dev" "$dest/root" "$dest/tmp"
  chmod 1777 "$dest/tmp"
  for p in mesa-vulkan-drivers vulkan-validationlayers; do
    dpkg-deb -f "$(ls "$dest.deb/${p}"_*.deb)" Version >"$dest/.version-$p"
  done
  rm -rf "$dest.deb"
  touch "$dest/.unpacked"
  echo "coopmat-check: unpacked in $((SECONDS - t0)) s"
fi
[ $prepare = 0 ] || exit 0
mesa=$(cat "$dest/.version-mesa-vulkan-drivers")
if [ "${mesa%%.*}" -lt "$min_mesa" ]; then
  echo "coopmat-check: unstable's Mesa is $mesa, older than $min_mesa: no cooperative matrices" >&2
  exit 1
fi

sweep
mounted=()
cleanup() { for m in "${mounted[@]}"; do umount "$m" 2>/dev/null || umount -l "$m"; done; }
trap cleanup EXIT
mkdir -p "$dest$root"
# Each on its own line, so that set -e stops at a mount that fails.
mount -t proc proc "$dest/proc"
mounted=("$dest/proc")
mount --bind /dev "$dest/dev"
mounted=("$dest/dev" "${mounted[@]}")
mount --bind "$root" "$dest$root"
mounted=("$dest$root" "${mounted[@]}")
if [ "$build" != "$root/build" ] && [[ "$build" != "$root"/* ]]; then
  mkdir -p "$dest$build"
  mount --bind "$build" "$dest$build"
  mounted=("$dest$build" "${mounted[@]}")
fi

# Mesa 26's lavapipe rather than the one in .drivers/; leading NAME=VALUE words are more of
# the environment (the userland has no env program of its own).
unstable() {
  local vars=(BRIGADE_LAVAPIPE=system)
  while [[ "$1" =~ ^[A-Z_][A-Z0-9_]*= ]]; do vars+=("$1"); shift; done
  env "${vars[@]}" chroot "$dest" "$@"
}
if [ $whole = 1 ]; then
  layer=$(cat "$dest/.version-vulkan-validationlayers")
  for suite in vk model kernels pipeline; do
    t0=$SECONDS
    # 77: no case failed and some said they cannot run here (tests/main.cpp lists them).
    status=0
    unstable "$build/tests/test_$suite" >"$build/coopmat-whole-$suite.log" 2>&1 || status=$?
    if [ $status != 0 ] && [ $status != 77 ]; then
      tail -40 "$build/coopmat-whole-$suite.log" >&2
      echo "coopmat-check: the $suite suite failed ($build/coopmat-whole-$suite.log)" >&2
      exit 1
    fi
    cases=$(awk -F'|' '/test cases:/ { sub(/.*test cases: */, "", $1); gsub(/^ +| +$/, "", $2); gsub(/^ +| +$/, "", $4)
                                       print $1 + 0 " cases, " $2 ", " $4 }' "$build/coopmat-whole-$suite.log")
    not_run=$(grep -o '^[0-9]* case(s) not run here' "$build/coopmat-whole-$suite.log" | grep -o '^[0-9]*' || echo 0)
    [ "${not_run:-0}" = 0 ] && not_run= || not_run=", $not_run not run here"
    echo "coopmat-check: $suite suite under validation layer $layer on Mesa $mesa's lavapipe: $cases$not_run, in $((SECONDS - t0)) s"
  done
  exit 0
fi
# Matrix units taken by default, as on a GPU (a CPU's leaves them to its faster SIMT kernel).
inside() { unstable BRIGADE_MATRIX_UNITS=on "$@"; }
# cases N COMMAND...: runs a test program's cases picked by name, and fails unless N of them ran
# (the program fails only when none matches: a case renamed out of its pattern would drop out
# of the only run on real matrix units unnoticed). Where a case is added or renamed, N too.
cases() {
  local want=$1 log=$build/coopmat-cases.log ran
  shift
  inside "$@" 2>&1 | tee "$log"
  ran=$(sed -n 's/^\[doctest\] test cases: *\([0-9]*\) |.*/\1/p' "$log" | tail -1)
  [ "$ran" = "$want" ] || { echo "coopmat-check: ${ran:-no} case(s) ran, not $want: $*" >&2; exit 1; }
}
echo "coopmat-check: Mesa $mesa's lavapipe: $(inside "$build/brigade" devices | grep -A1 'matrix products' | tail -1 | tr -s ' ')"
inside "$build/brigade" devices | grep -q 'products on matrix units' ||
  { echo "coopmat-check: the device lists no matrix product Brigade takes" >&2; exit 1; }
# Not the cases of the matrix-unit kernel's plain build by name ("on plain invocations", "plain
# build"): they take no matrix instruction here, and the optimized run has run them on lavapipe
# (66 of the kernel cases' 138 s of CPU here, Mesa's shader cache cold, as in CI). Of the
# cases of 16-bit reads and writes, only conv2d's takes a product (its matrix form); the
# batchnorm, layernorm and maxpool2d ones run on lavapipe and SwiftShader in the optimized run.
cases 19 "$build/tests/test_kernels" -tc='*matrix-unit*,*matrix units*,*16-bit A and B*,*matrix tiles*,*C'"'"'s 16-bit copy*,*packed by its caller*,*K tiles a causal*,conv2d in its matrix and Winograd forms reads*,*its products reading P, dS and dy rounded*' \
  -tce='*on plain invocations*,*plain build*'
cases 6 "$build/tests/test_pipeline" -tc='fp16 fashion-mlp pipelined equals one device*,fp16 gpt-mini (two blocks)*,*products read its weights rounded*,*within 2 L u*,*read 16-bit operands*'
# 16-bit attention is fused on matrix units by default (flash attention on the matrix tiles);
# the GPT cases again with it in the matrix form, its products on the matrix kernel. (Not the
# pipelined gpt-mini's: there its three AdamW steps end 3e-6 off one device's in a bias whose
# gradient is near zero, past the case's bound; on the H200 it passed in the matrix form.)
inside "$build/brigade" plan --model gpt-mini --precision fp16 |
  grep 'attention: attention fused: flash attention on matrix units' ||
  { echo "coopmat-check: plan does not put fp16 attention fused on the matrix units" >&2; exit 1; }
cases 2 BRIGADE_ATTENTION=matrix "$build/tests/test_pipeline" -tc='*within 2 L u*,*GPT block*read 16-bit operands*'
