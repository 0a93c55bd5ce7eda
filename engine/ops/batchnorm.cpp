#include "ops/batchnorm.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "shaders/norm.h"
#include "ops/launch_geometry.h"
#include "util/error.h"

namespace brigade::ops {
namespace {

// x and y hold (N, C, HW) values as stored; a 16-bit y is written a word at a time, two
// neighbours of one plane.
void expect_tensors(vk::View x, vk::View y, uint32_t N, uint32_t C, uint32_t HW, Formats f, const char* pass) {
  const uint64_t n = uint64_t(N) * C * HW;
  BRIGADE_EXPECT_BYTES(x, stored_bytes(n, f.x), std::string("batchnorm ") + pass + " input");
  BRIGADE_EXPECT_BYTES(y, stored_bytes(n, f.y), std::string("batchnorm ") + pass + " output");
  BRIGADE_EXPECT(!is_half(f.y) || HW % 2 == 0, std::string("batchnorm ") + pass + " on a 16-bit y needs H * W even");
}

// The values of a plane of HW a lane of the training kernels takes at a time
// (shaders/channel_walk.glsl): a quad where HW is a multiple of 4 and every view 16-byte
// aligned, a pair where HW is even, else one.
uint32_t group(uint32_t HW, std::initializer_list<vk::View> views) {
  return quads(HW, views) ? 4 : HW % 2 == 0 ? 2 : 1;
}

// The build for these formats, and its constants after the workgroup width (id 0).
const vk::Kernel& kernel(vk::Device& dev, const char* name, vk::Specialization spec, Precision a, Precision b) {
  return dev.kernel(format_kernel(name, {a, b}), spec.set(1, uint32_t(a)).set(2, uint32_t(b)));
}

}  // namespace

void batchnorm_forward_train(vk::Commands& cmd, vk::View x, vk::View weight, vk::View bias,
                             vk::View y, vk::View mean, vk::View rstd, vk::View stats,
                             uint32_t N, uint32_t C, uint32_t HW, bool accumulate, float eps, Formats f) {
  if (uint64_t(N) * HW < 2)
    throw UserError("batchnorm: training needs more than 1 value per channel, got N=" +
                    std::to_string(N) + " x H*W=" + std::to_string(HW) +
                    " (use a larger micro-batch)");
  expect_tensors(x, y, N, C, HW, f, "forward");
  vk::Device& dev = cmd.device();
  const uint32_t g = group(HW, {x, y});
  cmd.dispatch(kernel(dev, "batchnorm_forward_train", reduction_spec(dev, uint64_t(N) * HW / g).set(3, g), f.x, f.y),
               {x, weight, bias, y, mean, rstd, stats},
               shaders::BatchNormPush{N, C, HW, eps, accumulate ? 1u : 0u}, capped_groups(C, 1));
}

std::vector<double> batchnorm_stats_to_sums(std::span<const float> words) {
  std::vector<double> sums;
  for (size_t c = 0; c + 2 < words.size(); c += 3) {
    uint32_t count = 0;
    std::memcpy(&count, &words[c], sizeof count);
    const double n = count, mean = words[c + 1], m2 = words[c + 2];
    sums.insert(sums.end(), {n, n * mean, m2 + n * mean * mean});
  }
  return sums;
}

void batchnorm_stats_from_sums(std::span<const double> sums, std::span<float> words) {
  for (size_t c = 0; c + 2 < sums.size(); c += 3) {
    const double n = sums[c], mean = n > 0 ? sums[c + 1] / n : 0.0;
    const uint32_t count = uint32_t(n);
    std::memcpy(&words[c], &count, sizeof count);
    words[c + 1] = float(mean);
    words[c + 2] = float(std::max(0.0, sums[c + 2] - n * mean * mean));
  }
}

void batchnorm_update_running(vk::Commands& cmd, vk::View stats, vk::View running_mean,
                              vk::View running_var, uint32_t C, float momentum) {
  if (C == 0) return;
  cmd.dispatch(cmd.device().kernel("batchnorm_update_running"), {stats, running_mean, running_var},
               shaders::BatchNormUpdatePush{C, momentum}, {vk::groups_for(C, BRIGADE_WG_NORM)});
}

void batchnorm_forward_eval(vk::Commands& cmd, vk::View x, vk::View weight, vk::View bias,
                            vk::View running_mean, vk::View running_var, vk::View y,
                            uint32_t N, uint32_t C, uint32_t HW, float eps, Formats f) {
  const uint64_t n = uint64_t(N) * C * HW;
  if (n == 0) return;
  expect_tensors(x, y, N, C, HW, f, "evaluation forward");
  // A workgroup a plane.
  cmd.dispatch(kernel(cmd.device(), "batchnorm_forward_eval", vk::Specialization().set(3, group(HW, {x, y})), f.x, f.y),
               {x, weight, bias, running_mean, running_var, y},
               shaders::BatchNormPush{N, C, HW, eps, 0u}, capped_groups(uint64_t(N) * C, 1));
}

void batchnorm_backward(vk::Commands& cmd, vk::View dy, vk::View x, vk::View weight,
                        vk::View mean, vk::View rstd, vk::View dx, vk::View dweight,
                        vk::View dbias, uint32_t N, uint32_t C, uint32_t HW, Precision x_format,
                        Precision dx_round) {
  if (uint64_t(N) * HW == 0 || C == 0) return;
  BRIGADE_EXPECT_BYTES(x, stored_bytes(uint64_t(N) * C * HW, x_format), "batchnorm backward input");
  vk::Device& dev = cmd.device();
  const uint32_t g = group(HW, {dy, x, dx});
  cmd.dispatch(kernel(dev, "batchnorm_backward", reduction_spec(dev, uint64_t(N) * HW / g).set(3, g), x_format, dx_round),
               {dy, x, weight, mean, rstd, dx, dweight, dbias},
               shaders::BatchNormPush{N, C, HW, 0.0f, 0u}, capped_groups(C, 1));
}

}  // namespace brigade::ops
