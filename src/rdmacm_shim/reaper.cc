#include "rdmacm_shim/reaper.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>

#include "wire/byte_order.h"
#include "wire/icrc.h"
#include "wire/ip_udp.h"
#include "wire/packet.h"

namespace rocelab::rdmacm_shim {

namespace {

enum : uint32_t { kFree = 0, kWriting = 1, kValid = 2 };

struct Slot {
  std::atomic<uint32_t> state{kFree};
  uint32_t key = 0;
  uint16_t len = 0;
  std::byte datagram[Reaper::kDatagramMax];
};

static_assert(std::atomic<uint32_t>::is_always_lock_free, "the table is shared between processes");

// In the reaper (a child of a multi-threaded process): system calls only, no
// allocation, no locks; wire's ICRC is plain computation.
void send_one(Slot& s) {
  std::byte* dg = s.datagram;
  const size_t len = s.len;
  if (len < wire::kIpv4HeaderLen + wire::kUdpHeaderLen) return;
  const bool v6 = (std::to_integer<uint8_t>(dg[0]) >> 4) == 6;
  const size_t ip_hlen = v6 ? wire::kIpv6HeaderLen : wire::kIpv4HeaderLen;
  const size_t iph = ip_hlen + wire::kUdpHeaderLen;
  if (len <= iph + wire::kIcrcLen) return;
  const uint16_t sport = wire::load_be16(dg + ip_hlen);
  sockaddr_storage src{}, dst{};
  socklen_t alen = 0;
  int tclass = 0;
  if (v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&src);
    auto* b = reinterpret_cast<sockaddr_in6*>(&dst);
    a->sin6_family = b->sin6_family = AF_INET6;
    std::memcpy(&a->sin6_addr, dg + 8, 16);
    std::memcpy(&b->sin6_addr, dg + 24, 16);
    a->sin6_port = htons(sport);
    b->sin6_port = htons(wire::kRoceV2Port);
    tclass = static_cast<int>((wire::load_be32(dg) >> 20) & 0xFF);
    alen = sizeof(sockaddr_in6);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&src);
    auto* b = reinterpret_cast<sockaddr_in*>(&dst);
    a->sin_family = b->sin_family = AF_INET;
    std::memcpy(&a->sin_addr, dg + 12, 4);
    std::memcpy(&b->sin_addr, dg + 16, 4);
    a->sin_port = htons(sport);
    b->sin_port = htons(wire::kRoceV2Port);
    tclass = std::to_integer<int>(dg[1]);
    alen = sizeof(sockaddr_in);
  }
  const int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  // As the device's socket (udp_transport.cc): DF, so the kernel gives an
  // unconnected socket's packet IPv4 ID 0, the header the ICRC was computed for.
  const int dont = v6 ? IPV6_PMTUDISC_DO : IP_PMTUDISC_DO;
  (void)::setsockopt(fd, v6 ? IPPROTO_IPV6 : IPPROTO_IP, v6 ? IPV6_MTU_DISCOVER : IP_MTU_DISCOVER, &dont, sizeof dont);
  if (tclass != 0)
    (void)::setsockopt(fd, v6 ? IPPROTO_IPV6 : IPPROTO_IP, v6 ? IPV6_TCLASS : IP_TOS, &tclass, sizeof tclass);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&src), alen) != 0) {
    // QP 1's port is taken (by whom, now the process is gone?): any port of
    // the address will do, with the ICRC recomputed for it (it covers the UDP ports).
    if (v6) {
      reinterpret_cast<sockaddr_in6*>(&src)->sin6_port = 0;
    } else {
      reinterpret_cast<sockaddr_in*>(&src)->sin_port = 0;
    }
    socklen_t got = alen;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&src), alen) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&src), &got) != 0) {
      ::close(fd);
      return;
    }
    const uint16_t port = ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&src)->sin6_port
                                   : reinterpret_cast<sockaddr_in*>(&src)->sin_port);
    wire::store_be16(dg + ip_hlen, port);
    const std::span<const std::byte> ip_packet(dg, len);
    wire::store_le32(dg + len - wire::kIcrcLen, wire::compute_icrc(ip_packet, ip_hlen));
  }
  (void)::sendto(fd, dg + iph, len - iph, 0, reinterpret_cast<sockaddr*>(&dst), alen);
  ::close(fd);
}

[[noreturn]] void reap(int pipe_rd, Slot* slots) {
  (void)::setsid();  // the terminal's signals are for the program, not for us
  (void)::prctl(PR_SET_NAME, "rocelab-reaper", 0, 0, 0);
  // The program's handlers are its code, which we do not run.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) (void)::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  (void)::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Only the pipe and /dev/null: the program's sockets and pipes must close
  // when it does (a peer waits for its TCP FIN, a shell for its stdout's EOF).
  // (The pipe first goes above the numbers we are about to fill: it may be any of them.)
  const int rd = ::fcntl(pipe_rd, F_DUPFD, 64);
  const int null = ::open("/dev/null", O_RDWR);
  for (int fd = 0; fd < 3; ++fd) (void)::dup2(null, fd);
  (void)::dup2(rd, 3);
  (void)::close_range(4, ~0U, 0);
  char b;
  while (::read(3, &b, 1) < 0 && errno == EINTR) {
  }
  for (size_t i = 0; i < Reaper::kSlots; ++i) {
    if (slots[i].state.load(std::memory_order_acquire) == kValid) send_one(slots[i]);
  }
  ::_exit(0);
}

}  // namespace

struct Reaper::Table {
  std::atomic<uint64_t> dropped{0};
  Slot slots[kSlots];
};

bool Reaper::start() noexcept {
  void* m = ::mmap(nullptr, sizeof(Table), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return false;
  auto* t = new (m) Table();  // zero pages: every slot free
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) {
    ::munmap(m, sizeof(Table));
    return false;
  }
  // Twice: the reaper is nobody's child the program could wait for. _Fork:
  // no atfork handlers (the program's), and the children make system calls only.
  const pid_t mid = ::_Fork();
  if (mid == 0) {
    if (::_Fork() == 0) reap(p[0], t->slots);
    ::_exit(0);
  }
  ::close(p[0]);
  if (mid < 0) {
    ::close(p[1]);
    ::munmap(m, sizeof(Table));
    return false;
  }
  while (::waitpid(mid, nullptr, 0) < 0 && errno == EINTR) {
  }
  // p[1] stays open, unused, until the process ends (or execs: O_CLOEXEC).
  table_ = t;
  return true;
}

void Reaper::farewell(uint32_t key, std::span<const std::byte> datagram) noexcept {
  if (!table_) return;
  Slot* slots = table_->slots;
  Slot* mine = nullptr;
  Slot* free_slot = nullptr;
  for (size_t i = 0; i < kSlots; ++i) {
    const uint32_t st = slots[i].state.load(std::memory_order_relaxed);
    if (st == kValid && slots[i].key == key) {
      mine = &slots[i];
      break;
    }
    if (st == kFree && !free_slot) free_slot = &slots[i];
  }
  if (datagram.empty()) {
    if (mine) mine->state.store(kFree, std::memory_order_release);
    return;
  }
  Slot* s = mine ? mine : free_slot;
  if (!s || datagram.size() > kDatagramMax) {
    table_->dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  s->state.store(kWriting, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s->key = key;
  s->len = static_cast<uint16_t>(datagram.size());
  std::memcpy(s->datagram, datagram.data(), datagram.size());
  s->state.store(kValid, std::memory_order_release);
}

uint64_t Reaper::dropped() const noexcept { return table_ ? table_->dropped.load(std::memory_order_relaxed) : 0; }

}  // namespace rocelab::rdmacm_shim
