// One process's answer to `rocelab stat`: its devices' snapshots
// (emu/snapshot.h) as a proto/stat.proto Process message, encoded without
// libprotobuf (pb_writer.h).
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "emu/snapshot.h"

namespace rocelab::stat {

struct ProcessInfo {
  uint32_t pid = 0;
  std::string comm, cmdline;
  uint64_t start_ticks = 0;
  std::string version;
  uint64_t taken_unix_ns = 0;
};

std::string encode_process(const ProcessInfo& p, std::span<const emu::DeviceSnapshot> devices);

}  // namespace rocelab::stat
