#!/usr/bin/env bash
# Fetches Google's SwiftShader Vulkan driver (a second vendor that runs on the CPU) into
# .drivers/swiftshader/ of this checkout, at a pinned version with its checksums checked.
# Nothing outside the checkout changes: the machine's Vulkan setup stays as it is, and a
# program sees SwiftShader only when the loader is told about it:
#   export VK_ADD_DRIVER_FILES=$PWD/.drivers/swiftshader/vk_swiftshader_icd.json
# SwiftShader (Apache-2.0) ships inside the npm package of carbonyl, a Chromium build of
# February 2023; only its two driver files are kept. Installs Debian's npm when it is missing.
#   tools/install-swiftshader.sh         installs, or checks what is installed
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest=$root/.drivers/swiftshader

package=@fathyb/carbonyl-linux-amd64@0.0.3-next.ab80a27
tarball_sha256=142b28e6269b5142414e5729d63ce4756992da172e36085a3a6d9fa29fe2e949
library_sha256=6c450af563f8dc6d2790e96af18d4a8502d0ca3bd0c71fb2247b516ade42c0a8
manifest_sha256=c9eef28b6b984fec220ef0abfecc40b502d46946706e47bfe97707027cb818bd

installed() {
  [ -f "$dest/libvk_swiftshader.so" ] && [ -f "$dest/vk_swiftshader_icd.json" ] &&
    echo "$library_sha256  $dest/libvk_swiftshader.so
$manifest_sha256  $dest/vk_swiftshader_icd.json" | sha256sum --check --status
}

if installed; then
  echo "install-swiftshader: SwiftShader present in $dest"
  exit 0
fi

if ! command -v npm >/dev/null; then
  sudo=()
  [ "$(id -u)" -ne 0 ] && sudo=(sudo)
  echo "install-swiftshader: installing Debian's npm"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends npm
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "install-swiftshader: fetching $package"
(cd "$work" && npm pack --silent "$package" >/dev/null 2>"$work/npm.log") || {
  cat "$work/npm.log" >&2
  echo "install-swiftshader: npm could not fetch $package" >&2
  exit 1
}
tarball=$(ls "$work"/*.tgz)
if ! echo "$tarball_sha256  $tarball" | sha256sum --check --status; then
  echo "install-swiftshader: $package does not have the expected checksum $tarball_sha256; not installed" >&2
  exit 1
fi
tar -xzf "$tarball" -C "$work" package/build/libvk_swiftshader.so package/build/vk_swiftshader_icd.json
mkdir -p "$dest"
mv "$work/package/build/libvk_swiftshader.so" "$work/package/build/vk_swiftshader_icd.json" "$dest/"
installed || { echo "install-swiftshader: the driver files in $dest fail their checksums" >&2; exit 1; }
echo "install-swiftshader: SwiftShader installed in $dest"
