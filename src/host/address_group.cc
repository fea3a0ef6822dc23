#include "host/address_group.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "host/bounded_lock.h"
#include "host/port_holder.h"
#include "host/reuseport_program.h"
#include "host/runtime_dir.h"
#include "wire/host_probe.h"
#include "wire/packet.h"

namespace rocelab::host {
namespace {

constexpr uint32_t kTableMagic = 0x524C4754;  // "RLGT"
constexpr size_t kMaxServicesPerSlot = 16;
constexpr auto kProbeWait = std::chrono::milliseconds(300);   // for every member's answer
constexpr int kProbeRounds = 3;                                 // then probe again
constexpr auto kProbeSettle = std::chrono::milliseconds(2);    // after the last answer

// kLeaving: the member stops receiving (begin_leave): no longer steered to
// nor waited for by probes, still watched until its slot is freed.
enum SlotState : uint32_t { kFree = 0, kJoining = 1, kActive = 2, kLeaving = 3 };

// The table as every member maps it. Fields written by one process and read
// by another are atomics (lock-free for these sizes, so valid across
// processes); the rest change only under the lock.
struct Slot {
  std::atomic<uint32_t> state;
  std::atomic<uint32_t> pid;
  uint64_t starttime;  // /proc/<pid>/stat field 22: a reused pid is another process
  uint64_t freed_at;   // when freed (ns, CLOCK_REALTIME): the longest free is reused first
  std::atomic<uint32_t> probe_gen;  // the generation of the probe that found its index
  std::atomic<uint32_t> index;      // its socket's index in the reuseport group
  uint32_t nservices;
  uint32_t reserved;
  uint64_t services[kMaxServicesPerSlot];
};

struct Table {
  uint32_t magic;
  uint32_t version;  // kLayoutVersion
  uint64_t cookie;
  std::atomic<uint32_t> generation;
  uint32_t dirty;  // membership changed since the program was attached
  Slot slots[kSlots];
};
static_assert(std::atomic<uint32_t>::is_always_lock_free);

std::error_code errno_code() { return {errno, std::generic_category()}; }

uint64_t realtime_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

// Field 22 of /proc/<pid>/stat (after the parenthesised command): when the
// process started. 0 when it does not exist or has ended: a zombie (state Z,
// dead but not yet waited for by its parent) or a dying one (X) is dead here,
// or a crashed member would hold its slot until its parent reaps it.
uint64_t starttime_of(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  if (!std::getline(f, s)) return 0;
  const size_t close = s.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(s.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && (rest >> field); ++i) {
    if (i == 3 && (field == "Z" || field == "X")) return 0;
    if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
  }
  return 0;
}

bool alive(const Slot& s) {
  const auto pid = static_cast<pid_t>(s.pid.load());
  return pid > 0 && s.starttime != 0 && starttime_of(pid) == s.starttime;
}

int pidfd_open(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

socklen_t to_sockaddr(const wire::IpAddr& a, uint16_t port, uint32_t scope, sockaddr_storage& ss) {
  std::memset(&ss, 0, sizeof ss);
  if (a.v6) {
    auto* s6 = reinterpret_cast<sockaddr_in6*>(&ss);
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(port);
    std::memcpy(&s6->sin6_addr, a.b.data(), 16);
    s6->sin6_scope_id = scope;
    return sizeof(sockaddr_in6);
  }
  auto* s4 = reinterpret_cast<sockaddr_in*>(&ss);
  s4->sin_family = AF_INET;
  s4->sin_port = htons(port);
  std::memcpy(&s4->sin_addr, a.b.data(), 4);
  return sizeof(sockaddr_in);
}

sockaddr_un unix_addr(const std::string& path) {
  sockaddr_un u{};
  u.sun_family = AF_UNIX;
  std::strncpy(u.sun_path, path.c_str(), sizeof u.sun_path - 1);
  return u;
}

}  // namespace

struct AddressGroup::Impl {
  wire::IpAddr addr;
  JoinOptions opt;
  std::string dir;
  int lock_fd = -1;
  Table* table = nullptr;
  int slot = -1;
  int sock = -1;       // handed to the transport by take_socket()
  int sock_dup = -1;   // ours: to attach programs
  int notify_fd = -1;  // <dir>/n<slot>
  int stop_fd = -1;
  std::thread watcher;
  bool active = false;
  // Set first thing when the member leaves: a re-steer the watcher has under
  // way gives up (this member no longer answers probes; the others steer
  // again when it is gone).
  std::atomic<bool> leaving{false};
  std::mutex mu;  // set_services against the watcher, in this process

  ~Impl();
  std::string notify_path(int s) const { return dir + "/n" + std::to_string(s); }
  bool lock() { return lock_within(lock_fd, opt.lock_timeout_ms); }
  // Why lock() failed, in a sentence.
  std::string lock_failure() const {
    const int e = errno;
    if (e == ETIMEDOUT) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%g", opt.lock_timeout_ms / 1000.0);
      return "the lock of " + dir + " has been held for " + secs + " s by " + describe_lock_holder(lock_fd);
    }
    return "cannot lock " + dir + "/lock: " + std::strerror(e);
  }
  void unlock() { ::flock(lock_fd, LOCK_UN); }
  bool reap_dead();                // under the lock
  void steer(bool probe);          // under the lock
  void notify_others();
  void watch();
  void begin_leave() {
    leaving.store(true);
    if (table != nullptr && slot >= 0) {
      uint32_t was = kActive;
      table->slots[slot].state.compare_exchange_strong(was, kLeaving);
    }
  }
};

namespace {

// Under the lock: the table mapped and made valid (created, or re-created
// when it is not a table at all); an error for another version's.
std::error_code map_table(AddressGroup::Impl& g, std::string* error) {
  const std::string path = g.dir + "/table";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    *error = "cannot open " + path + ": " + std::strerror(errno);
    return errno_code();
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return errno_code();
  }
  const bool fresh = static_cast<size_t>(st.st_size) != sizeof(Table);
  if (fresh && ::ftruncate(fd, 0) == 0 && ::ftruncate(fd, sizeof(Table)) != 0) {
    *error = "cannot size " + path + ": " + std::strerror(errno);
    ::close(fd);
    return errno_code();
  }
  void* p = ::mmap(nullptr, sizeof(Table), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    *error = "cannot map " + path + ": " + std::strerror(errno);
    return errno_code();
  }
  g.table = static_cast<Table*>(p);
  Table& t = *g.table;
  if (!fresh && t.magic == kTableMagic && t.version != kLayoutVersion) {
    *error = "the processes sharing " + g.addr.to_string() + " use rocelab layout version " +
             std::to_string(t.version) + ", this rocelab has version " +
             std::to_string(kLayoutVersion) + " (" + path + "); run one version per address";
    return std::make_error_code(std::errc::protocol_not_supported);
  }
  if (fresh || t.magic != kTableMagic) {
    std::memset(static_cast<void*>(&t), 0, sizeof t);
    std::random_device rd;
    t.cookie = (uint64_t{rd()} << 32) | rd();
    t.version = kLayoutVersion;
    t.magic = kTableMagic;
  }
  return {};
}

}  // namespace

AddressGroup::Impl::~Impl() {
  begin_leave();
  if (stop_fd >= 0) {
    uint64_t one = 1;
    [[maybe_unused]] auto r = ::write(stop_fd, &one, sizeof one);
  }
  if (watcher.joinable()) watcher.join();
  if (table != nullptr && slot >= 0 && lock()) {
    Slot& s = table->slots[slot];
    s.nservices = 0;
    s.freed_at = realtime_ns();
    s.state.store(kFree);
    s.pid.store(0);
    table->dirty = 1;
    // Leaving the group moves the last socket into our index: until a member
    // probes again, packets for the slot that moved go astray (RC recovers).
    if (sock_dup >= 0) ::close(sock_dup);
    sock_dup = -1;
    if (sock >= 0) ::close(sock);
    sock = -1;
    unlock();
    notify_others();
  }
  if (notify_fd >= 0) {
    ::close(notify_fd);
    ::unlink(notify_path(slot).c_str());
  }
  if (sock_dup >= 0) ::close(sock_dup);
  if (sock >= 0) ::close(sock);
  if (stop_fd >= 0) ::close(stop_fd);
  if (table != nullptr) ::munmap(table, sizeof(Table));
  if (lock_fd >= 0) ::close(lock_fd);
}

bool AddressGroup::Impl::reap_dead() {
  bool reaped = false;
  for (int i = 0; i < kSlots; ++i) {
    Slot& s = table->slots[i];
    if (s.state.load() == kFree || i == slot || alive(s)) continue;
    s.state.store(kFree);
    s.pid.store(0);
    s.nservices = 0;
    s.freed_at = realtime_ns();
    ::unlink(notify_path(i).c_str());
    reaped = true;
  }
  if (reaped) table->dirty = 1;
  return reaped;
}

// Under the lock: (probe: find every active member's socket index, then)
// attach the program built from the indices known.
void AddressGroup::Impl::steer(bool probe) {
  Table& t = *table;
  auto build = [&](uint32_t gen) {
    std::vector<SlotRoute> routes;
    std::vector<ServiceRoute> services;
    std::map<uint32_t, int> by_index;  // index -> slot: two claims of one index are both dropped
    for (int i = 0; i < kSlots; ++i) {
      const Slot& s = t.slots[i];
      if (s.state.load() != kActive || s.probe_gen.load() == 0) continue;
      if (gen != 0 && s.probe_gen.load() != gen) continue;
      const uint32_t idx = s.index.load();
      if (by_index.count(idx)) {
        by_index[idx] = -1;
        continue;
      }
      by_index[idx] = i;
    }
    uint32_t fallback = 0;
    bool have_fallback = false;
    for (int i = 0; i < kSlots; ++i) {
      const Slot& s = t.slots[i];
      if (s.state.load() != kActive || s.probe_gen.load() == 0) continue;
      const uint32_t idx = s.index.load();
      if (by_index.count(idx) == 0 || by_index[idx] != i) continue;
      routes.push_back({static_cast<uint8_t>(i), idx});
      if (!have_fallback) fallback = idx, have_fallback = true;  // the lowest live slot owns the rest
      for (uint32_t k = 0; k < s.nservices && k < kMaxServicesPerSlot; ++k)
        services.push_back({s.services[k], idx});
    }
    return steering_program(routes, services, fallback);
  };
  if (sock_dup < 0) return;
  attach_steering(sock_dup, build(0));  // probes go by their index from here on
  if (!probe) return;
  int tx = ::socket(addr.v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (tx < 0) return;
  sockaddr_storage to;
  const socklen_t tolen = to_sockaddr(addr, wire::kRoceV2Port, opt.scope_id, to);
  // One probe per socket of the group: every slot not free holds one (a
  // leaving member's may be closed already). A probe for an index beyond the
  // group's size is steered by hash, to a member whose own index is smaller:
  // each member keeps the smallest index it hears in a generation (on_probe),
  // and a short settle after the last answer lets a member's own probe
  // overtake a surplus one that arrived first (the kernel's backlogs are per
  // CPU, so two probes from one sender can arrive out of order).
  unsigned sockets = 0;
  for (const Slot& s : t.slots) sockets += s.state.load() != kFree;
  const unsigned count = std::clamp(sockets, 1u, 256u);
  for (int round = 0; round < kProbeRounds; ++round) {
    const uint32_t gen = t.generation.fetch_add(1) + 1;
    for (unsigned k = 0; k < count; ++k) {
      std::array<std::byte, wire::kHostProbeLen> pkt;
      wire::put_host_probe({static_cast<uint8_t>(k), t.cookie, gen}, pkt);
      ::sendto(tx, pkt.data(), pkt.size(), 0, reinterpret_cast<sockaddr*>(&to), tolen);
    }
    const auto deadline = std::chrono::steady_clock::now() + kProbeWait;
    bool all = false;
    while (!all && std::chrono::steady_clock::now() < deadline) {
      if (leaving.load()) {
        ::close(tx);
        return;  // dirty stays set: the others steer once we are gone
      }
      all = true;
      for (int i = 0; i < kSlots && all; ++i) {
        const Slot& s = t.slots[i];
        if (s.state.load() == kActive && s.probe_gen.load() != gen && alive(s)) all = false;
      }
      if (!all) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (all || round + 1 == kProbeRounds) {
      std::this_thread::sleep_for(kProbeSettle);
      attach_steering(sock_dup, build(gen));
      break;
    }
  }
  ::close(tx);
  t.dirty = 0;
}

void AddressGroup::Impl::notify_others() {
  if (table == nullptr) return;
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return;
  for (int i = 0; i < kSlots; ++i) {
    if (i == slot || table->slots[i].state.load() != kActive) continue;
    sockaddr_un u = unix_addr(notify_path(i));
    const char c = 'm';
    ::sendto(fd, &c, 1, 0, reinterpret_cast<sockaddr*>(&u), sizeof u);
  }
  ::close(fd);
}

// The watcher: asleep on the stop eventfd, the notify socket and a pidfd
// per other active member. A death or a "membership changed" takes the
// lock; whoever finds something to do (a dead slot, the dirty flag) probes
// and re-steers, the others find it done.
void AddressGroup::Impl::watch() {
  std::map<int, std::pair<uint32_t, int>> pidfds;  // slot -> (pid, pidfd)
  for (;;) {
    for (int i = 0; i < kSlots; ++i) {
      const Slot& s = table->slots[i];
      const uint32_t st = s.state.load();
      const uint32_t pid = (st == kActive || st == kLeaving) && i != slot ? s.pid.load() : 0;
      auto it = pidfds.find(i);
      if (it != pidfds.end() && it->second.first != pid) {
        if (it->second.second >= 0) ::close(it->second.second);
        pidfds.erase(it);
        it = pidfds.end();
      }
      if (pid != 0 && it == pidfds.end()) pidfds[i] = {pid, pidfd_open(static_cast<pid_t>(pid))};
    }
    std::vector<pollfd> fds{{stop_fd, POLLIN, 0}, {notify_fd, POLLIN, 0}};
    std::vector<int> slot_of{-1, -1};
    for (auto& [s, p] : pidfds) {
      if (p.second < 0) continue;
      fds.push_back({p.second, POLLIN, 0});
      slot_of.push_back(s);
    }
    if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) return;
    if (fds[0].revents) break;
    if (fds[1].revents) {
      char buf[16];
      while (::recv(notify_fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
      }
    }
    for (size_t k = 2; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      // Dead: never poll this pidfd again, whatever the lock below finds.
      auto& p = pidfds[slot_of[k]];
      ::close(p.second);
      p.second = -1;
    }
    std::lock_guard<std::mutex> g(mu);
    if (!lock()) continue;
    if (reap_dead() || table->dirty) steer(true);
    unlock();
  }
  for (auto& [s, p] : pidfds)
    if (p.second >= 0) ::close(p.second);
}

AddressGroup::AddressGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AddressGroup::~AddressGroup() = default;

const wire::IpAddr& AddressGroup::address() const { return impl_->addr; }
int AddressGroup::slot() const { return impl_->slot; }

int AddressGroup::take_socket() {
  const int fd = impl_->sock;
  impl_->sock = -1;
  return fd;
}

wire::Result<std::unique_ptr<AddressGroup>> AddressGroup::join(const wire::IpAddr& addr,
                                                               const JoinOptions& opt,
                                                               std::string* error) {
  std::string scratch;
  if (error == nullptr) error = &scratch;
  auto net = net_dir();
  if (!net) {
    *error = "the runtime directory is unusable: " + net.error().message();
    return net.error();
  }
  auto g = std::make_unique<Impl>();
  g->addr = addr;
  g->opt = opt;
  g->dir = *net + "/addr-" + addr.to_string();
  if (std::error_code ec = make_private_dirs(g->dir)) {
    *error = "cannot create " + g->dir + ": " + ec.message();
    return ec;
  }
  const std::string lock_path = g->dir + "/lock";
  g->lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (g->lock_fd < 0) {
    *error = "cannot open " + lock_path + ": " + std::strerror(errno);
    return errno_code();
  }
  if (!g->lock()) {
    const std::error_code ec = errno_code();
    *error = g->lock_failure();
    return ec;
  }
  struct Unlock {
    Impl* g;
    ~Unlock() { g->unlock(); }
  } unlock_at_return{g.get()};
  if (std::error_code ec = map_table(*g, error)) return ec;
  Table& t = *g->table;
  g->reap_dead();
  if (opt.alone) {
    for (const Slot& s : t.slots)
      if (s.state.load() != kFree) return std::make_error_code(std::errc::address_in_use);
  }

  // The socket, in the group.
  int fd = ::socket(addr.v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno_code();
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on);
  if (addr.v6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
  sockaddr_storage ss;
  const socklen_t len = to_sockaddr(addr, wire::kRoceV2Port, opt.scope_id, ss);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    std::error_code ec = errno_code();
    ::close(fd);
    if (ec == std::errc::address_in_use) {
      bool members = false;
      for (const Slot& s : t.slots) members = members || s.state.load() != kFree;
      *error = "UDP port 4791 on " + addr.to_string() + " is held by " +
               describe_port_holder(addr, wire::kRoceV2Port) +
               (members ? ", outside the group of rocelab processes that share it"
                        : ", which is not a rocelab process sharing the address");
    } else {
      *error = "cannot bind " + addr.to_string() + ":4791: " + ec.message();
    }
    return ec;
  }
  g->sock = fd;
  g->sock_dup = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);

  // The slot free the longest (a reused slot's QPNs may still be named by
  // late packets of its last owner's peers).
  int best = -1;
  for (int i = 0; i < kSlots; ++i) {
    const Slot& s = t.slots[i];
    if (s.state.load() != kFree) continue;
    if (best < 0 || s.freed_at < t.slots[best].freed_at) best = i;
  }
  if (best < 0) {
    *error = "all " + std::to_string(kSlots) + " slots of " + addr.to_string() + " are taken";
    return std::make_error_code(std::errc::too_many_files_open);
  }
  Slot& s = t.slots[best];
  const pid_t self = ::getpid();
  s.starttime = starttime_of(self);
  s.pid.store(static_cast<uint32_t>(self));
  s.nservices = 0;
  s.probe_gen.store(0);
  s.state.store(kJoining);
  g->slot = best;
  return std::unique_ptr<AddressGroup>(new AddressGroup(std::move(g)));
}

void AddressGroup::on_probe(std::span<const std::byte> datagram) {
  auto p = wire::parse_host_probe(datagram);
  Impl& g = *impl_;
  if (!p || g.table == nullptr || p->cookie != g.table->cookie) return;
  if (p->generation != g.table->generation.load()) return;
  Slot& s = g.table->slots[g.slot];
  // The smallest index heard in a generation is ours (surplus probes carry
  // larger ones). One receiving thread per member: no race on the pair.
  if (s.probe_gen.load() == p->generation && s.index.load() <= p->index) return;
  s.index.store(p->index);
  s.probe_gen.store(p->generation);
}

std::error_code AddressGroup::activate(std::string* error) {
  Impl& g = *impl_;
  if (g.active) return {};
  g.stop_fd = ::eventfd(0, EFD_CLOEXEC);
  g.notify_fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (g.stop_fd < 0 || g.notify_fd < 0) return errno_code();
  const std::string np = g.notify_path(g.slot);
  ::unlink(np.c_str());
  sockaddr_un u = unix_addr(np);
  if (np.size() >= sizeof u.sun_path ||
      ::bind(g.notify_fd, reinterpret_cast<sockaddr*>(&u), sizeof u) != 0) {
    if (error) *error = "cannot bind " + np + ": " + std::strerror(errno);
    return errno_code();
  }
  {
    std::lock_guard<std::mutex> lk(g.mu);
    if (!g.lock()) {
      const std::error_code ec = errno_code();
      if (error) *error = g.lock_failure();
      return ec;
    }
    g.reap_dead();
    g.table->slots[g.slot].state.store(kActive);
    g.steer(true);
    g.unlock();
  }
  g.notify_others();
  g.active = true;
  g.watcher = std::thread([&g] { g.watch(); });
  return {};
}

void AddressGroup::set_services(std::vector<uint64_t> service_ids) {
  Impl& g = *impl_;
  std::lock_guard<std::mutex> lk(g.mu);
  if (!g.lock()) return;
  Slot& s = g.table->slots[g.slot];
  s.nservices = static_cast<uint32_t>(std::min(service_ids.size(), kMaxServicesPerSlot));
  for (uint32_t k = 0; k < s.nservices; ++k) s.services[k] = service_ids[k];
  g.steer(false);
  g.unlock();
}

bool AddressGroup::listened_by_another(uint64_t service_id) {
  Impl& g = *impl_;
  std::lock_guard<std::mutex> lk(g.mu);
  if (!g.lock()) return false;  // the lock held too long: the REQ steering decides, as before
  g.reap_dead();
  bool taken = false;
  for (int i = 0; i < kSlots && !taken; ++i) {
    const Slot& s = g.table->slots[i];
    if (i == g.slot || s.state.load() == kFree) continue;
    for (uint32_t k = 0; k < s.nservices && k < kMaxServicesPerSlot; ++k) taken = taken || s.services[k] == service_id;
  }
  g.unlock();
  return taken;
}

void AddressGroup::begin_leave() { impl_->begin_leave(); }

int AddressGroup::active_members() const {
  int n = 0;
  for (const Slot& s : impl_->table->slots) n += s.state.load() == kActive && alive(s);
  return n;
}

}  // namespace rocelab::host
