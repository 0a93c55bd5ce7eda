// `brigade devices`: every Vulkan device, what it is and what it can do.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "table.h"
#include "util/units.h"
#include "ops/matmul_tiles.h"
#include "vk/drivers.h"
#include "vk/instance.h"
#include "vk/physical.h"

namespace brigade::cli {
namespace {

std::string yes(bool b) { return b ? "yes" : "no"; }

std::string memory_summary(const vk::PhysicalInfo& d) {
  std::string s;
  for (size_t i = 0; i < d.heaps.size(); ++i) {
    if (i) s += " + ";
    s += format_bytes(d.heaps[i].size) + (d.heaps[i].device_local ? " local" : " host");
  }
  return s;
}

std::string api_string(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) +
         "." + std::to_string(VK_API_VERSION_PATCH(v));
}

// The 16-bit products into fp32 the device's matrix units list, as "fp16 16x16x16".
std::vector<std::string> matrix_products(const vk::PhysicalInfo& d) {
  std::vector<std::string> out;
  for (const vk::MatrixShape& s : d.matrix_units.shapes) out.push_back(s.name());
  return out;
}

nlohmann::json to_json(const vk::PhysicalInfo& d) {
  nlohmann::json heaps = nlohmann::json::array();
  for (auto& h : d.heaps)
    heaps.push_back({{"bytes", h.size}, {"device_local", h.device_local},
                     {"budget", h.budget ? nlohmann::json(h.budget) : nlohmann::json(nullptr)}});
  return {{"index", d.index},
          {"name", d.name},
          {"vendor", d.vendor},
          {"vendor_id", d.vendor_id},
          {"type", d.type_name()},
          {"driver_name", d.driver_name},
          {"driver_info", d.driver_info},
          {"driver_version", d.driver_version_string()},
          {"vulkan_version", api_string(d.api_version)},
          {"memory_heaps", heaps},
          {"device_memory_mapped", d.device_memory_mapped},
          {"subgroup_size", d.subgroup_size},
          {"subgroup_sizes", {d.min_subgroup_size, d.max_subgroup_size}},
          {"max_storage_buffer_range", d.max_storage_buffer_range},
          {"max_allocation_size", d.max_allocation_size},
          {"max_shared_memory", d.max_shared_memory},
          {"device_uuid", d.device_uuid_string()},
          {"driver_uuid", d.driver_uuid_string()},
          {"pci_bus", d.pci_bus.empty() ? nlohmann::json() : nlohmann::json(d.pci_bus)},
          {"external_memory_fd", d.external_memory_fd},
          {"external_memory_host", d.external_memory_host},
          {"timeline_semaphore", d.timeline_semaphore},
          {"cooperative_matrix", d.cooperative_matrix},
          {"matrix_products", matrix_products(d)},
          {"matrix_lanes", d.matrix_units.lanes},
          {"precision_auto", ops::precision_name(ops::auto_precision(d))},
          {"dedicated_transfer_queue", d.dedicated_transfer_queue}};
}

void run(bool json) {
  vk::Instance instance;
  std::vector<vk::PhysicalInfo> devices;
  for (uint32_t i = 0; i < instance.physical_devices().size(); ++i)
    devices.push_back(vk::describe(instance.physical_devices()[i], i));
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (auto& d : devices) out.push_back(to_json(d));
    std::cout << out.dump(2) << "\n";
    return;
  }
  if (devices.empty()) {
    std::printf("no Vulkan devices found (install a driver, e.g. mesa-vulkan-drivers for lavapipe)\n");
    return;
  }
  std::vector<std::vector<std::string>> rows = {{"index", "name", "vendor", "type", "driver",
                                                 "vulkan", "memory", "subgroup", "opaque-fd",
                                                 "host-ptr", "timeline", "coop-matrix"}};
  for (auto& d : devices)
    rows.push_back({std::to_string(d.index), d.name, d.vendor, d.type_name(),
                    d.driver_name + " " + d.driver_version_string() + (d.driver_info.empty() ? "" : " (" + d.driver_info + ")"),
                    api_string(d.api_version), memory_summary(d), std::to_string(d.subgroup_size),
                    yes(d.external_memory_fd), yes(d.external_memory_host),
                    yes(d.timeline_semaphore), yes(d.cooperative_matrix)});
  print_table(rows);
  std::printf("\n");
  rows = {{"index", "deviceUUID", "driverUUID", "max storage range", "max allocation"}};
  for (auto& d : devices)
    rows.push_back({std::to_string(d.index), d.device_uuid_string(), d.driver_uuid_string(),
                    format_bytes(d.max_storage_buffer_range), format_bytes(d.max_allocation_size)});
  print_table(rows);
  std::printf("\n");
  rows = {{"index", "matrix products (16-bit into fp32)", "--precision auto", "its products"}};
  for (auto& d : devices) {
    std::string listed;
    for (const std::string& s : matrix_products(d)) listed += (listed.empty() ? "" : ", ") + s;
    const ops::Precision p = ops::auto_precision(d);
    rows.push_back({std::to_string(d.index), listed.empty() ? "none" : listed, ops::precision_name(p),
                    ops::matrix_path(d, p)});
  }
  print_table(rows);
  std::printf("\nlavapipe: %s\n", vk::choose_lavapipe().why.c_str());
}

}  // namespace

void add_devices(CLI::App& app) {
  auto* cmd = app.add_subcommand("devices", "list every Vulkan device with its driver and capabilities");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON instead of a table");
  cmd->callback([json] { run(*json); });
}

}  // namespace brigade::cli
