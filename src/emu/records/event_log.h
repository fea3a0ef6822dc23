// The Protobuf event log (proto/events.proto): every engine event of one or
// more devices, as length-delimited messages in one file.
#pragma once
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "emu/records.h"

namespace rocelab::emu {

class EventLog {
 public:
  // Creates (truncates) path. Errors: the errno of the open.
  static wire::Result<std::unique_ptr<EventLog>> open(const std::string& path);
  ~EventLog();

  // A sink that tags every event with `device`; owned by the log.
  EventSink* sink_for(const std::string& device);
  uint64_t events() const;
  std::error_code flush();

  class Sink;

 private:
  EventLog() = default;
  friend class Sink;
  void write(const std::string& device, const EngineEvent& e);
  mutable std::mutex mu_;
  std::ofstream out_;
  uint64_t count_ = 0;
  std::vector<std::unique_ptr<Sink>> sinks_;
};

}  // namespace rocelab::emu
