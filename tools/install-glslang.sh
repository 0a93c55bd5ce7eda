#!/usr/bin/env bash
# Fetches a shader compiler that knows cooperative matrices (GL_KHR_cooperative_matrix, with
# fp16 and GL_EXT_bfloat16 elements) and a SPIR-V validator that knows their capabilities into
# .toolchain/ of this checkout: glslang 16 and spirv-tools 2026 from Debian unstable. Debian
# 12's glslc, glslang and spirv-val predate the extension. Unstable's programs need glibc
# 2.38, so its libc, libstdc++ and libgcc come with them and .toolchain/bin/glslang and
# .toolchain/bin/spirv-val start them through that libc's own loader; nothing outside the
# checkout changes (tools/debian-fetch.sh). cmake/shaders.cmake builds the matrix kernels'
# cooperative-matrix variants with them.
#   tools/install-glslang.sh           installs, or checks what is installed
#   tools/install-glslang.sh --force   fetches again
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest=$root/.toolchain
suite=unstable
packages=(glslang-tools spirv-tools libc6 libstdc++6 libgcc-s1)
# The oldest versions known to compile and validate fp16 and bf16 cooperative matrices.
min_glslang=16.6
min_spirv_tools=2026.4~rc2

installed() {
  [ -x "$dest/bin/glslang" ] && [ -x "$dest/bin/spirv-val" ] && [ -f "$dest/SHA256SUMS" ] &&
    (cd "$dest" && sha256sum --check --status SHA256SUMS)
}

if [ "${1:-}" != "--force" ] && installed; then
  echo "install-glslang: $(cat "$dest/VERSION") present in $dest"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Where what it fetches cannot be had: a warning, and the build goes on without it; a failure
# under BRIGADE_REQUIRE_FETCH=1 (CI, where going on without it would test less or slower).
give_up() {
  echo "$*" >&2
  [ "${BRIGADE_REQUIRE_FETCH:-0}" != 1 ] || { echo "install-glslang: BRIGADE_REQUIRE_FETCH=1: stopping" >&2; exit 1; }
  exit 0
}
source "$root/tools/debian-fetch.sh"
echo "install-glslang: fetching ${packages[*]} from $suite"
if ! debian_fetch "$suite" "$work/deb" "${packages[@]}"; then
  give_up "install-glslang: could not fetch the compiler; the cooperative-matrix kernels will not be built"
fi
version_of() { dpkg-deb -f "$(ls "$work"/deb/"$1"_*.deb)" Version; }
at_least() { dpkg --compare-versions "$1" ge "$2"; }
glslang_version=$(version_of glslang-tools)
spirv_version=$(version_of spirv-tools)
if ! at_least "$glslang_version" "$min_glslang" || ! at_least "$spirv_version" "$min_spirv_tools"; then
  give_up "install-glslang: $suite has glslang $glslang_version and spirv-tools $spirv_version, older than" \
       "$min_glslang and $min_spirv_tools; the cooperative-matrix kernels will not be built"
fi

# Made beside the installed one, which it replaces only once it has passed its probe.
new=$dest.new
rm -rf "$new"
mkdir -p "$new/bin"
for deb in "$work"/deb/*.deb; do dpkg-deb -x "$deb" "$new/root"; done
rm -rf "$new/root/usr/share" "$new/root/etc" "$new/root/var"
lib=$(cd "$new/root" && ls -d usr/lib/*-linux-gnu | head -1)
for tool in glslang spirv-val; do
  cat >"$new/bin/$tool" <<WRAPPER
#!/bin/sh
# $tool from Debian $suite, run through that suite's libc (tools/install-glslang.sh).
root=\$(dirname "\$(readlink -f "\$0")")/../root
exec "\$root/$lib/ld-linux-x86-64.so.2" --library-path "\$root/$lib" "\$root/usr/bin/$tool" "\$@"
WRAPPER
  chmod +x "$new/bin/$tool"
done

# A shader with both element types, compiled and validated, before anything relies on them.
cat >"$work/probe.comp" <<'PROBE'
#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_bfloat16 : require
layout(local_size_x = 32) in;
layout(binding = 0) buffer C { float c[]; };
shared float16_t h[256];
shared bfloat16_t b[256];
void main() {
  coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> ha;
  coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> hb;
  coopmat<bfloat16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> ba;
  coopmat<bfloat16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> bb;
  coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
  coopMatLoad(ha, h, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
  coopMatLoad(hb, h, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
  coopMatLoad(ba, b, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
  coopMatLoad(bb, b, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
  acc = coopMatMulAdd(ha, hb, acc);
  acc = coopMatMulAdd(ba, bb, acc);
  coopMatStore(acc, c, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
}
PROBE
if ! "$new/bin/glslang" --quiet --target-env vulkan1.2 -o "$work/probe.spv" "$work/probe.comp" ||
   ! "$new/bin/spirv-val" --target-env vulkan1.2 "$work/probe.spv"; then
  rm -rf "$new"
  give_up "install-glslang: glslang $glslang_version did not compile and validate a cooperative-matrix shader;" \
       "the cooperative-matrix kernels will not be built"
fi

echo "glslang $glslang_version, spirv-tools $spirv_version (Debian $suite)" >"$new/VERSION"
(cd "$new" && find bin root -type f -print0 | sort -z | xargs -0 sha256sum >SHA256SUMS && sha256sum VERSION >>SHA256SUMS)
rm -rf "$dest"
mv "$new" "$dest"
installed || { echo "install-glslang: the files in $dest fail their checksums" >&2; exit 1; }
echo "install-glslang: $(cat "$dest/VERSION") installed in $dest"
