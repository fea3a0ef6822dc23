// Address groups (src/host/address_group.h) with real members: each member
// binds UDP 4791 on one loopback address, receives on its socket (probes go
// to on_probe, as the UDP transport hands them over) and records the DestQPs
// of the packets that reach it. Members live in this process and in forked
// children; children are kill -9ed to play a crash. Each test has a runtime
// directory of its own (ROCELAB_RUNTIME_DIR) and an address no other test
// process uses (127.253.x.y, outside the ranges `rocelab run` and the test
// scripts allocate from).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "host/address_group.h"
#include "host/runtime_dir.h"
#include "test_packets.h"
#include "wire/bth.h"
#include "wire/host_probe.h"
#include "wire/packet.h"

namespace rocelab::host {
namespace {

using namespace std::chrono_literals;
using packets::to_qpn;

// This test process's address: 127.253.<pid>, taken on the first call (the
// fixture's SetUp, before any child is forked: children share it).
const wire::IpAddr& test_address() {
  static const wire::IpAddr a = [] {
    const auto pid = static_cast<uint32_t>(::getpid());
    return wire::IpAddr::v4(127, 253, static_cast<uint8_t>(pid >> 8), static_cast<uint8_t>(pid));
  }();
  return a;
}

// A member of the group: its socket drained by a thread of its own.
class Member {
 public:
  static std::unique_ptr<Member> join(const JoinOptions& opt = {}) {
    std::string why;
    auto g = AddressGroup::join(test_address(), opt, &why);
    EXPECT_TRUE(g.ok()) << why;
    if (!g) return nullptr;
    auto m = std::unique_ptr<Member>(new Member(std::move(*g)));
    std::string error;
    EXPECT_FALSE(m->group_->activate(&error)) << error;
    return m;
  }
  ~Member() {
    group_->begin_leave();  // as the shim does before its transport goes
    uint64_t one = 1;
    [[maybe_unused]] auto r = ::write(stop_, &one, sizeof one);
    rx_.join();
    ::close(fd_);
    ::close(stop_);
    group_.reset();  // leaves: the others re-steer
  }
  int slot() const { return group_->slot(); }
  AddressGroup& group() { return *group_; }
  // Whether a packet for qpn reached this member within `wait`.
  bool got(uint32_t qpn, std::chrono::milliseconds wait) {
    std::unique_lock lk(mu_);
    return cv_.wait_for(lk, wait, [&] { return seen_.count(qpn) != 0; });
  }

 private:
  explicit Member(std::unique_ptr<AddressGroup> g) : group_(std::move(g)) {
    fd_ = group_->take_socket();
    stop_ = ::eventfd(0, EFD_CLOEXEC);
    rx_ = std::thread([this] { receive(); });
  }
  void receive() {
    for (;;) {
      std::array<pollfd, 2> fds{{{fd_, POLLIN, 0}, {stop_, POLLIN, 0}}};
      if (::poll(fds.data(), fds.size(), -1) < 0) continue;
      if (fds[1].revents) return;
      std::array<std::byte, 2048> buf;
      ssize_t n;
      while ((n = ::recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT)) > 0) {
        const std::span<const std::byte> d(buf.data(), static_cast<size_t>(n));
        if (wire::parse_host_probe(d)) {
          group_->on_probe(d);
        } else if (n >= 12) {
          std::lock_guard lk(mu_);
          seen_.insert(wire::BthView(buf.data()).dest_qpn().value());
          cv_.notify_all();
        }
      }
    }
  }

  std::unique_ptr<AddressGroup> group_;
  int fd_ = -1, stop_ = -1;
  std::thread rx_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<uint32_t> seen_;
};

// A member in a child process, forked before this process has threads: it
// joins when told, writes its slot and then the DestQP of every packet it
// gets to a pipe, until it is killed.
class ChildMember {
 public:
  ChildMember() {
    int go[2], report[2];
    if (::pipe2(go, O_CLOEXEC) != 0 || ::pipe2(report, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(go[1]);
      ::close(report[0]);
      char c;
      if (::read(go[0], &c, 1) != 1) ::_exit(1);
      run_child(report[1]);
    }
    ::close(go[0]);
    ::close(report[1]);
    go_ = go[1];
    report_ = report[0];
  }
  ~ChildMember() {
    kill9();
    if (go_ >= 0) ::close(go_);
    if (report_ >= 0) ::close(report_);
  }
  bool forked() const { return pid_ > 0; }
  // Joins now; its slot (-1: it did not report one within 5 s).
  int start() {
    if (::write(go_, "g", 1) != 1) return -1;
    uint32_t slot;
    return read_word(&slot, 5s) ? static_cast<int>(slot) : -1;
  }
  bool got(uint32_t qpn, std::chrono::milliseconds wait) {
    const auto deadline = std::chrono::steady_clock::now() + wait;
    while (seen_.count(qpn) == 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      uint32_t q;
      if (left.count() <= 0 || !read_word(&q, left)) return false;
      seen_.insert(q);
    }
    return true;
  }
  // kill -9, and wait for it unless `zombie`: then it stays a zombie (dead,
  // not yet waited for, its /proc entry still there) until the destructor.
  void kill9(bool zombie = false) {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    if (zombie) {
      siginfo_t info{};
      ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT);  // dead, not reaped
      return;
    }
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  [[noreturn]] static void run_child(int report) {
    std::string why;
    auto g = AddressGroup::join(test_address(), {}, &why);
    if (!g) ::_exit(2);
    const int fd = (*g)->take_socket();
    AddressGroup& group = **g;
    // Probes must be answered while activate() waits for them.
    std::thread rx([&] {
      for (;;) {
        pollfd p{fd, POLLIN, 0};
        ::poll(&p, 1, -1);
        std::array<std::byte, 2048> buf;
        ssize_t n;
        while ((n = ::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT)) > 0) {
          const std::span<const std::byte> d(buf.data(), static_cast<size_t>(n));
          if (wire::parse_host_probe(d)) {
            group.on_probe(d);
          } else if (n >= 12) {
            const uint32_t q = wire::BthView(buf.data()).dest_qpn().value();
            if (::write(report, &q, sizeof q) != sizeof q) ::_exit(3);
          }
        }
      }
    });
    if (group.activate(&why)) ::_exit(4);
    const auto slot = static_cast<uint32_t>(group.slot());
    if (::write(report, &slot, sizeof slot) != sizeof slot) ::_exit(5);
    for (;;) ::pause();  // until SIGKILL
  }
  bool read_word(uint32_t* w, std::chrono::milliseconds wait) {
    pollfd p{report_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return false;
    return ::read(report_, w, sizeof *w) == sizeof *w;
  }

  pid_t pid_ = -1;
  int go_ = -1, report_ = -1;
  std::set<uint32_t> seen_;
};

class AddressGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rocelab-hosttest.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    runtime_ = tmpl;
    ASSERT_EQ(::setenv("ROCELAB_RUNTIME_DIR", runtime_.c_str(), 1), 0);
    (void)test_address();
    tx_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(tx_, 0);
  }
  void TearDown() override {
    ::close(tx_);
    std::error_code ec;
    std::filesystem::remove_all(runtime_, ec);
  }

  // A fresh DestQP (24 bits) in slot `slot`, its top byte (the low 16 bits
  // count up: every packet its own).
  uint32_t qpn_in(int slot) { return (static_cast<uint32_t>(slot) << 16) | (next_++ & 0xFFFF); }

  void send(uint32_t qpn) {
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(wire::kRoceV2Port);
    std::memcpy(&to.sin_addr, test_address().b.data(), 4);
    const auto d = to_qpn(qpn);
    ASSERT_EQ(::sendto(tx_, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to),
              static_cast<ssize_t>(d.size()));
  }

  // Sends `n` packets to slot `slot`; how many reached `m`, each awaited
  // for `wait` at most.
  template <typename M>
  int reached(M& m, int slot, int n, std::chrono::milliseconds wait = 200ms) {
    int got = 0;
    for (int k = 0; k < n; ++k) {
      const uint32_t q = qpn_in(slot);
      send(q);
      got += m.got(q, wait);
    }
    return got;
  }

  // Until every packet of a round of 8 to slot `slot` reaches `m` (the group
  // re-steers in the background), at most `wait`.
  template <typename M>
  bool steered_to(M& m, int slot, std::chrono::milliseconds wait) {
    const auto deadline = std::chrono::steady_clock::now() + wait;
    while (std::chrono::steady_clock::now() < deadline) {
      if (reached(m, slot, 8, 50ms) == 8) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  std::string table_path() {
    auto net = net_dir();
    EXPECT_TRUE(net.ok());
    return *net + "/addr-" + test_address().to_string() + "/table";
  }

  std::string runtime_;
  int tx_ = -1;
  uint32_t next_ = 0x11;
};

TEST_F(AddressGroupTest, EachMemberGetsThePacketsOfItsSlot) {
  auto a = Member::join();
  auto b = Member::join();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->slot(), 0);  // a fresh table: the lowest slots first
  EXPECT_EQ(b->slot(), 1);
  EXPECT_EQ(a->group().active_members(), 2);
  EXPECT_EQ(reached(*a, a->slot(), 20), 20);
  EXPECT_EQ(reached(*b, b->slot(), 20), 20);
  // A slot nobody holds goes to the lowest live slot: its engine counts the drop.
  EXPECT_EQ(reached(*a, 77, 10), 10);
}

TEST_F(AddressGroupTest, AMemberThatLeavesIsSteeredAround) {
  auto a = Member::join();
  auto b = Member::join();
  auto c = Member::join();
  ASSERT_TRUE(a && b && c);
  const int b_slot = b->slot(), c_slot = c->slot();
  ASSERT_EQ(reached(*c, c_slot, 5), 5);
  // The kernel moves the last socket (c's) into the index a's socket leaves
  // free: only a new program sends c its packets again.
  a.reset();
  EXPECT_TRUE(steered_to(*c, c_slot, 3000ms));
  EXPECT_EQ(reached(*c, c_slot, 20), 20);
  EXPECT_EQ(reached(*b, b_slot, 20), 20);
  // The lowest live slot, b's, answers for the rest now.
  EXPECT_EQ(reached(*b, 77, 10), 10);
  EXPECT_EQ(b->group().active_members(), 2);
}

TEST_F(AddressGroupTest, AMemberKilledMidRunIsReapedAndTheOthersKeepTheirPackets) {
  ChildMember child;  // forked first, while this process has no threads
  ASSERT_TRUE(child.forked());
  const int dead_slot = child.start();
  ASSERT_EQ(dead_slot, 0);
  auto a = Member::join();
  auto b = Member::join();
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->group().active_members(), 3);
  const uint32_t q = qpn_in(dead_slot);
  send(q);
  ASSERT_TRUE(child.got(q, 1000ms));
  ASSERT_EQ(reached(*b, b->slot(), 5), 5);

  // kill -9: b's socket (the last) moves into the child's index; the
  // watchers see the pidfd, free the slot and steer again. The child stays a
  // zombie meanwhile (its parent has not waited for it): dead all the same.
  child.kill9(/*zombie=*/true);
  EXPECT_EQ(a->group().active_members(), 2);
  EXPECT_TRUE(steered_to(*b, b->slot(), 3000ms));
  EXPECT_EQ(reached(*b, b->slot(), 20), 20);
  EXPECT_EQ(reached(*a, a->slot(), 20), 20);
  // Later packets for the dead slot's QPNs reach the lowest live slot (a),
  // whose engine counts them as drops.
  EXPECT_EQ(reached(*a, dead_slot, 10), 10);
  // The freed slot is not handed out at once: late packets of the dead
  // process's peers must not reach a newcomer's QPs.
  auto c = Member::join();
  ASSERT_TRUE(c);
  EXPECT_NE(c->slot(), dead_slot);
  EXPECT_EQ(reached(*c, c->slot(), 10), 10);
}

TEST_F(AddressGroupTest, ACrashedMembersTableEntryIsNotTrusted) {
  {
    ChildMember child;
    ASSERT_TRUE(child.forked());
    ASSERT_EQ(child.start(), 0);
    child.kill9();  // its slot stays "active" in the table, with no process behind it
  }
  // `alone` asks for an address nobody else holds: the dead entry does not count.
  auto a = Member::join({.scope_id = 0, .alone = true});
  ASSERT_TRUE(a);
  EXPECT_EQ(a->group().active_members(), 1);
  EXPECT_EQ(reached(*a, a->slot(), 10), 10);
}

TEST_F(AddressGroupTest, AloneIsRefusedWhileAnotherMemberLives) {
  auto a = Member::join();
  ASSERT_TRUE(a);
  std::string why;
  auto b = AddressGroup::join(test_address(), {.scope_id = 0, .alone = true}, &why);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error(), std::errc::address_in_use);
}

TEST_F(AddressGroupTest, APortHeldOutsideTheGroupIsNamedWithItsProcess) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(wire::kRoceV2Port);
  std::memcpy(&a.sin_addr, test_address().b.data(), 4);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
  std::string why;
  auto g = AddressGroup::join(test_address(), {}, &why);
  ::close(fd);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error(), std::errc::address_in_use);
  EXPECT_NE(why.find("UDP port 4791 on " + test_address().to_string()), std::string::npos) << why;
  EXPECT_NE(why.find("pid " + std::to_string(::getpid()) + " ("), std::string::npos) << why;
  EXPECT_NE(why.find("not a rocelab process"), std::string::npos) << why;
}

TEST_F(AddressGroupTest, AServiceIsListenedOnOncePerAddress) {
  auto a = Member::join();
  auto b = Member::join();
  ASSERT_TRUE(a && b);
  const uint64_t svc = 0x0000000001064A11ull, other = svc + 1;
  a->group().set_services({svc});
  EXPECT_TRUE(b->group().listened_by_another(svc));
  EXPECT_FALSE(b->group().listened_by_another(other));
  EXPECT_FALSE(a->group().listened_by_another(svc));  // its own listen is not another's
  a.reset();  // left: its services go with its slot
  EXPECT_FALSE(b->group().listened_by_another(svc));
}

TEST_F(AddressGroupTest, ALockHeldByAStoppedProcessIsNamedNotWaitedOnForever) {
  Member::join().reset();  // the group's directory and lock file exist
  auto net = net_dir();
  ASSERT_TRUE(net.ok());
  const std::string lock_path = *net + "/addr-" + test_address().to_string() + "/lock";
  // A child takes the lock and stops itself (as a member stopped with
  // SIGSTOP in the middle of a table update would).
  const pid_t child = ::fork();
  if (child == 0) {
    const int fd = ::open(lock_path.c_str(), O_RDWR);
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0) ::_exit(1);
    ::raise(SIGSTOP);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, WUNTRACED), child);
  ASSERT_TRUE(WIFSTOPPED(status));
  JoinOptions opt;
  opt.lock_timeout_ms = 300;
  std::string why;
  const auto t0 = std::chrono::steady_clock::now();
  auto g = AddressGroup::join(test_address(), opt, &why);
  const auto waited = std::chrono::steady_clock::now() - t0;
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error(), std::errc::timed_out);
  EXPECT_GE(waited, 300ms);
  EXPECT_LT(waited, 5s);
  EXPECT_NE(why.find("has been held for 0.3 s by pid " + std::to_string(child) + " ("), std::string::npos) << why;
  EXPECT_NE(why.find(", stopped)"), std::string::npos) << why;
  // Its holder gone (the kernel drops a dead process's locks), a join goes through.
  EXPECT_NE(Member::join(), nullptr);
}

TEST_F(AddressGroupTest, ATableOfAnotherLayoutVersionIsRefusedNamingBoth) {
  Member::join().reset();  // a table, left behind by a member that left
  {
    std::fstream t(table_path(), std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(t);
    const uint32_t other = 99;
    t.seekp(4);  // after the magic
    t.write(reinterpret_cast<const char*>(&other), sizeof other);
  }
  std::string why;
  auto g = AddressGroup::join(test_address(), {}, &why);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error(), std::errc::protocol_not_supported);
  EXPECT_NE(why.find("version 99"), std::string::npos) << why;
  EXPECT_NE(why.find("version " + std::to_string(kLayoutVersion)), std::string::npos) << why;
}

TEST_F(AddressGroupTest, ADamagedTableIsMadeAnew) {
  Member::join().reset();
  const auto size = std::filesystem::file_size(table_path());
  {
    std::ofstream t(table_path(), std::ios::binary | std::ios::trunc);
    t << std::string(size, '\xAB');  // the right size, but not a table
  }
  auto a = Member::join();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->group().active_members(), 1);
  EXPECT_EQ(reached(*a, a->slot(), 10), 10);
  a.reset();
  {
    std::ofstream t(table_path(), std::ios::binary | std::ios::trunc);
    t << "short";  // cut
  }
  auto b = Member::join();
  ASSERT_TRUE(b);
  EXPECT_EQ(reached(*b, b->slot(), 10), 10);
}

}  // namespace
}  // namespace rocelab::host
