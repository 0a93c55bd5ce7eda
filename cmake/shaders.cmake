# Compiles every shaders/*.comp with glslc (Vulkan 1.2 target) and embeds the SPIR-V words
# in the engine. A shader that does not compile fails the build with glslc's file:line.
# The kernels that read and write 16-bit tensors themselves are built four times
# (shaders/formats.glsl): NAME with every format fp32 at compile time, so fp32 pipelines carry
# none of the 16-bit code, and NAME_bf16, NAME_fp16 and NAME_half with the formats as
# specialization constants, holding one 16-bit type's conversions or, for a dispatch that
# mixes the two (a stage reading another stage's boundary), both (ops::format_kernel picks).
# The matrix-unit kernels are also built with cooperative matrices (shaders/tiles.glsl), as
# NAME_coopmat_fp16 and NAME_coopmat_bf16, by a glslang that knows them
# (tools/install-glslang.sh puts one in .toolchain/), and each is checked by that
# toolchain's spirv-val. Without it those variants are left out and every device multiplies
# on its SIMT cores (ops::matrix_tiling finds no kernel).
find_program(GLSLC glslc REQUIRED)
# tools/compile-shader.sh: the compiled variants, shared by the checkout's build directories.
set(BRIGADE_SHADER_CACHE "${CMAKE_SOURCE_DIR}/.cache/shaders" CACHE PATH
    "Where compiled shader variants are kept for every build directory (empty: none)")
# The compilers' versions, part of a cached variant's key.
function(brigade_tool_version var)
  set(versions "")
  foreach(tool ${ARGN})
    execute_process(COMMAND "${tool}" --version OUTPUT_VARIABLE out ERROR_VARIABLE out)
    string(APPEND versions "${tool} ${out}")
  endforeach()
  # The installed toolchain's own checksums (a rebuilt package may keep its version string).
  if(EXISTS "${CMAKE_SOURCE_DIR}/.toolchain/SHA256SUMS")
    file(READ "${CMAKE_SOURCE_DIR}/.toolchain/SHA256SUMS" sums)
    string(APPEND versions "${sums}")
  endif()
  string(MD5 id "${versions}")
  set(${var} "${id}" PARENT_SCOPE)
endfunction()
set(BRIGADE_COOPMAT_SHADERS matmul_tiles attention_tiles_forward attention_tiles_backward_query
    attention_tiles_backward_key_value)
# Looked for at every configure (not cached, and any entry an older configure cached dropped),
# so that a toolchain installed or removed since is seen.
unset(BRIGADE_GLSLANG CACHE)
unset(BRIGADE_SPIRV_VAL CACHE)
find_program(BRIGADE_GLSLANG glslang PATHS "${CMAKE_SOURCE_DIR}/.toolchain/bin" NO_DEFAULT_PATH NO_CACHE)
find_program(BRIGADE_SPIRV_VAL spirv-val PATHS "${CMAKE_SOURCE_DIR}/.toolchain/bin" NO_DEFAULT_PATH NO_CACHE)
if(BRIGADE_GLSLANG AND BRIGADE_SPIRV_VAL)
  message(STATUS "Cooperative-matrix kernels: built with ${BRIGADE_GLSLANG}")
else()
  message(WARNING "No .toolchain/bin/glslang (tools/install-glslang.sh): the cooperative-matrix kernels are left out")
endif()
set(BRIGADE_FORMAT_SHADERS matmul matmul_shared conv2d_im2col conv2d_col2im conv2d_winograd_input conv2d_winograd_output
    maxpool2d_forward maxpool2d_backward_data relu_backward layernorm_forward layernorm_backward_data
    layernorm_backward_weight residual_forward attention_softmax attention_softmax_backward conv2d_pool_forward
    conv2d_pool_weight linear_relu_backward batchnorm_forward_train batchnorm_forward_eval batchnorm_backward
    conv2d_winograd_input_grad)

function(brigade_embed_shaders target shader_dir)
  file(GLOB shaders CONFIGURE_DEPENDS "${shader_dir}/*.comp")
  set(out_dir "${CMAKE_CURRENT_BINARY_DIR}/shaders")
  file(MAKE_DIRECTORY "${out_dir}")
  set(includes "")
  set(entries "")
  set(outputs "")
  set(builds "")
  brigade_tool_version(glslc_id ${GLSLC})
  if(BRIGADE_GLSLANG AND BRIGADE_SPIRV_VAL)
    brigade_tool_version(glslang_id ${BRIGADE_GLSLANG} ${BRIGADE_SPIRV_VAL})
  endif()
  foreach(shader ${shaders})
    get_filename_component(name "${shader}" NAME_WE)
    list(APPEND builds "${name}|${shader}|")
    if(name IN_LIST BRIGADE_FORMAT_SHADERS)
      list(APPEND builds "${name}_bf16|${shader}|-DBRIGADE_FORMATS -DBRIGADE_HALF=1"
                         "${name}_fp16|${shader}|-DBRIGADE_FORMATS -DBRIGADE_HALF=2"
                         "${name}_half|${shader}|-DBRIGADE_FORMATS")
    endif()
    if(name IN_LIST BRIGADE_COOPMAT_SHADERS AND BRIGADE_GLSLANG AND BRIGADE_SPIRV_VAL)
      list(APPEND builds "${name}_coopmat_fp16|${shader}|-DBRIGADE_COOPMAT|coopmat"
                         "${name}_coopmat_bf16|${shader}|-DBRIGADE_COOPMAT -DBRIGADE_BF16|coopmat")
    endif()
  endforeach()
  foreach(build ${builds})
    string(REPLACE "|" ";" parts "${build}")
    list(GET parts 0 name)
    list(GET parts 1 shader)
    list(LENGTH parts n)
    set(defines "")
    if(n GREATER 2)
      list(GET parts 2 defines)
      separate_arguments(defines)
    endif()
    set(inc "${out_dir}/${name}.inc")
    set(tools ${GLSLC})
    set(what glslc)
    set(tools_id ${glslc_id})
    if(n GREATER 3)  # a cooperative-matrix variant: glslang, then its spirv-val
      set(tools ${BRIGADE_GLSLANG} ${BRIGADE_SPIRV_VAL})
      set(what glslang)
      set(tools_id ${glslang_id})
    endif()
    add_custom_command(
      OUTPUT "${inc}"
      COMMAND "${CMAKE_SOURCE_DIR}/tools/compile-shader.sh" "${BRIGADE_SHADER_CACHE}" ${tools_id} "${inc}" "${shader}"
              ${defines} -- ${tools}
      DEPENDS "${shader}" "${CMAKE_SOURCE_DIR}/tools/compile-shader.sh"
      DEPFILE "${inc}.d"
      COMMENT "${what} ${name}"
      VERBATIM)
    list(APPEND outputs "${inc}")
    string(APPEND includes "const uint32_t k_${name}[] = {\n#include \"${name}.inc\"\n};\n")
    string(APPEND entries "      {\"${name}\", {k_${name}, sizeof(k_${name}) / 4}},\n")
  endforeach()
  set(registry "${out_dir}/registry.cpp")
  file(CONFIGURE OUTPUT "${registry}" CONTENT [=[
// Generated by cmake/shaders.cmake: the SPIR-V of every shader in shaders/.
#include <map>
#include <string>

#include "vk/check.h"
#include "vk/spirv.h"

namespace brigade::vk {
namespace {
@includes@

const std::map<std::string, std::span<const uint32_t>>& shaders() {
  static const std::map<std::string, std::span<const uint32_t>> built = {
@entries@  };
  return built;
}
}  // namespace

bool has_shader(const std::string& name) { return shaders().count(name) != 0; }

std::span<const uint32_t> shader_spirv(const std::string& name) {
  auto it = shaders().find(name);
  if (it == shaders().end())
    throw VulkanError("no shader named '" + name + "' is built in (shaders/" + name + ".comp)",
                      VK_ERROR_INITIALIZATION_FAILED);
  return it->second;
}

}  // namespace brigade::vk
]=] @ONLY)
  set_source_files_properties("${registry}" PROPERTIES OBJECT_DEPENDS "${outputs}")
  target_sources(${target} PRIVATE "${registry}" ${outputs})
  target_include_directories(${target} PRIVATE "${out_dir}")
endfunction()
