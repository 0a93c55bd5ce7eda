// Memory seen by two devices: how boundary activations cross between pipeline stages
// without a copy through the host.
//   opaque fd    - devices of one driver (same deviceUUID and driverUUID): memory exported
//                  by one device as a file descriptor and imported by the other.
//   host pointer - devices of different drivers or vendors: one page-aligned host
//                  allocation imported into both (VK_EXT_external_memory_host).
// Both sides' buffers are shared (Buffer::shared): a recording that touches one takes it from
// VK_QUEUE_FAMILY_EXTERNAL first (VK_QUEUE_FAMILY_FOREIGN_EXT between drivers where the
// device lists VK_EXT_queue_family_foreign) and gives it back when it ends (vk::Commands).
#pragma once

#include <memory>
#include <string>

#include "vk/buffer.h"
#include "vk/device.h"

namespace brigade::vk {

struct SharedBuffer {
  std::shared_ptr<void> host;  // the host allocation behind a host-pointer share; freed last
  Buffer first, second;        // the same bytes on each device
};


bool can_share_fd(const Device& a, const Device& b);
bool can_share_host(const Device& a, const Device& b);

// Allocates `bytes` on `exporter`, exports it as an opaque fd and imports it on `importer`,
// with the exporter's memory type: refused (VulkanError) where the importer's buffer cannot
// take that type or size.
SharedBuffer share_fd(Device& exporter, Device& importer, uint64_t bytes, Category category,
                      const std::string& name, Charge charge = Charge::Counted);
// Why an opaque-fd payload of memory type `type` and `size` bytes cannot back a buffer with
// the importer's requirements, or "".
std::string fd_import_problem(uint32_t type, uint64_t size, const VkMemoryRequirements& importer);
// One host allocation (rounded up to both devices' import alignment) imported into both.
SharedBuffer share_host(Device& a, Device& b, uint64_t bytes, Category category,
                        const std::string& name, Charge charge = Charge::Counted);

}  // namespace brigade::vk
