#include "emu/records/event_log.h"

#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/util/delimited_message_util.h>
#include <google/protobuf/util/json_util.h>

#include <fcntl.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>

#include <cerrno>

#include "proto/events.pb.h"
#include "wire/opcode_table.h"
#include "wire/write_barrier.h"

namespace rocelab::emu {

class EventLog::Sink final : public EventSink {
 public:
  Sink(EventLog* log, std::string device) : log_(log), device_(std::move(device)) {}
  void on_event(const EngineEvent& e) override { log_->write(device_, e); }
  void on_batch_end() override { (void)log_->flush(); }

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
    case EventKind::kRoleSteps: return events::Event::ROLE_STEPS;
  }
  return events::Event::KIND_UNSPECIFIED;
}

}  // namespace

wire::Result<std::unique_ptr<EventLog>> EventLog::open(const std::string& path) {
  std::unique_ptr<EventLog> log(new EventLog());
  // Our buffer (set before open, as filebuf requires): it reaches the file only
  // when we flush, and we flush before a message that would not fit, so the
  // file never ends inside a message (see write()).
  log->buf_ = std::make_unique<char[]>(kBufSize);
  log->out_.rdbuf()->pubsetbuf(log->buf_.get(), kBufSize);
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
  if (pending_ == 0) return out_ ? std::error_code{} : std::error_code(EIO, std::generic_category());
  if (!wire::write_begin()) return {};  // the process is dying of a signal: leave the file whole
  pending_ = 0;
  out_.flush();
  wire::write_end();
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
      if (e.mad_class) {
        m.set_mad_class(e.mad_class);
        m.set_mad_attr(std::string(e.mad_attr));
        m.set_mad_tid(e.mad_tid);
      }
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
    case EventKind::kRoleSteps:
      m.set_psn(e.psn);
      m.set_role(std::string(to_string(e.steps.role)));
      for (uint8_t i = 0; i < e.steps.n; ++i) m.add_states(std::string(role_state_name(e.steps.role, e.steps.state[i])));
      if (e.steps.truncated) m.add_states("...");
      break;
  }
  const size_t size = m.ByteSizeLong() + 5;  // the message and its varint length (at most 5 bytes)
  std::lock_guard lk(mu_);
  if (pending_ + size > kBufSize - 4096) {  // margin: never let the filebuf fill it
    if (!wire::write_begin()) return;
    out_.flush();
    wire::write_end();
    pending_ = 0;
  }
  pending_ += size;
  google::protobuf::util::SerializeDelimitedToOstream(m, &out_);
  ++count_;
}

namespace {

std::string format_text(const events::Event& m) {
  char head[96];
  std::snprintf(head, sizeof head, "%" PRIu64 ".%09" PRIu64 " %s %s qp 0x%06x", m.time_ns() / 1'000'000'000,
                m.time_ns() % 1'000'000'000, m.device().c_str(), events::Event::Kind_Name(m.kind()).c_str(),
                m.qpn());
  std::string s = head;
  char more[160];
  switch (static_cast<int>(m.kind())) {  // an int: the generated enum has sentinels
    case events::Event::WR_POSTED:
      std::snprintf(more, sizeof more, " wr_id %" PRIu64 " %s len %u", m.wr_id(), m.wr_opcode().c_str(), m.length());
      break;
    case events::Event::RECV_POSTED:
      std::snprintf(more, sizeof more, " wr_id %" PRIu64, m.wr_id());
      break;
    case events::Event::PACKET_SENT:
    case events::Event::PACKET_RECEIVED:
    case events::Event::PACKET_DROPPED:
      std::snprintf(more, sizeof more, " %s -> qp 0x%06x psn %u len %u%s%s", m.opcode_name().c_str(), m.dest_qpn(),
                    m.psn(), m.length(), m.reason().empty() ? "" : ": ", m.reason().c_str());
      if (m.mad_class() != 0) {  // QP 1: name the MAD (7: the CM)
        char mad[128];
        if (m.mad_class() == 7) {
          std::snprintf(mad, sizeof mad, ": CM %s tid 0x%016" PRIx64, m.mad_attr().c_str(), m.mad_tid());
        } else {
          std::snprintf(mad, sizeof mad, ": MAD class 0x%02x tid 0x%016" PRIx64, m.mad_class(), m.mad_tid());
        }
        return s + more + mad;
      }
      break;
    case events::Event::TIMER:
      std::snprintf(more, sizeof more, " %s psn %u", m.reason().c_str(), m.psn());
      break;
    case events::Event::COMPLETION:
      std::snprintf(more, sizeof more, " wr_id %" PRIu64 " %s %s len %u", m.wr_id(), m.wc_opcode().c_str(),
                    m.status().c_str(), m.length());
      break;
    case events::Event::QP_STATE_CHANGE:
      std::snprintf(more, sizeof more, " %s -> %s", m.from_state().c_str(), m.to_state().c_str());
      break;
    case events::Event::ASYNC_EVENT:
      std::snprintf(more, sizeof more, " %s", m.async_event().c_str());
      break;
    case events::Event::ROLE_STEPS: {
      std::snprintf(more, sizeof more, " %s psn %u:", m.role().c_str(), m.psn());
      std::string path = more;
      for (const std::string& st : m.states()) path += " " + st;
      return s + path;
    }
    default:
      more[0] = '\0';
      break;
  }
  return s + more;
}

}  // namespace

std::error_code read_event_log(const std::string& path, bool json,
                               const std::function<void(const EventLine&)>& on_event, uint64_t* events_read) {
  *events_read = 0;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::error_code(errno, std::generic_category());
  google::protobuf::io::FileInputStream in(fd);
  in.SetCloseOnDelete(true);
  events::Event m;
  google::protobuf::util::JsonPrintOptions jopt;
  jopt.always_print_primitive_fields = false;
  jopt.preserve_proto_field_names = true;
  EventLine line;
  for (;;) {
    bool clean_eof = false;
    // ParseDelimited* merges into the message: without Clear() a field at its
    // default (psn 0, no reason), which proto3 does not write, would keep the
    // previous event's value.
    m.Clear();
    if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&m, &in, &clean_eof)) {
      if (clean_eof) return {};
      return std::make_error_code(std::errc::illegal_byte_sequence);  // cut inside a message, or garbage
    }
    line.time_ns = m.time_ns();
    if (json) {
      line.text.clear();
      if (!google::protobuf::util::MessageToJsonString(m, &line.text, jopt).ok())
        return std::make_error_code(std::errc::illegal_byte_sequence);
    } else {
      line.text = format_text(m);
    }
    ++*events_read;
    on_event(line);
  }
}

}  // namespace rocelab::emu
