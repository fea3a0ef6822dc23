// The emulated devices' files (device_files.h): the uverbs node, and the GID
// attributes rxe has in sysfs (types/<i>: "RoCE v2", ndevs/<i>: the netdev).
#include "verbs_shim/device_files.h"

#include <cstring>
#include <string_view>

#include "emu/transport/link_mtu.h"
#include "verbs_shim/device_table.h"

namespace rocelab::verbs_shim {
namespace {

constexpr std::string_view kDev = "/dev/infiniband/";
constexpr std::string_view kSys = "/sys/class/infiniband/";

// Removes `prefix` from the front of s; false when s does not start with it.
bool eat(std::string_view& s, std::string_view prefix) {
  if (s.substr(0, prefix.size()) != prefix) return false;
  s.remove_prefix(prefix.size());
  return true;
}

// The part of s up to the next '/' (all of s without one), removed from s with the '/'.
std::string_view next_part(std::string_view& s) {
  const size_t slash = s.find('/');
  const std::string_view part = s.substr(0, slash);
  s = slash == std::string_view::npos ? std::string_view{} : s.substr(slash + 1);
  return part;
}

DeviceFile missing() { return {DeviceFile::Kind::kMissing, {}}; }
DeviceFile directory() { return {DeviceFile::Kind::kDirectory, {}}; }

// /sys/class/infiniband/<name>/<rest>. The port's GID table has one entry,
// index 0 (the device address's RoCE v2 GID): rxe lists the others too but
// fails to read them, so here they do not exist.
DeviceFile sysfs(EmuDevice& d, std::string_view rest) {
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.empty()) return directory();
  if (next_part(rest) != "ports") return missing();
  if (rest.empty()) return directory();
  if (next_part(rest) != "1") return missing();
  if (rest.empty()) return directory();
  if (next_part(rest) != "gid_attrs") return missing();
  if (rest.empty()) return directory();
  const std::string_view attr = next_part(rest);
  if (attr != "types" && attr != "ndevs") return missing();
  if (rest.empty()) return directory();
  if (rest != "0") return missing();
  if (attr == "types") return {DeviceFile::Kind::kFile, "RoCE v2\n"};
  const DeviceTable& table = DeviceTable::get();
  auto addr = d.runtime.address(d.cfg, table.config());
  if (!addr) return missing();
  auto netdev = emu::netdev_of(*addr);
  if (!netdev) return missing();  // an address on no interface: no netdev, as for rxe unbound
  return {DeviceFile::Kind::kFile, netdev->name + "\n"};
}

}  // namespace

DeviceFile device_file(const char* path) noexcept {
  if (path == nullptr) return {};
  std::string_view p(path);
  const bool dev = eat(p, kDev);
  if (!dev && !eat(p, kSys)) return {};
  try {
    const std::string_view name = next_part(p);
    for (EmuDevice& d : DeviceTable::get().devices()) {
      if (dev && name == d.abi.ibdev.dev_name && p.empty()) return {DeviceFile::Kind::kCharDevice, {}};
      if (!dev && name == d.cfg.name) return sysfs(d, p);
    }
  } catch (...) {  // no memory for the content: as if the file were not there
    return missing();
  }
  return {};
}

}  // namespace rocelab::verbs_shim
