#!/usr/bin/env bash
# tools/compile-shader.sh's cache (ctest "tools:"): a second compile of a variant takes the
# first one's words and includes without compiling; an edit to the shader or to a file it
# could include compiles again; a cache that cannot be read or written leaves it to compile.
#   tests/tools/shader_cache_test.sh TOOL GLSLC
set -euo pipefail
# A failure inside $(...) stops that substitution too (bash clears -e there otherwise).
shopt -s inherit_errexit
tool=$1 real_glslc=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/shaders"
# A compiler that counts its runs.
printf '#!/bin/sh\necho run >>"%s/runs"\nexec "%s" "$@"\n' "$tmp" "$real_glslc" >"$tmp/glslc"
chmod +x "$tmp/glslc"
cat >"$tmp/shaders/k.comp" <<'SHADER'
#version 450
#extension GL_GOOGLE_include_directive : require
#include "value.glsl"
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer B { float x[]; };
void main() { x[0] = VALUE; }
SHADER
echo '#define VALUE 1.0' >"$tmp/shaders/value.glsl"

fail() { echo "shader_cache_test: $*" >&2; exit 1; }
runs() { [ -f "$tmp/runs" ] && wc -l <"$tmp/runs" || echo 0; }
# compile OUT [CACHE]: one variant with a define, into $tmp/OUT; prints the compiler's runs, or
# nothing where the tool failed (so that no count compares equal), having said so.
compile() {
  rm -f "$tmp/runs"
  local status=0
  "$tool" "${2-$tmp/cache}" tools-v1 "$tmp/$1" "$tmp/shaders/k.comp" -DUNUSED=1 -- "$tmp/glslc" || status=$?
  [ $status = 0 ] || fail "compile-shader.sh exited $status making $1"
  runs
}

[ "$(compile a.inc)" = 1 ] || fail "a cold cache did not compile"
grep -q "value.glsl" "$tmp/a.inc.d" || fail "the depfile misses the include: $(cat "$tmp/a.inc.d")"
[ "$(compile b.inc)" = 0 ] || fail "the same variant compiled again"
cmp -s "$tmp/a.inc" "$tmp/b.inc" || fail "a hit gave other words"
[ "$(sed 's/^[^:]*://' "$tmp/a.inc.d")" = "$(sed 's/^[^:]*://' "$tmp/b.inc.d")" ] || fail "a hit gave other includes"
grep -q "^$tmp/b.inc:" "$tmp/b.inc.d" || fail "a hit's depfile names another output: $(cat "$tmp/b.inc.d")"

echo '#define VALUE 2.0' >"$tmp/shaders/value.glsl"
[ "$(compile c.inc)" = 1 ] || fail "an edited include did not compile again"
cmp -s "$tmp/a.inc" "$tmp/c.inc" && fail "an edited include gave the same words"
echo '#define VALUE 1.0' >"$tmp/shaders/value.glsl"
[ "$(compile d.inc)" = 0 ] || fail "the include as it was compiled again"
cmp -s "$tmp/a.inc" "$tmp/d.inc" || fail "the include as it was gave other words"
# An edit that changes the words (glslc -O drops a comment's).
sed -i 's/x\[0\] = VALUE;/x[0] = VALUE * 3.0;/' "$tmp/shaders/k.comp"
[ "$(compile e.inc)" = 1 ] || fail "an edited shader did not compile again"
cmp -s "$tmp/a.inc" "$tmp/e.inc" && fail "an edited shader gave the same words"

rm -f "$tmp"/cache/*.deps
[ "$(compile f.inc)" = 1 ] || fail "an entry without its includes was taken"
[ "$(compile g.inc /dev/null/cache)" = 1 ] || fail "a cache that cannot be made stopped the compile"
cmp -s "$tmp/f.inc" "$tmp/g.inc" || fail "without a cache the words differ"
[ "$(compile h.inc '')" = 1 ] || fail "no cache did not compile"
# Every compile of the edited shader, through the cache or not, gave the words of one without it.
for out in e f g; do cmp -s "$tmp/$out.inc" "$tmp/h.inc" || fail "$out.inc's words differ from a compile without a cache"; done
echo "shader_cache_test: hits, misses and a cache out of reach as expected"
