// libc's getifaddrs and freeifaddrs, interposed: the list libc gives, then an
// entry for each emulated device whose address no usable interface lists
// (device_netifs.h). Only in the preloaded library, as libc_files.cc.
//
// glibc's list is one allocation that its freeifaddrs frees whole; the added
// entries are one more, appended to the list's tail, and freeifaddrs frees
// both (the lists handed out with added entries are remembered by their head).
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "verbs_shim/device_netifs.h"
#include "verbs_shim/device_runtime.h"
#include "verbs_shim/libc_next.h"

using rocelab::verbs_shim::DeviceNetif;
using rocelab::verbs_shim::DeviceRuntime;

namespace {

// One added entry and the storage it points into.
struct Added {
  ifaddrs ifa;
  sockaddr_storage addr;
  sockaddr_storage mask;
  char name[IF_NAMESIZE];
};

struct Handed {
  ifaddrs* head;  // what the program got
  ifaddrs* libc;  // libc's list (nullptr when libc's was empty)
  Added* added;
};

std::mutex& handed_mu() {
  static auto* m = new std::mutex;  // never destroyed: lists may be freed at exit
  return *m;
}
std::vector<Handed>& handed() {
  static auto* v = new std::vector<Handed>;
  return *v;
}

// Set while this thread computes the added entries: what that reaches of
// getifaddrs (netdev_of) gets libc's list alone.
thread_local bool t_adding = false;

void fill(Added& a, const DeviceNetif& n) {
  std::strncpy(a.name, n.name.c_str(), IF_NAMESIZE - 1);
  a.ifa.ifa_name = a.name;
  a.ifa.ifa_flags = IFF_UP | IFF_RUNNING;
  a.ifa.ifa_addr = reinterpret_cast<sockaddr*>(&a.addr);
  a.ifa.ifa_netmask = reinterpret_cast<sockaddr*>(&a.mask);
  if (n.addr.v6) {
    auto* addr = reinterpret_cast<sockaddr_in6*>(&a.addr);
    auto* mask = reinterpret_cast<sockaddr_in6*>(&a.mask);
    addr->sin6_family = mask->sin6_family = AF_INET6;
    std::memcpy(addr->sin6_addr.s6_addr, n.addr.b.data(), 16);
    std::memset(mask->sin6_addr.s6_addr, 0xFF, 16);
  } else {
    auto* addr = reinterpret_cast<sockaddr_in*>(&a.addr);
    auto* mask = reinterpret_cast<sockaddr_in*>(&a.mask);
    addr->sin_family = mask->sin_family = AF_INET;
    std::memcpy(&addr->sin_addr, n.addr.b.data(), 4);
    std::memset(&mask->sin_addr, 0xFF, 4);
  }
}

}  // namespace

extern "C" {

int getifaddrs(ifaddrs** list) {
  const int r = ROCELAB_LIBC(getifaddrs)(list);
  if (r != 0 || t_adding || DeviceRuntime::busy_on_this_thread()) return r;
  std::vector<DeviceNetif> extra;
  t_adding = true;
  try {
    extra = rocelab::verbs_shim::device_netifs(*list);
  } catch (...) {  // no memory: libc's list alone
  }
  t_adding = false;
  if (extra.empty()) return 0;
  auto* added = static_cast<Added*>(std::calloc(extra.size(), sizeof(Added)));
  if (added == nullptr) return 0;
  for (size_t i = 0; i < extra.size(); ++i) {
    fill(added[i], extra[i]);
    if (i + 1 < extra.size()) added[i].ifa.ifa_next = &added[i + 1].ifa;
  }
  Handed h{*list, *list, added};
  if (h.libc == nullptr) {
    h.head = &added[0].ifa;
  } else {
    ifaddrs* tail = h.libc;
    while (tail->ifa_next != nullptr) tail = tail->ifa_next;
    tail->ifa_next = &added[0].ifa;
  }
  try {
    std::lock_guard lock(handed_mu());
    handed().push_back(h);
  } catch (...) {  // cannot remember it: hand out libc's list alone
    if (h.libc != nullptr) {
      ifaddrs* tail = h.libc;
      while (tail->ifa_next != &added[0].ifa) tail = tail->ifa_next;
      tail->ifa_next = nullptr;
    }
    std::free(added);
    return 0;
  }
  *list = h.head;
  return 0;
}

void freeifaddrs(ifaddrs* list) {
  Handed h{list, list, nullptr};
  {
    std::lock_guard lock(handed_mu());
    auto& v = handed();
    auto it = std::find_if(v.begin(), v.end(), [&](const Handed& x) { return x.head == list; });
    if (it != v.end()) {
      h = *it;
      *it = v.back();
      v.pop_back();
    }
  }
  std::free(h.added);
  if (h.libc != nullptr) ROCELAB_LIBC(freeifaddrs)(h.libc);
}

}  // extern "C"
