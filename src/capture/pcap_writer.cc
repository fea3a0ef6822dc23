#include "capture/pcap_writer.h"

#include <pcap/pcap.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "wire/frame.h"
#include "wire/write_barrier.h"

namespace rocelab::capture {

// The frame around a RoCEv2 packet is built with src/wire's header writers.
using namespace wire;

struct PcapWriter::State {
  std::mutex mu;
  pcap_t* dead = nullptr;
  pcap_dumper_t* dumper = nullptr;
  Options opt;
  uint64_t packets = 0;
  std::vector<std::byte> frame;  // write_roce()'s scratch frame, sized once at open()
  // The FILE's buffer, ours: stdio writes it out only when we flush, and we
  // flush before a record that would not fit, so every write() the file sees
  // ends on a record boundary. A process killed between flushes leaves a
  // capture that reads to its last whole packet; only a SIGKILL landing inside
  // the write() of a flush can cut its last record (the kernel stops a write
  // at a page boundary).
  static constexpr size_t kBufSize = 1 << 20;
  std::unique_ptr<char[]> buf;
  size_t pending = 0;  // bytes in buf not yet written

  bool flush_locked() {
    if (pending == 0) return true;
    if (!write_begin()) return true;  // the process is dying of a signal: leave the file whole
    pending = 0;
    const bool ok = pcap_dump_flush(dumper) == 0;
    write_end();
    return ok;
  }

  ~State() {
    if (dumper != nullptr) pcap_dump_close(dumper);
    if (dead != nullptr) pcap_close(dead);
  }

  void dump_locked(std::chrono::nanoseconds ts, const std::byte* data, size_t len) {
    const int64_t ns = std::max<int64_t>(ts.count(), 0);
    pcap_pkthdr h{};
    h.ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    const int64_t sub = ns % 1'000'000'000;
    // With a nanosecond-precision handle libpcap reads tv_usec as nanoseconds.
    h.ts.tv_usec = static_cast<suseconds_t>(opt.nanosecond ? sub : sub / 1000);
    h.len = static_cast<bpf_u_int32>(len);
    h.caplen = static_cast<bpf_u_int32>(std::min<size_t>(len, opt.snaplen));
    const size_t record = 16 + h.caplen;  // the pcap record header, then the bytes
    if (pending + record > kBufSize - 4096) {  // margin: never let stdio fill it
      // The process is dying of a signal: stdio would write a full buffer out
      // by itself, ending the file inside a record. This one is not recorded.
      if (!write_begin()) return;
      write_end();
      flush_locked();
    }
    pending += record;
    pcap_dump(reinterpret_cast<u_char*>(dumper), &h, reinterpret_cast<const u_char*>(data));
    ++packets;
  }
};

PcapWriter::PcapWriter(std::unique_ptr<State> s) : s_(std::move(s)) {}
PcapWriter::PcapWriter(PcapWriter&&) noexcept = default;
PcapWriter& PcapWriter::operator=(PcapWriter&&) noexcept = default;
PcapWriter::~PcapWriter() = default;

wire::Result<PcapWriter> PcapWriter::open(const std::string& path, Options opt, std::string* detail) {
  auto s = std::make_unique<State>();
  s->opt = opt;
  s->dead = pcap_open_dead_with_tstamp_precision(
      opt.link_type, static_cast<int>(opt.snaplen),
      opt.nanosecond ? PCAP_TSTAMP_PRECISION_NANO : PCAP_TSTAMP_PRECISION_MICRO);
  if (s->dead == nullptr) return WireErrc::kPcapIo;
  // fopen ourselves so that a bad path reports its errno.
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    const int err = errno;
    if (detail != nullptr) *detail = std::strerror(err);
    return std::error_code(err, std::generic_category());
  }
  s->buf = std::make_unique<char[]>(State::kBufSize);
  std::setvbuf(f, s->buf.get(), _IOFBF, State::kBufSize);
  s->dumper = pcap_dump_fopen(s->dead, f);
  if (s->dumper == nullptr) {
    if (detail != nullptr) *detail = pcap_geterr(s->dead);
    std::fclose(f);
    return WireErrc::kPcapIo;
  }
  s->frame.resize(kMaxFrameLen);
  // The file header, on disk at once: an empty capture is still a valid one.
  if (pcap_dump_flush(s->dumper) != 0) return WireErrc::kPcapIo;
  return PcapWriter(std::move(s));
}

std::error_code PcapWriter::write(std::chrono::nanoseconds ts, std::span<const std::byte> frame) {
  if (!s_) return WireErrc::kClosed;
  std::lock_guard lock(s_->mu);
  s_->dump_locked(ts, frame.data(), frame.size());
  return {};
}

std::error_code PcapWriter::write_roce(std::chrono::nanoseconds ts, const wire::IpUdpInfo& ip,
                                       std::span<const std::byte> udp_payload) {
  if (!s_) return WireErrc::kClosed;
  if (udp_payload.size() > kMaxRoceLen) return WireErrc::kOversized;
  // Ethernet (synthesized header) or raw IP; the other link types need more than we know here.
  size_t eth = 0;
  if (s_->opt.link_type == static_cast<int>(LinkType::kEthernet)) {
    eth = kEthHeaderLen;
  } else if (s_->opt.link_type != static_cast<int>(LinkType::kRaw) &&
             s_->opt.link_type != static_cast<int>(LinkType::kRawLinktype)) {
    return WireErrc::kUnsupportedLinkType;
  }
  std::lock_guard lock(s_->mu);
  std::byte* out = s_->frame.data();
  if (eth != 0) {
    write_ethernet(out, mac_for(ip.dst), mac_for(ip.src),
                   ip.dst.v6 ? kEtherTypeIpv6 : kEtherTypeIpv4);
  }
  write_ip_udp(out + eth, ip, udp_payload.size());
  const size_t hdrs = eth + ip_udp_header_len(ip.dst.v6);
  if (!udp_payload.empty()) std::memcpy(out + hdrs, udp_payload.data(), udp_payload.size());
  s_->dump_locked(ts, out, hdrs + udp_payload.size());
  return {};
}

std::error_code PcapWriter::flush() {
  if (!s_) return WireErrc::kClosed;
  std::lock_guard lock(s_->mu);
  if (!s_->flush_locked()) return WireErrc::kPcapIo;
  return {};
}

std::error_code PcapWriter::close() {
  if (!s_) return WireErrc::kClosed;
  std::error_code ec;
  if (pcap_dump_flush(s_->dumper) != 0) ec = WireErrc::kPcapIo;
  s_->pending = 0;
  s_.reset();
  return ec;
}

uint64_t PcapWriter::packets() const {
  if (!s_) return 0;
  std::lock_guard lock(s_->mu);
  return s_->packets;
}

}  // namespace rocelab::capture
