#!/usr/bin/env bash
# Fetches a newer Mesa lavapipe (Vulkan on the CPU) from Debian's bookworm-backports into
# .drivers/lavapipe/ of this checkout. Nothing outside the checkout changes: apt runs with a
# private source list, state and cache under a temporary folder, downloads one package and
# installs nothing; the machine's apt sources and packages stay as they are (tools/debian-fetch.sh).
# Brigade's programs and tests load this lavapipe in place of the system's when it is present
# (engine/vk/drivers.cpp); BRIGADE_LAVAPIPE=system turns that off.
#   tools/install-lavapipe.sh           installs, or checks what is installed
#   tools/install-lavapipe.sh --force   fetches again
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest=$root/.drivers/lavapipe
suite=bookworm-backports
package=mesa-vulkan-drivers
min_major=25
multiarch=$(gcc -print-multiarch)

installed() {
  [ -f "$dest/libvulkan_lvp.so" ] && [ -f "$dest/lavapipe_icd.json" ] && [ -f "$dest/SHA256SUMS" ] &&
    (cd "$dest" && sha256sum --check --status SHA256SUMS)
}

if [ "${1:-}" != "--force" ] && installed; then
  echo "install-lavapipe: $(cat "$dest/VERSION") present in $dest"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Where what it fetches cannot be had: a warning, and the build goes on without it; a failure
# under BRIGADE_REQUIRE_FETCH=1 (CI, where going on without it would test less or slower).
give_up() {
  echo "$*" >&2
  [ "${BRIGADE_REQUIRE_FETCH:-0}" != 1 ] || { echo "install-lavapipe: BRIGADE_REQUIRE_FETCH=1: stopping" >&2; exit 1; }
  exit 0
}
source "$root/tools/debian-fetch.sh"
echo "install-lavapipe: fetching $package from $suite"
if ! debian_fetch "$suite" "$work/deb" "$package"; then
  give_up "install-lavapipe: could not fetch $package from $suite; Brigade will use the system's lavapipe"
fi
deb=$(ls "$work"/deb/*.deb)
version=$(dpkg-deb -f "$deb" Version)
if [ "${version%%.*}" -lt "$min_major" ] 2>/dev/null; then
  give_up "install-lavapipe: $suite has $package $version, older than Mesa $min_major; not installed"
fi

dpkg-deb -x "$deb" "$work/x"
library=$work/x/usr/lib/$multiarch/libvulkan_lvp.so
[ -f "$library" ] || { echo "install-lavapipe: $deb holds no libvulkan_lvp.so" >&2; exit 1; }
missing=$(ldd "$library" | awk '/not found/ { print $1 }' | tr '\n' ' ')
if [ -n "$missing" ]; then
  give_up "install-lavapipe: Mesa $version's lavapipe needs libraries this machine lacks ($missing);" \
       "Brigade will use the system's lavapipe"
fi

# Made beside the installed one, which it replaces once whole.
new=$dest.new
rm -rf "$new"
mkdir -p "$new"
cp "$library" "$new/libvulkan_lvp.so"
# The package's manifest names the library by its system path; this one names the copy beside
# it (the loader reads a relative path against the manifest's folder). Its file name differs
# from the system's lvp_icd.*.json, so the loader can be told to skip that one alone.
sed -E 's#"library_path": *"[^"]*"#"library_path": "./libvulkan_lvp.so"#' \
  "$work"/x/usr/share/vulkan/icd.d/lvp_icd*.json >"$new/lavapipe_icd.json"
echo "Mesa $version" >"$new/VERSION"
(cd "$new" && sha256sum libvulkan_lvp.so lavapipe_icd.json VERSION >SHA256SUMS)
rm -rf "$dest"
mv "$new" "$dest"
installed || { echo "install-lavapipe: the files in $dest fail their checksums" >&2; exit 1; }
echo "install-lavapipe: Mesa $version's lavapipe installed in $dest"
