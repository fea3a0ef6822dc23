// `rocelab devices`: the RDMA devices a program run with `rocelab run` sees,
// in ibv_devices' layout plus where each one is. Loads the shim into this
// process (dlopen) and asks it, so the answer comes from the same code.
#include <dlfcn.h>
#include <infiniband/verbs.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include "tools/commands.h"

#undef ibv_get_device_list
#undef ibv_query_port

namespace rocelab::tools {
namespace {

struct DevicesOptions {
  std::string devices;
  std::string ip;
};

template <typename F>
F sym(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  if (!p) throw std::runtime_error(std::string("the shim lacks ") + name);
  return reinterpret_cast<F>(p);
}

std::string gid_text(const ibv_gid& g) {
  bool v4 = true;
  for (int i = 0; i < 10; ++i) v4 = v4 && g.raw[i] == 0;
  v4 = v4 && g.raw[10] == 0xff && g.raw[11] == 0xff;
  char buf[64];
  if (v4) {
    std::snprintf(buf, sizeof buf, "%u.%u.%u.%u", g.raw[12], g.raw[13], g.raw[14], g.raw[15]);
  } else {
    std::string s;
    for (int i = 0; i < 16; i += 2) {
      std::snprintf(buf, sizeof buf, "%s%02x%02x", i ? ":" : "", g.raw[i], g.raw[i + 1]);
      s += buf;
    }
    return s;
  }
  return buf;
}

int list_devices(const DevicesOptions& o) {
  if (!o.devices.empty()) setenv("ROCELAB_DEVICES", o.devices.c_str(), 1);
  if (!o.ip.empty()) setenv("ROCELAB_IP", o.ip.c_str(), 1);
  std::string path = shim_library_path().string();
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) throw std::runtime_error(std::string("cannot load the shim: ") + dlerror());

  auto get_list = sym<ibv_device** (*)(int*)>(lib, "ibv_get_device_list");
  auto free_list = sym<void (*)(ibv_device**)>(lib, "ibv_free_device_list");
  auto get_name = sym<const char* (*)(ibv_device*)>(lib, "ibv_get_device_name");
  auto get_guid = sym<__be64 (*)(ibv_device*)>(lib, "ibv_get_device_guid");
  auto open_dev = sym<ibv_context* (*)(ibv_device*)>(lib, "ibv_open_device");
  auto close_dev = sym<int (*)(ibv_context*)>(lib, "ibv_close_device");
  auto query_gid = sym<int (*)(ibv_context*, uint8_t, int, ibv_gid*)>(lib, "ibv_query_gid");
  auto query_port = sym<int (*)(ibv_context*, uint8_t, ibv_port_attr*)>(lib, "ibv_query_port");

  int n = 0;
  ibv_device** list = get_list(&n);
  if (!list) {
    std::fprintf(stderr, "rocelab devices: no device list\n");
    return 1;
  }
  std::printf("    %-16s\t%-16s\t%s\n", "device", "   node GUID", "port 1");
  std::printf("    %-16s\t%-16s\t%s\n", "------", "----------------", "------");
  int unopened = 0;
  for (int i = 0; i < n; ++i) {
    std::string where = "(cannot open)";
    if (ibv_context* ctx = open_dev(list[i])) {
      ibv_port_attr pa{};
      ibv_gid gid{};
      if (query_port(ctx, 1, &pa) == 0 && query_gid(ctx, 1, 0, &gid) == 0) {
        where = std::string(pa.state == IBV_PORT_ACTIVE ? "PORT_ACTIVE" : "PORT_NOT_ACTIVE") + ", " +
                (pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand") +
                ", MTU " + std::to_string(128 << pa.active_mtu) + ", GID[0] " + gid_text(gid);
      }
      close_dev(ctx);
    } else {
      ++unopened;  // the shim said why on stderr (e.g. the address is not this host's)
    }
    std::printf("    %-16s\t%016llx\t%s\n", get_name(list[i]),
                static_cast<unsigned long long>(be64toh(get_guid(list[i]))), where.c_str());
  }
  free_list(list);
  return unopened == 0 ? 0 : 1;  // a device that cannot be opened is an error
}

}  // namespace

void register_devices(CLI::App& app) {
  auto o = std::make_shared<DevicesOptions>();
  auto* cmd = app.add_subcommand("devices", "List the RDMA devices `rocelab run` programs see");
  cmd->add_option("--devices", o->devices, "emulated device names, comma-separated (default rocelab0)");
  cmd->add_option("--ip", o->ip, "IPv4 or IPv6 address per device, comma-separated (default: first free 127.0.0.x)");
  cmd->callback([o] { exit_code() = list_devices(*o); });
}

}  // namespace rocelab::tools
