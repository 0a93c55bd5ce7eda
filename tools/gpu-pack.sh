#!/usr/bin/env bash
# Packs what tools/gpu-check.sh needs on a bare machine with a GPU into gpu-pack/ (ignored by
# git), beside what ../shared/tools/gpu-carry.sh puts in .gl/ (the Vulkan loader, the glvnd
# libraries, Brigade's own libraries):
#   build.tar.xz   the build's brigade and test binaries, stripped, unpacked there at the path
#                  they were built at (the cli suite runs the brigade binary it was built with)
#   vvl.tar.xz     Debian unstable's validation layer and loader from .drivers/unstable
#                  (tools/coopmat-check.sh makes it), the manifest pointing at the library
#                  beside it: Debian 12's layer (1.3.239) predates cooperative matrices and
#                  fails every case on a device that enables them, and Debian 12's loader
#                  refuses the newer layer's VK_EXT_layer_settings; unstable's need glibc 2.38,
#                  which the GPU machine has
#   text.gz        the GPT presets' text (jargon-text), which that machine lacks
#   fashion-mnist/ with --data: Fashion-MNIST (dataset-fashion-mnist, 30 MB), which the io and
#                  cli suites read at its Debian path; run.sh puts it there where that machine
#                  lacks it. Only the suite part needs it, and with it the pack, .gl and the
#                  checkout came to 63 MiB
#   run.sh         unpacks all of it and runs tools/gpu-check.sh OUT PARTS with the GPU's
#                  driver, the newer layer where it loads, and the text
#   tools/gpu-pack.sh [--data] [BUILD_DIR]          default build/
# Then, on that machine, from the checkout's root, with .gl and gpu-pack carried:
#   source .gl/setup.sh; gpu-pack/run.sh "$OUT" matrix,gpt,suite
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
data=0
[ "${1:-}" = "--data" ] && data=1 && shift
build=$(cd "${1:-$root/build}" && pwd)
out=$root/gpu-pack
cd "$root"
grep -qx '/gpu-pack/' .git/info/exclude 2>/dev/null || printf '/gpu-pack/\n' >> .git/info/exclude
rm -rf "$out" && mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mkdir -p "$tmp/build/tests"
cp "$build/brigade" "$tmp/build/"
for t in pipeline kernels cli model io vk; do cp "$build/tests/test_$t" "$tmp/build/tests/"; done
strip "$tmp/build/brigade" "$tmp/build/tests/"*
tar cf - -C "$tmp/build" . | xz -T2 -6 > "$out/build.tar.xz"
echo "$build" > "$out/build-path"

layer=$root/.drivers/unstable/usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so
manifest=$root/.drivers/unstable/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json
if [ -f "$layer" ] && [ -f "$manifest" ]; then
  mkdir -p "$tmp/vvl"
  cp "$layer" "$tmp/vvl/"
  # Its loader too: Debian 12's (1.3.239) refuses VK_EXT_layer_settings, which the layer lists.
  cp -L "$root/.drivers/unstable/usr/lib/x86_64-linux-gnu/libvulkan.so.1" "$tmp/vvl/"
  # A bare library name is searched on the system's paths, where Debian 12's layer lies.
  sed 's#"library_path": "libVkLayer#"library_path": "./libVkLayer#' "$manifest" > "$tmp/vvl/VkLayer_khronos_validation.json"
  tar cf - -C "$tmp" vvl | xz -T2 -6 > "$out/vvl.tar.xz"
else
  echo "gpu-pack: no unstable userland in .drivers/unstable (tools/coopmat-check.sh --prepare): the check will use Debian 12's layer" >&2
fi
cp /usr/share/doc/jargon-text/jargon.txt.gz "$out/text.gz"
[ $data = 1 ] && cp -r /usr/share/datasets/fashion-mnist "$out/fashion-mnist"

cat > "$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# On the GPU machine, after `source .gl/setup.sh`: run.sh OUTDIR [PARTS] (tools/gpu-check.sh's).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cat "$here/build-path")
mkdir -p "$build" && tar xJf "$here/build.tar.xz" -C "$build"
if [ -f "$here/vvl.tar.xz" ]; then
  tar xJf "$here/vvl.tar.xz" -C /tmp
  # (grep -q would stop reading at the first match and ldd's SIGPIPE fail the pipeline)
  if ldd /tmp/vvl/libVkLayer_khronos_validation.so /tmp/vvl/libvulkan.so.1 2>&1 | grep 'not found' >/dev/null; then
    echo "run.sh: unstable's validation layer and loader do not load here; Debian 12's run the suite"
  else
    export VK_LAYER_PATH=/tmp/vvl LD_LIBRARY_PATH=/tmp/vvl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
fi
datasets=/usr/share/datasets/fashion-mnist
if [ ! -e "$datasets" ] && [ -d "$here/fashion-mnist" ]; then
  mkdir -p "$(dirname "$datasets")" && cp -r "$here/fashion-mnist" "$datasets"
fi
export BUILD=$build GPU=${GPU:-NVIDIA} TEXT=$here/text.gz
# What comes back from the machine is a few files (at most 8): the check writes into a folder
# of its own, its summary and log copied into OUTDIR as it goes (so that a run stopped at the
# call's limit still returns them), the rest packed into OUTDIR/rest.tar.gz at the end.
dest=${1:?run.sh OUTDIR [PARTS]}
shift
work=/tmp/gpu-check-out
rm -rf "$work" && mkdir -p "$dest" "$work"
"$here/../tools/gpu-check.sh" "$work" "$@" &
check=$!
copy() { for f in summary.txt log.txt; do [ -f "$work/$f" ] && cp "$work/$f" "$dest/$f"; done; }
while kill -0 $check 2>/dev/null; do copy; sleep 5; done
wait $check
rc=$?
copy
(cd "$work" && tar czf "$dest/rest.tar.gz" --exclude=summary.txt --exclude=log.txt .)
exit $rc
RUN
chmod +x "$out/run.sh"
du -sh "$out" .gl 2>/dev/null || du -sh "$out"
# What goes to the machine: the pack, .gl and the checkout's tracked files.
total=$(( $(du -sb "$out" | cut -f1) + $(du -sb .gl 2>/dev/null | cut -f1 || echo 0) +
          $(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1) ))
echo "gpu-pack: $((total >> 20)) MiB with .gl and the tracked files"
[ $total -le $((60 << 20)) ] || echo "gpu-pack: warning: over 60 MiB to carry (leave out --data?)" >&2
echo "ready: carry .gl and gpu-pack; on the machine: source .gl/setup.sh; gpu-pack/run.sh \"\$OUT\" PARTS"
