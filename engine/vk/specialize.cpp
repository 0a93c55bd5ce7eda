#include "vk/specialize.h"

#include <unordered_map>

#include "util/error.h"

#ifndef BRIGADE_FOLD_ON_HOST
#define BRIGADE_FOLD_ON_HOST 0
#endif
#if BRIGADE_FOLD_ON_HOST
#include <spirv-tools/optimizer.hpp>
#endif

namespace brigade::vk {

bool folds_on_host() { return BRIGADE_FOLD_ON_HOST; }

std::vector<uint32_t> specialize([[maybe_unused]] std::span<const uint32_t> spirv, const Specialization& spec,
                                 const std::string& shader) {
#if !BRIGADE_FOLD_ON_HOST
  fail_invariant(__FILE__, __LINE__, "folding " + shader + spec.key() + ": this build has no SPIR-V optimizer");
#else
  // The shaders are built for Vulkan 1.2 (cmake/shaders.cmake).
  spvtools::Optimizer opt(SPV_ENV_VULKAN_1_2);
  std::string messages;
  opt.SetMessageConsumer([&messages](spv_message_level_t, const char*, const spv_position_t&, const char* m) {
    messages += (messages.empty() ? "" : "; ") + std::string(m);
  });
  std::unordered_map<uint32_t, std::vector<uint32_t>> values;
  for (const auto& [id, v] : spec.constants) values[id] = {v};  // a bool's 0 or 1 as well
  opt.RegisterPass(spvtools::CreateSetSpecConstantDefaultValuePass(values))
      .RegisterPass(spvtools::CreateFreezeSpecConstantValuePass())
      .RegisterPass(spvtools::CreateFoldSpecConstantOpAndCompositePass())
      .RegisterPass(spvtools::CreateUnifyConstantPass());
  std::vector<uint32_t> out;
  spvtools::OptimizerOptions options;
  options.set_run_validator(false);  // validated when built (tools/compile-shader.sh)
  BRIGADE_EXPECT(opt.Run(spirv.data(), spirv.size(), &out, options) && !out.empty(),
                 "folding the specialization constants " + spec.key() + " into " + shader + ": " + messages);
  return out;
#endif
}

}  // namespace brigade::vk
