#include "emu/records/event_log.h"

#include <google/protobuf/util/delimited_message_util.h>

#include <cerrno>

#include "proto/events.pb.h"
#include "wire/opcode_table.h"

namespace rocelab::emu {

class EventLog::Sink final : public EventSink {
 public:
  Sink(EventLog* log, std::string device) : log_(log), device_(std::move(device)) {}
  void on_event(const EngineEvent& e) override { log_->write(device_, e); }

 private:
  EventLog* log_;
  std::string device_;
};

namespace {

events::Event::Kind kind_of(EventKind k) {
  switch (k) {
    case EventKind::kWrPosted: return events::Event::WR_POSTED;
    case EventKind::kRecvPosted: return events::Event::RECV_POSTED;
    case EventKind::kPacketSent: return events::Event::PACKET_SENT;
    case EventKind::kPacketReceived: return events::Event::PACKET_RECEIVED;
    case EventKind::kPacketDropped: return events::Event::PACKET_DROPPED;
    case EventKind::kTimer: return events::Event::TIMER;
    case EventKind::kCompletion: return events::Event::COMPLETION;
    case EventKind::kQpStateChange: return events::Event::QP_STATE_CHANGE;
    case EventKind::kAsyncEvent: return events::Event::ASYNC_EVENT;
  }
  return events::Event::KIND_UNSPECIFIED;
}

}  // namespace

wire::Result<std::unique_ptr<EventLog>> EventLog::open(const std::string& path) {
  std::unique_ptr<EventLog> log(new EventLog());
  log->out_.open(path, std::ios::binary | std::ios::trunc);
  if (!log->out_) return std::error_code(errno ? errno : EIO, std::generic_category());
  return log;
}

EventLog::~EventLog() { flush(); }

EventSink* EventLog::sink_for(const std::string& device) {
  std::lock_guard lk(mu_);
  sinks_.push_back(std::make_unique<Sink>(this, device));
  return sinks_.back().get();
}

uint64_t EventLog::events() const {
  std::lock_guard lk(mu_);
  return count_;
}

std::error_code EventLog::flush() {
  std::lock_guard lk(mu_);
  out_.flush();
  return out_ ? std::error_code{} : std::error_code(EIO, std::generic_category());
}

void EventLog::write(const std::string& device, const EngineEvent& e) {
  events::Event m;
  m.set_time_ns(static_cast<uint64_t>(e.time.count()));
  m.set_device(device);
  m.set_kind(kind_of(e.kind));
  m.set_qpn(e.qpn);
  switch (e.kind) {
    case EventKind::kWrPosted:
      m.set_wr_id(e.wr_id);
      m.set_wr_opcode(std::string(to_string(e.wr_opcode)));
      m.set_length(e.length);
      break;
    case EventKind::kRecvPosted:
      m.set_wr_id(e.wr_id);
      break;
    case EventKind::kPacketSent:
    case EventKind::kPacketReceived:
    case EventKind::kPacketDropped:
      m.set_bth_opcode(e.bth_opcode);
      m.set_opcode_name(std::string(wire::op_info(e.bth_opcode).name));
      m.set_psn(e.psn);
      m.set_dest_qpn(e.dest_qpn);
      m.set_length(e.length);
      m.set_reason(std::string(e.reason));
      break;
    case EventKind::kTimer:
      m.set_psn(e.psn);
      m.set_reason(std::string(e.reason));
      break;
    case EventKind::kCompletion:
      m.set_wr_id(e.wr_id);
      m.set_status(std::string(to_string(e.status)));
      m.set_wc_opcode(std::string(to_string(e.wc_opcode)));
      m.set_length(e.length);
      break;
    case EventKind::kQpStateChange:
      m.set_from_state(std::string(to_string(e.from)));
      m.set_to_state(std::string(to_string(e.to)));
      break;
    case EventKind::kAsyncEvent:
      m.set_async_event(std::string(to_string(e.async)));
      break;
  }
  std::lock_guard lk(mu_);
  google::protobuf::util::SerializeDelimitedToOstream(m, &out_);
  ++count_;
}

}  // namespace rocelab::emu
