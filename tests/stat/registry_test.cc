// The registry (src/stat/registry.h, client.h) on real unix sockets in a
// directory of the test's own: a publisher answers with its snapshot and
// withdraws its entry; the reader removes entries of processes that are gone,
// refuses another layout naming both versions, and trusts nothing it finds.
#include "stat/registry.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "host/runtime_dir.h"
#include "stat/client.h"
#include "stat/frame.h"
#include "stat/proc.h"

namespace rocelab::stat {
namespace {

namespace fs = std::filesystem;

class StatRegistry : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rocelab-stat-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<Entry> read() {
    auto r = read_registry(dir_ + "/stat", 500);
    EXPECT_TRUE(bool(r));
    return r ? *r : std::vector<Entry>{};
  }
  std::string sdir() const { return dir_ + "/stat"; }
  std::string dir_;
};

std::vector<emu::DeviceSnapshot> one_device() {
  emu::DeviceSnapshot d;
  d.name = "rocelab7";
  d.address = wire::IpAddr::v4(127, 0, 0, 9);
  emu::QpSnapshot q;
  q.qpn = 0x21;
  q.state = emu::QpState::kRtr;
  d.qps.push_back(q);
  return {d};
}

// A socket listening at path whose connections get `answer` and are closed
// (or held open without a byte when hold): what another program might leave there.
class FakeEntry {
 public:
  FakeEntry(const std::string& path, std::string answer, bool hold = false)
      : answer_(std::move(answer)), hold_(hold) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::strncpy(sa.sun_path, path.c_str(), sizeof sa.sun_path - 1);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0) << std::strerror(errno);
    EXPECT_EQ(::listen(fd_, 4), 0);
    thread_ = std::thread([this] {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      if (!answer_.empty()) (void)!::write(c, answer_.data(), answer_.size());
      if (hold_)
        while (!done_) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      ::close(c);
    });
  }
  ~FakeEntry() {
    done_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }

 private:
  int fd_ = -1;
  std::string answer_;
  bool hold_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

std::string header_bytes(const FrameHeader& h) { return std::string(reinterpret_cast<const char*>(&h), sizeof h); }

uint32_t self() { return static_cast<uint32_t>(::getpid()); }
uint64_t self_ticks() { return process_start_ticks(self()).value_or(0); }

TEST(StatProc, StartTicksNameThisProcess) {
  auto t = process_start_ticks(self());
  ASSERT_TRUE(t);
  EXPECT_GT(*t, 0u);
  EXPECT_EQ(process_start_ticks(self()), t);  // stable
  EXPECT_FALSE(process_start_ticks(0x7FFFFFF0));
  EXPECT_EQ(process_comm(self()).substr(0, 10), "stat_tests");
  EXPECT_NE(process_cmdline(self()).find("stat_tests"), std::string::npos);
}

TEST(StatEntryName, RoundTripsAndRefusesOthers) {
  uint32_t pid = 0;
  uint64_t t = 0;
  ASSERT_TRUE(parse_entry_name(entry_name(1234, 98765), &pid, &t));
  EXPECT_EQ(pid, 1234u);
  EXPECT_EQ(t, 98765u);
  for (const char* bad : {"1234.sock", "1234-5", "1234-5.socket", "-5.sock", "12a-5.sock", "lock", ""})
    EXPECT_FALSE(parse_entry_name(bad, &pid, &t)) << bad;
}

TEST_F(StatRegistry, PublisherAnswersAndWithdraws) {
  auto p = Publisher::start(sdir(), one_device);
  ASSERT_TRUE(bool(p)) << p.error().message();
  EXPECT_EQ((*p)->path(), sdir() + "/" + entry_name(self(), self_ticks()));
  struct stat st{};
  ASSERT_EQ(::stat(sdir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);  // private to the user

  auto entries = read();
  ASSERT_EQ(entries.size(), 1u);
  const Entry& e = entries[0];
  ASSERT_EQ(e.status, Entry::Status::kLive) << e.message;
  EXPECT_EQ(e.process.pid(), self());
  EXPECT_EQ(e.process.start_ticks(), self_ticks());
  EXPECT_EQ(e.process.version(), rocelab_version());
  EXPECT_GT(e.process.taken_unix_ns(), 0u);
  ASSERT_EQ(e.process.devices_size(), 1);
  EXPECT_EQ(e.process.devices(0).name(), "rocelab7");
  EXPECT_EQ(e.process.devices(0).address(), "127.0.0.9");
  ASSERT_EQ(e.process.devices(0).qps_size(), 1);
  EXPECT_EQ(e.process.devices(0).qps(0).qpn(), 0x21u);
  EXPECT_EQ(e.process.devices(0).qps(0).state(), "RTR");

  // Asked again: a fresh snapshot each time.
  EXPECT_EQ(read().at(0).status, Entry::Status::kLive);
  const std::string path = (*p)->path();
  p->reset();
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(read().empty());
}

TEST_F(StatRegistry, EntryOfAProcessGoneIsRemoved) {
  ASSERT_FALSE(host::make_private_dirs(sdir()));
  // A child that published and was killed: its entry stays behind.
  pid_t child = ::fork();
  if (child == 0) {
    auto p = Publisher::start(sdir(), one_device);
    (void)p->release();  // keeps it: the process ends without withdrawing
    ::raise(SIGKILL);
    ::_exit(1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  std::string found;  // the child's entry (its start ticks are its own)
  for (const auto& f : fs::directory_iterator(sdir())) found = f.path().string();
  ASSERT_FALSE(found.empty());

  auto entries = read();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].status, Entry::Status::kStale);
  EXPECT_EQ(entries[0].pid, static_cast<uint32_t>(child));
  EXPECT_NE(entries[0].message.find("is not running"), std::string::npos) << entries[0].message;
  EXPECT_FALSE(fs::exists(found));
  EXPECT_TRUE(read().empty());
}

TEST_F(StatRegistry, EntryOfAnEarlierProcessWithThisPidIsRemoved) {
  ASSERT_FALSE(host::make_private_dirs(sdir()));
  // Our pid with another start time: a process that had our pid before us.
  const std::string path = sdir() + "/" + entry_name(self(), self_ticks() - 1);
  std::ofstream(path) << "";
  auto entries = read();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].status, Entry::Status::kStale);
  EXPECT_NE(entries[0].message.find("another process now"), std::string::npos) << entries[0].message;
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(StatRegistry, EntryNobodyListensOnIsRemoved) {
  ASSERT_FALSE(host::make_private_dirs(sdir()));
  // Our pid and start time, but nothing listening: a plain file (or a socket
  // whose listener closed) refuses connections.
  const std::string path = sdir() + "/" + entry_name(self(), self_ticks());
  std::ofstream(path) << "not a socket";
  auto entries = read();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].status, Entry::Status::kStale) << entries[0].message;
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(StatRegistry, AnotherLayoutIsRefusedNamingBothVersions) {
  ASSERT_FALSE(host::make_private_dirs(sdir()));
  const std::string path = sdir() + "/" + entry_name(self(), self_ticks());
  FakeEntry fake(path, header_bytes(make_header(0, kStatLayoutVersion + 1, "9.9")));
  auto entries = read();
  ASSERT_EQ(entries.size(), 1u);
  const Entry& e = entries[0];
  EXPECT_EQ(e.status, Entry::Status::kOtherVersion);
  for (const std::string& want : {std::string("rocelab 9.9"), "layout " + std::to_string(kStatLayoutVersion + 1),
                                  "rocelab " + std::string(rocelab_version()),
                                  "layout " + std::to_string(kStatLayoutVersion)})
    EXPECT_NE(e.message.find(want), std::string::npos) << want << " not in: " << e.message;
  EXPECT_TRUE(fs::exists(path));  // another rocelab's: not ours to remove
}

TEST_F(StatRegistry, GarbageAnswersAreErrors) {
  ASSERT_FALSE(host::make_private_dirs(sdir()));
  const std::string path = sdir() + "/" + entry_name(self(), self_ticks());
  {
    FakeEntry fake(path, std::string(sizeof(FrameHeader), 'x'));
    auto entries = read();
    ASSERT_EQ(entries.size(), 1u);
    EXPECT_EQ(entries[0].status, Entry::Status::kBad);
    EXPECT_NE(entries[0].message.find("not a rocelab stat frame"), std::string::npos) << entries[0].message;
  }
  ::unlink(path.c_str());
  {
    // A header that promises more than comes.
    FakeEntry fake(path, header_bytes(make_header(100)) + "abc");
    auto entries = read();
    ASSERT_EQ(entries.size(), 1u);
    EXPECT_EQ(entries[0].status, Entry::Status::kNoAnswer);
    EXPECT_NE(entries[0].message.find("cut short"), std::string::npos) << entries[0].message;
  }
  ::unlink(path.c_str());
  {
    // A body that is not a Process.
    FakeEntry fake(path, header_bytes(make_header(4)) + "\xff\xff\xff\xff");
    auto entries = read();
    ASSERT_EQ(entries.size(), 1u);
    EXPECT_EQ(entries[0].status, Entry::Status::kBad) << entries[0].message;
  }
  ::unlink(path.c_str());
  {
    // A listener that never answers: given up on after the timeout.
    FakeEntry fake(path, "", /*hold=*/true);
    auto entries = read();
    ASSERT_EQ(entries.size(), 1u);
    EXPECT_EQ(entries[0].status, Entry::Status::kNoAnswer);
    EXPECT_NE(entries[0].message.find("no answer within 500 ms"), std::string::npos) << entries[0].message;
  }
}

TEST_F(StatRegistry, AnEntryBoundByAnotherProcessIsNotTrusted) {
  ASSERT_FALSE(host::make_private_dirs(sdir()));
  // A child binds the socket named for us (the parent): the peer is not who
  // the name says.
  const std::string path = sdir() + "/" + entry_name(self(), self_ticks());
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  if (child == 0) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::strncpy(sa.sun_path, path.c_str(), sizeof sa.sun_path - 1);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd, 4) != 0) ::_exit(1);
    (void)!::write(ready[1], "r", 1);
    ::pause();
    ::_exit(0);
  }
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  auto entries = read();
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].status, Entry::Status::kBad);
  EXPECT_NE(entries[0].message.find("not trusted"), std::string::npos) << entries[0].message;
}

TEST_F(StatRegistry, AForkedChildLeavesItsParentsEntryAlone) {
  auto p = Publisher::start(sdir(), one_device);
  ASSERT_TRUE(bool(p));
  const std::string path = (*p)->path();
  pid_t child = ::fork();
  if (child == 0) {
    p->reset();  // the child's copy: must not withdraw the parent's entry
    ::_exit(fs::exists(path) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_TRUE(fs::exists(path));
  auto entries = read();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].status, Entry::Status::kLive) << entries[0].message;
}

TEST_F(StatRegistry, PublisherSweepsDeadEntriesAsItStarts) {
  ASSERT_FALSE(host::make_private_dirs(sdir()));
  const std::string dead = sdir() + "/" + entry_name(0x7FFFFFF0, 1);
  const std::string other = sdir() + "/lock";  // not an entry: left alone
  std::ofstream(dead) << "";
  std::ofstream(other) << "";
  auto p = Publisher::start(sdir(), one_device);
  ASSERT_TRUE(bool(p));
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(other));
}

TEST_F(StatRegistry, MissingDirectoryHoldsNoEntries) {
  auto r = read_registry(dir_ + "/nothing-here", 100);
  ASSERT_TRUE(bool(r));
  EXPECT_TRUE(r->empty());
}

}  // namespace
}  // namespace rocelab::stat
