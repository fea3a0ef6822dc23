// Reading the registry (registry.h): every entry in a directory, each asked
// for its frame and decoded with libprotobuf into a proto/stat.proto Process.
// Nothing in the directory is trusted: an entry whose process is gone (its
// pid not running, or running with another start time, or its socket refusing
// connections) is stale and removed; an answer from another pid, with a bad
// header, cut short or not decodable is an error; a frame of another layout is
// refused with both versions named.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "proto/stat.pb.h"
#include "wire/error.h"

namespace rocelab::stat {

struct Entry {
  enum class Status : uint8_t {
    kLive,          // process holds what it said
    kStale,         // its process is gone: the entry was removed
    kOtherVersion,  // written by another rocelab: not read
    kNoAnswer,      // no (complete) answer within the timeout
    kBad,           // an answer that is not a frame of this layout's form
  };
  uint32_t pid = 0;
  std::string path;
  Status status = Status::kBad;
  std::string message;  // what went wrong, in a sentence (all but kLive)
  Process process;      // kLive
};

// One entry: the socket at path, which names pid and start_ticks.
Entry read_entry(const std::string& path, uint32_t pid, uint64_t start_ticks, int timeout_ms);

// Every entry of dir, ordered by pid. A directory that does not exist holds
// none; one that cannot be read is an error (its errno).
wire::Result<std::vector<Entry>> read_registry(const std::string& dir, int timeout_ms = 1000);

}  // namespace rocelab::stat
