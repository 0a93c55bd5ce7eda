#include "vk/instance.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "util/sanitizers.h"

#if BRIGADE_ASAN
#include <dlfcn.h>
#include <link.h>

#include <string>
#include <string_view>
#endif

#include "vk/check.h"
#include "vk/drivers.h"

namespace brigade::vk {
namespace {

// The layer's version, 0 where it is not installed.
uint32_t layer_version(const char* name) {
  uint32_t n = 0;
  VK_CHECK(vkEnumerateInstanceLayerProperties(&n, nullptr));
  std::vector<VkLayerProperties> layers(n);
  VK_CHECK(vkEnumerateInstanceLayerProperties(&n, layers.data()));
  for (auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return l.specVersion;
  return 0;
}

bool has_layer(const char* name) { return layer_version(name) != 0; }

bool has_extension(const char* layer, const char* name) {
  uint32_t n = 0;
  VK_CHECK(vkEnumerateInstanceExtensionProperties(layer, &n, nullptr));
  std::vector<VkExtensionProperties> exts(n);
  VK_CHECK(vkEnumerateInstanceExtensionProperties(layer, &n, exts.data()));
  for (auto& e : exts)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

std::atomic<std::size_t> g_reported{0};

#if BRIGADE_ASAN
// LeakSanitizer looks for leaks at exit, after vkDestroyInstance has let the loader close the
// drivers and layers. Memory that their globals still hold would then look leaked, allocated
// from frames nothing can name. Keeping those libraries mapped, as newer loaders do with
// VK_LOADER_DISABLE_DYNAMIC_LIBRARY_UNLOADING=1, leaves only real leaks, with their names.
void keep_vulkan_libraries_mapped() {
  std::vector<std::string> paths;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        const std::string_view path = info->dlpi_name ? info->dlpi_name : "";
        const std::string_view file = path.substr(path.rfind('/') + 1);
        if (file.starts_with("libVkLayer_") || file.starts_with("libvulkan_"))
          static_cast<std::vector<std::string>*>(out)->emplace_back(path);
        return 0;
      },
      &paths);
  for (const auto& p : paths) dlopen(p.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}
#endif

}  // namespace

bool validation_from_environment() {
  const char* v = std::getenv("BRIGADE_VALIDATION");
  return v && *v && std::strcmp(v, "0") != 0;
}

std::size_t validation_messages_reported() { return g_reported.load(); }

Instance::Instance(InstanceOptions options) : options_(options) {
  options_.validation = options_.validation || validation_from_environment();
  choose_lavapipe();  // before the loader first looks for drivers
  static const VkResult loaded = volkInitialize();
  if (loaded != VK_SUCCESS)
    throw UserError("no Vulkan loader found (libvulkan.so.1); install libvulkan1 and a driver "
                    "such as mesa-vulkan-drivers");

  const char* layer = "VK_LAYER_KHRONOS_validation";
  std::vector<const char*> layers, extensions;
  if (options_.validation) {
    if (!has_layer(layer))
      throw UserError("validation requested but VK_LAYER_KHRONOS_validation is not installed "
                      "(Debian package vulkan-validationlayers)");
    layers.push_back(layer);
  }
  debug_utils_ = has_extension(nullptr, VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  if (debug_utils_) extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  if (options_.validation && !debug_utils_)
    throw UserError("validation requested but VK_EXT_debug_utils is unavailable");

  VkValidationFeatureEnableEXT enables[] = {
      VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
  VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = enables;
  const bool sync = options_.validation && options_.sync_validation &&
                    has_extension(layer, VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
  if (sync) extensions.push_back(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
  // Layers since 1.3.290 leave the accesses of the shaders' descriptors out of synchronization
  // validation unless its shader-access heuristic is on (a layer setting, VK_EXT_layer_settings,
  // newer than Debian 12's headers): without it two dispatches writing and reading one buffer
  // with no barrier between them pass unreported.
  constexpr auto kLayerSettingsInfo = VkStructureType(1000496000);
  constexpr uint32_t kSettingBool32 = 0;
  struct LayerSetting {
    const char* layer;
    const char* name;
    uint32_t type, count;
    const void* values;
  };
  struct LayerSettingsInfo {
    VkStructureType sType;
    const void* pNext;
    uint32_t count;
    const LayerSetting* settings;
  };
  const VkBool32 on = VK_TRUE;
  const LayerSetting heuristic{layer, "syncval_shader_accesses_heuristic", kSettingBool32, 1, &on};
  LayerSettingsInfo settings{kLayerSettingsInfo, nullptr, 1, &heuristic};
  // A loader older than the extension (Debian 12's 1.3.239) refuses it even where the layer
  // lists it, so both must know it.
  const bool heuristic_setting = sync && layer_version(layer) >= VK_MAKE_API_VERSION(0, 1, 3, 290) &&
                                 volkGetInstanceVersion() >= VK_MAKE_API_VERSION(0, 1, 3, 272) &&
                                 has_extension(layer, "VK_EXT_layer_settings");
  if (heuristic_setting) extensions.push_back("VK_EXT_layer_settings");

  VkDebugUtilsMessengerCreateInfoEXT messenger{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  messenger.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                              VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messenger.pfnUserCallback = &Instance::on_message;
  messenger.pUserData = this;
  // Chained so messages from vkCreateInstance/vkDestroyInstance are caught as well.
  if (options_.validation) messenger.pNext = sync ? &features : nullptr;
  if (heuristic_setting) features.pNext = &settings;

  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "brigade";
  app.pEngineName = "brigade";
  app.apiVersion = VK_API_VERSION_1_2;
  if (volkGetInstanceVersion() < VK_API_VERSION_1_2)
    throw UserError("the Vulkan loader is older than 1.2; Brigade needs Vulkan 1.2");

  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  info.pApplicationInfo = &app;
  info.enabledLayerCount = uint32_t(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = uint32_t(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  if (options_.validation) info.pNext = &messenger;
  VK_CHECK(vkCreateInstance(&info, nullptr, &instance_));
  // Instance functions only: device functions go through each Device's own table.
  volkLoadInstanceOnly(instance_);

  if (options_.validation) {
    messenger.pNext = nullptr;
    VK_CHECK(vkCreateDebugUtilsMessengerEXT(instance_, &messenger, nullptr, &messenger_));
  }

  uint32_t n = 0;
  VK_CHECK(vkEnumeratePhysicalDevices(instance_, &n, nullptr));
  physical_.resize(n);
  VK_CHECK(vkEnumeratePhysicalDevices(instance_, &n, physical_.data()));
}

Instance::~Instance() {
#if BRIGADE_ASAN
  keep_vulkan_libraries_mapped();
#endif
  if (messenger_) vkDestroyDebugUtilsMessengerEXT(instance_, messenger_, nullptr);
  if (instance_) vkDestroyInstance(instance_, nullptr);
}

std::vector<std::string> Instance::messages() const {
  std::lock_guard lock(mutex_);
  return messages_;
}

VkBool32 Instance::on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                              VkDebugUtilsMessageTypeFlagsEXT,
                              const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  auto* self = static_cast<Instance*>(user);
  // The loader reports, as a warning, that it skipped the system's lavapipe: what
  // choose_lavapipe asked of it through VK_LOADER_DRIVERS_DISABLE, not a problem.
  if (data->pMessage && choose_lavapipe().project &&
      std::strstr(data->pMessage, "disabled by env var 'VK_LOADER_DRIVERS_DISABLE'") &&
      std::strstr(data->pMessage, "\"lvp_icd."))
    return VK_FALSE;
  const char* level = (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) ? "error" : "warning";
  std::string text = std::string("validation ") + level + ": " +
                     (data->pMessageIdName ? data->pMessageIdName : "") + ": " +
                     (data->pMessage ? data->pMessage : "");
  if (self->options_.echo_messages) std::fprintf(stderr, "%s\n", text.c_str());
  {
    std::lock_guard lock(self->mutex_);
    self->messages_.push_back(std::move(text));
  }
  self->count_.fetch_add(1);
  g_reported.fetch_add(1);
  return VK_FALSE;
}

std::vector<PhysicalInfo> Instance::describe_devices() const {
  std::vector<PhysicalInfo> out;
  for (uint32_t i = 0; i < physical_.size(); ++i) out.push_back(describe(physical_[i], i));
  return out;
}

uint32_t Instance::find_device(const std::string& spec, const std::string& what) const {
  return vk::find_device(describe_devices(), spec, what);
}

}  // namespace brigade::vk
