// The harness itself: it must see real mistakes, or a clean run proves nothing.
#include <doctest/doctest.h>

#include <algorithm>

#include "gpu.h"
#include "vk/buffer.h"
#include "shaders/push.h"
#include "util/sanitizers.h"
#include "vk/commands.h"
#include "vk/spirv.h"

namespace vk_validation_test {

using namespace brigade;

namespace {
bool any_contains(const std::vector<std::string>& messages, const std::string& needle) {
  return std::any_of(messages.begin(), messages.end(),
                     [&](const std::string& m) { return m.find(needle) != std::string::npos; });
}
}  // namespace

TEST_CASE_FIXTURE(test::Gpu, "the harness catches an invalid Vulkan call") {
  vk::Device& dev = device();
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = 0;  // VUID-VkBufferCreateInfo-size-00912: size must be greater than 0
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  VkBuffer buffer = VK_NULL_HANDLE;
  dev.vk().vkCreateBuffer(dev.handle(), &info, nullptr, &buffer);
  if (buffer) dev.vk().vkDestroyBuffer(dev.handle(), buffer, nullptr);
  const auto messages = new_messages();
  CHECK(any_contains(messages, "VUID-VkBufferCreateInfo-size-00912"));
  accept_messages();
}

TEST_CASE_FIXTURE(test::Gpu, "synchronization validation catches a missing barrier") {
  vk::Device& dev = device();
  const uint32_t n = 1024;
  vk::Buffer x(dev, n * 4, vk::Category::Scratch, "x"), y(dev, n * 4, vk::Category::Scratch, "hazard y"),
      z(dev, n * 4, vk::Category::Scratch, "z");
  const vk::Kernel& axpy = dev.kernel("axpy");
  // y += x, then z += y, recorded by hand with no barrier between them: read after write.
  VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool_info.queueFamilyIndex = dev.compute_family();
  VkCommandPool pool;
  REQUIRE(dev.vk().vkCreateCommandPool(dev.handle(), &pool_info, nullptr, &pool) == VK_SUCCESS);
  VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  alloc.commandPool = pool;
  alloc.commandBufferCount = 1;
  VkCommandBuffer cmd;
  {
    const LeaksNotReported leaks;  // as vk::Commands does (util/sanitizers.h)
    REQUIRE(dev.vk().vkAllocateCommandBuffers(dev.handle(), &alloc, &cmd) == VK_SUCCESS);
  }
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  dev.vk().vkBeginCommandBuffer(cmd, &begin);
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 4};
  VkDescriptorPoolCreateInfo pool_desc{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pool_desc.maxSets = 2;
  pool_desc.poolSizeCount = 1;
  pool_desc.pPoolSizes = &size;
  VkDescriptorPool descriptors;
  REQUIRE(dev.vk().vkCreateDescriptorPool(dev.handle(), &pool_desc, nullptr, &descriptors) == VK_SUCCESS);
  VkDescriptorSetLayout layout = axpy.set_layout();
  VkDescriptorSetAllocateInfo set_alloc{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  set_alloc.descriptorPool = descriptors;
  set_alloc.descriptorSetCount = 1;
  set_alloc.pSetLayouts = &layout;
  VkDescriptorSet sets[2];
  const VkBuffer io[2][2] = {{x.handle(), y.handle()}, {y.handle(), z.handle()}};
  for (int k = 0; k < 2; ++k) {
    REQUIRE(dev.vk().vkAllocateDescriptorSets(dev.handle(), &set_alloc, &sets[k]) == VK_SUCCESS);
    VkDescriptorBufferInfo bufs[2] = {{io[k][0], 0, VK_WHOLE_SIZE}, {io[k][1], 0, VK_WHOLE_SIZE}};
    VkWriteDescriptorSet writes[2];
    for (uint32_t i = 0; i < 2; ++i) {
      writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      writes[i].dstSet = sets[k];
      writes[i].dstBinding = i;
      writes[i].descriptorCount = 1;
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[i].pBufferInfo = &bufs[i];
    }
    dev.vk().vkUpdateDescriptorSets(dev.handle(), 2, writes, 0, nullptr);
  }
  shaders::AxpyPush push{n, 1.0f};
  for (int k = 0; k < 2; ++k) {
    dev.vk().vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, axpy.pipeline());
    dev.vk().vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, axpy.layout(), 0, 1, &sets[k], 0, nullptr);
    dev.vk().vkCmdPushConstants(cmd, axpy.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof push, &push);
    dev.vk().vkCmdDispatch(cmd, n / BRIGADE_WG_1D, 1, 1);
  }
  dev.vk().vkEndCommandBuffer(cmd);
  dev.wait(dev.submit(cmd));
  dev.vk().vkDestroyCommandPool(dev.handle(), pool, nullptr);
  dev.vk().vkDestroyDescriptorPool(dev.handle(), descriptors, nullptr);
  const auto messages = new_messages();
  CHECK(any_contains(messages, "SYNC-HAZARD-READ-AFTER-WRITE"));
  // Objects are named in messages by their debug names.
  CHECK(any_contains(messages, "hazard y"));
  accept_messages();
}

TEST_CASE("a clean test sees no validation messages from the harness's own instance") {
  // Creating the instance and enumerating devices must itself be silent.
  const size_t before = test::instance().message_count();
  CHECK(!test::instance().physical_devices().empty());
  CHECK(test::instance().validation());
  CHECK(test::instance().message_count() == before);
}

}  // namespace vk_validation_test
