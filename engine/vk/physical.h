// What a physical device is and can do: read once, used to pick transfer paths, to size
// kernels, and to print `brigade devices`.
#pragma once

#include <volk.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "vk/matrix_units.h"

namespace brigade::vk {

struct MemoryHeap {
  uint64_t size = 0;
  bool device_local = false;
  // What this process may allocate from the heap before allocations fail or slow down, as
  // the driver estimated it when the device was described (VK_EXT_memory_budget: the heap's
  // size less what other programs hold, a desktop's compositor on the GPU driving the
  // display among them); 0 where the device does not tell.
  uint64_t budget = 0;
  // The bytes Brigade plans against: the budget where told, else the heap's size.
  uint64_t usable() const { return budget ? std::min(budget, size) : size; }
};

struct PhysicalInfo {
  uint32_t index = 0;
  VkPhysicalDevice handle = VK_NULL_HANDLE;
  std::string name;
  uint32_t vendor_id = 0;
  std::string vendor;           // "NVIDIA", "AMD", "Intel", "Mesa", "Google", ...
  VkDriverId driver_id{};       // 0 when the device reports none
  VkPhysicalDeviceType type{};
  std::string driver_name;      // VkPhysicalDeviceDriverProperties::driverName
  std::string driver_info;      // e.g. "Mesa 22.3.6 (LLVM 15.0.6)"
  uint32_t driver_version = 0;  // raw, vendor-encoded
  uint32_t api_version = 0;
  std::array<uint8_t, VK_UUID_SIZE> device_uuid{};
  std::array<uint8_t, VK_UUID_SIZE> driver_uuid{};
  // Its PCI address, "domain:bus:device.function" in hex ("0000:03:00.0"), where the device
  // lists VK_EXT_pci_bus_info; empty elsewhere (CPU drivers). Two drivers of one card (RADV
  // beside AMDVLK, NVK beside NVIDIA's) list it twice, at one address.
  std::string pci_bus;
  std::vector<MemoryHeap> heaps;
  // The host maps the device-local memory Brigade allocates (vk::maps_device_memory: CPU
  // drivers, integrated GPUs): uploads and downloads are copies; otherwise they go through
  // staging buffers (vk::upload). BRIGADE_DEVICE_MEMORY=unmapped makes any device one whose
  // device memory the host does not map, as a discrete GPU's, to test those paths.
  bool device_memory_mapped = false;
  uint32_t subgroup_size = 0;        // the driver's default for compute
  // The subgroup sizes the device runs shaders in: VK_EXT_subgroup_size_control's range, or the
  // default alone where it does not list one. With subgroup size control for compute, a
  // pipeline may require any power of two in [min_subgroup_size, max_subgroup_size].
  bool subgroup_size_control = false;
  uint32_t min_subgroup_size = 0, max_subgroup_size = 0;
  // A compute pipeline may require full subgroups (computeFullSubgroups); one that requires a
  // subgroup size has at most that size times max_compute_workgroup_subgroups invocations a
  // workgroup (0: not listed).
  bool full_subgroups = false;
  uint32_t max_compute_workgroup_subgroups = 0;
  bool subgroup_arithmetic = false;  // subgroupAdd & co. in compute shaders (reductions need it)
  uint64_t max_storage_buffer_range = 0;
  uint64_t min_storage_offset_alignment = 0;  // a bound view's offset must be a multiple
  uint64_t max_allocation_size = 0;
  uint32_t max_shared_memory = 0;
  uint32_t max_workgroup_invocations = 0;
  std::array<uint32_t, 3> max_workgroup_count{65535, 65535, 65535};  // a dispatch's groups along x, y, z
  uint32_t max_push_constants = 0;
  float timestamp_period_ns = 0;
  int compute_family = -1;           // the queue family Brigade computes on; -1: none
  uint32_t timestamp_valid_bits = 0; // of that family's timestamps (36 to 64; 0: none)
  bool timestamps = false;           // its queue writes timestamps
  // Its timestamp counter and the host's CLOCK_MONOTONIC (std::chrono::steady_clock's) can
  // be read together (VK_EXT_calibrated_timestamps), with no submission.
  bool calibrated_timestamps = false;
  bool dedicated_transfer_queue = false;
  // Capabilities that decide boundary-transfer paths and kernel variants.
  bool external_memory_fd = false;   // VK_KHR_external_memory_fd (opaque fd)
  bool external_memory_host = false; // VK_EXT_external_memory_host (host-pointer import)
  bool timeline_semaphore = false;
  bool cooperative_matrix = false;   // VK_KHR_ or VK_NV_cooperative_matrix
  MatrixUnits matrix_units;          // the 16-bit products it lists (VK_KHR_cooperative_matrix)
  uint64_t min_imported_host_pointer_alignment = 0;
  // The driver compiles specialization constants as values read at run time (SwiftShader), so
  // each kernel's constants are folded into its SPIR-V on the host first (vk/specialize.h).
  bool specialize_on_host = false;

  std::string type_name() const;
  std::string driver_version_string() const;
  std::string device_uuid_string() const;
  std::string driver_uuid_string() const;
  bool has_extension(const std::string& name) const;

  std::vector<std::string> extensions;
};

PhysicalInfo describe(VkPhysicalDevice device, uint32_t index);

// The subgroup sizes a compute pipeline may require on this device, smallest first: every
// power of two in [min, max] with subgroup size control, else only the default.
std::vector<uint32_t> subgroup_sizes(const PhysicalInfo& device);

// A device as the command line names it: its index from `brigade devices`, a unique
// case-insensitive part of its name, or a prefix of its deviceUUID (dashes optional).
// Anything else (unknown, or matching several devices) is a UserError that starts with
// `what` and lists the devices.
uint32_t find_device(const std::vector<PhysicalInfo>& devices, const std::string& spec,
                     const std::string& what);
// The indices of the devices whose deviceUUID is `uuid` whole (case aside), in list order.
std::vector<uint32_t> devices_with_uuid(const std::vector<PhysicalInfo>& devices, const std::string& uuid);
// "0 NAME (UUID); 1 ...", or "none": the devices as refusals list them.
std::string device_listing(const std::vector<PhysicalInfo>& devices);

std::string uuid_string(const std::array<uint8_t, VK_UUID_SIZE>& uuid);

// Whether two entries of the list are one GPU listed by two drivers: both have a PCI address
// and it is the same. An entry without one is only itself.
bool same_gpu(const PhysicalInfo& a, const PhysicalInfo& b);
// The first entry of `devices` that is the same GPU as device `index` (same_gpu), else `index`:
// the one key of every entry of a card, for what the entries share (its memory, its compute).
uint32_t gpu_of(const std::vector<PhysicalInfo>& devices, uint32_t index);

// The devices to take when none are named: every one but CPU drivers (those only when nothing
// else is there) and integrated GPUs where a discrete one is there, each GPU once: of the
// entries of one card, a driver not on the second-choice list (AMDVLK and AMD's proprietary
// driver, which AMD no longer ships for Linux, behind RADV; Mesa's NVK behind NVIDIA's
// driver), else the first listed. `left_out` says, a line each, which entry was left out and
// why, but for CPU drivers.
struct DefaultDevices {
  std::vector<uint32_t> indices;
  std::vector<std::string> left_out;
};
DefaultDevices default_devices(const std::vector<PhysicalInfo>& devices);

}  // namespace brigade::vk
