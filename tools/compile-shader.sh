#!/usr/bin/env bash
# Compiles one shader variant into the SPIR-V words the engine embeds (cmake/shaders.cmake runs
# it for each variant): glslc, or for a cooperative-matrix variant glslang followed by its
# spirv-val. OUT gets the words as C array elements and OUT.d the files the shader includes.
#
# Through a cache that every build directory of the checkout shares (CACHE, empty for none):
# the optimized and sanitized builds compile the same variants, and the second takes them
# from the first. An entry's key is the variant's command line, the compiler's
# and validator's versions, this script (its flags), and the bytes of the shader and of every
# other file in its directory (its includes come from there only), so any edit misses.
# Entries are deleted 30 days after they were made; a build that needs one again compiles it
# again.
#   tools/compile-shader.sh CACHE TOOLS_ID OUT SHADER [DEFINE...] -- GLSLC
#   tools/compile-shader.sh CACHE TOOLS_ID OUT SHADER [DEFINE...] -- GLSLANG SPIRV_VAL
# TOOLS_ID: the compiler's and validator's versions, as the build found them.
set -euo pipefail
shopt -s extglob
cache=$1 tools_id=$2 out=$3 shader=$4
shift 4
defines=()
while [ "$1" != -- ]; do defines+=("$1"); shift; done
shift
compiler=$1 validator=${2:-}
dir=${shader%/*}

compile() {
  if [ -z "$validator" ]; then
    "$compiler" --target-env=vulkan1.2 -O -Werror -mfmt=num -I "$dir" "${defines[@]}" \
      -MD -MF "$out.d" -o "$out" "$shader"
  else
    "$compiler" --quiet --target-env vulkan1.2 -I"$dir" "${defines[@]}" --depfile "$out.d" -o "$out.spv" "$shader"
    "$validator" --target-env vulkan1.2 "$out.spv"
    # The validated words as C array elements, without compiling again.
    od -An -v -tu4 "$out.spv" | tr -s ' ' '\n' | sed -e '/^$/d' -e 's/$/,/' >"$out"
  fi
}

if [ -z "$cache" ]; then compile; exit 0; fi
# Few processes: a hit costs about as much as starting them.
read -r key _ < <(printf '%s\n' "$tools_id" "$compiler" "$validator" "${shader##*/}" "${defines[@]}" |
                  cat - "$0" "$shader" "$dir"/!(*.comp) 2>/dev/null | sha256sum)
entry=$cache/$key
# A hit; an entry that cannot be read (a prune in another build took it) is compiled instead.
if [ -f "$entry.inc" ] && read -r deps 2>/dev/null <"$entry.deps" && cp "$entry.inc" "$out" 2>/dev/null; then
  printf '%s: %s\n' "$out" "$deps" >"$out.d"
  exit 0
fi
compile
# The includes, without the depfile's target (which this entry's next user replaces).
deps=$(sed -e '1s/^[^:]*: *//' "$out.d" | tr -d '\\\n')
printf '%s: %s\n' "$out" "$deps" >"$out.d"
# Storing is best effort (a read-only checkout, a full disk: the build goes on without it).
# Written beside, then renamed: builds running at once never read half an entry.
store() {
  mkdir -p "$cache" && tmp=$(mktemp "$entry.XXXXXX") || return 0
  { cp "$out" "$tmp" && mv -f "$tmp" "$entry.inc" && printf '%s\n' "$deps" >"$tmp" && mv -f "$tmp" "$entry.deps"; } ||
    rm -f "$tmp"
  find "$cache" -maxdepth 1 -type f -name '*.inc' -mtime +30 -exec sh -c 'rm -f "$1" "${1%.inc}.deps"' _ {} \;
}
store 2>/dev/null || true
