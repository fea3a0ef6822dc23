// A live capture for wire tests: dumpcap on an interface with a BPF filter,
// written as a pcap file and read back with capture::FrameReader.
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "capture/frames.h"

namespace rocelab::emu::test {

struct CapturedPacket {
  std::vector<std::byte> data;
};

class Capture {
 public:
  // Starts `dumpcap -i iface -f filter -w <tmp>/cap.pcap -P` (inside network
  // namespace netns when given, through `ip netns exec`) and waits until it
  // reports that it is capturing. ok() says whether that worked; error() why not.
  Capture(const std::string& dumpcap, const std::string& iface, const std::string& filter,
          const std::string& netns = "") {
    if (dumpcap.empty()) {
      error_ = "dumpcap not found at configure time (it comes with tshark: `make deps`)";
      return;
    }
    char tmpl[] = "/tmp/rocelab-capture-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      error_ = "mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    file_ = dir_ + "/cap.pcap";
    log_ = dir_ + "/dumpcap.log";
    std::vector<std::string> args = {dumpcap, "-i", iface, "-f", filter, "-w", file_, "-P", "-q"};
    if (!netns.empty()) args.insert(args.begin(), {"ip", "netns", "exec", netns});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      // The child: stop capturing when the test process dies, even by a crash.
      ::prctl(PR_SET_PDEATHSIG, SIGINT);
      if (::getppid() != parent) ::_exit(127);
      int log_fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
      if (log_fd >= 0) ::dup2(log_fd, 2);
      if (null_fd >= 0) ::dup2(null_fd, 1);
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
    if (pid_ < 0) {
      error_ = "cannot fork for " + dumpcap;
      pid_ = -1;
      return;
    }
    // Wait (bounded) for the pcap file header: dumpcap prints "Capturing on"
    // before it opens the interface, but writes the header only after the
    // interface is open and its filter set.
    for (int i = 0; i < 400; ++i) {
      struct stat st;
      if (::stat(file_.c_str(), &st) == 0 && st.st_size >= 24) {
        ok_ = true;
        return;
      }
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        error_ = "dumpcap exited: " + log();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    error_ = "dumpcap did not start capturing within 20 s: " + log();
  }

  ~Capture() {
    stop();
    if (!dir_.empty()) {
      std::remove(file_.c_str());
      std::remove(log_.c_str());
      rmdir(dir_.c_str());
    }
  }

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  const std::string& file() const { return file_; }

  // Stops dumpcap (SIGINT flushes the file) after giving the kernel a moment to
  // hand it the last packets.
  void stop() {
    if (pid_ <= 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(pid_, SIGINT);
    int status;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  // The captured frames and the link type.
  std::vector<CapturedPacket> read(int& link_type) {
    std::vector<CapturedPacket> out;
    auto r = capture::FrameReader::open(file_, &error_);
    if (!r) return out;
    link_type = r->link_type();
    while (const capture::Frame* f = r->next()) out.push_back({{f->data.begin(), f->data.end()}});
    return out;
  }

  std::string log() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  pid_t pid_ = -1;
  bool ok_ = false;
  std::string error_, dir_, file_, log_;
};

// Runs a command and returns its standard output.
inline std::string run_output(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  pclose(f);
  return out;
}

}  // namespace rocelab::emu::test
