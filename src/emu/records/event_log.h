// The Protobuf event log (proto/events.proto): every engine event of one or
// more devices, as length-delimited messages in one file.
#pragma once
#include <fstream>
#include <functional>
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
  // Writes what is buffered (the engine calls it at the end of every batch
  // through the sink). The file never ends inside a message.
  std::error_code flush();

  class Sink;

 private:
  EventLog() = default;
  friend class Sink;
  void write(const std::string& device, const EngineEvent& e);
  static constexpr size_t kBufSize = 1 << 20;
  mutable std::mutex mu_;
  std::unique_ptr<char[]> buf_;  // out_'s buffer: declared first, destroyed after out_
  std::ofstream out_;
  size_t pending_ = 0;           // bytes (at most) in buf_ not yet written
  uint64_t count_ = 0;
  std::vector<std::unique_ptr<Sink>> sinks_;
};

// Reads an event log back: calls on_event for every event, in file order. Each
// event is formatted as one line of text, or as one JSON object (json).
// Returns the number of events; errors: the errno of the open, or
// kTruncated/kMalformed (std::errc::illegal_byte_sequence) for a log that ends
// inside a message or holds garbage (*events_read still says how many came before).
struct EventLine {
  uint64_t time_ns = 0;
  std::string text;  // "0.000123456 rocelab0 PACKET_SENT qp 0x000011 RC SEND Only psn 5 len 4096"
};
std::error_code read_event_log(const std::string& path, bool json,
                               const std::function<void(const EventLine&)>& on_event,
                               uint64_t* events_read);

}  // namespace rocelab::emu
