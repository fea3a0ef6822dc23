// Writing pcap files through libpcap (pcap_open_dead + pcap_dump). Two uses:
//  - the engine's packet tap: write_roce() for every RoCEv2 packet sent or
//    received, with Ethernet + IP + UDP headers synthesized around it;
//  - tools and tests that build whole frames themselves: write().
//
// Cost per packet: one mutex, one copy into a buffer allocated at open() time,
// one buffered fwrite inside libpcap. No heap allocation per packet.
//
// Thread-safety: write(), write_roce(), flush() and packets() may be called from
// several threads at once (an internal mutex serializes them; packets land in
// the file in the order the calls take the lock). open(), close(), moving and
// destruction must not race with any other call on the same writer.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <system_error>

#include "wire/error.h"
#include "wire/ip_udp.h"

namespace rocelab::capture {

class PcapWriter {
 public:
  struct Options {
    int link_type = 1;          // DLT_EN10MB; write_roce() needs Ethernet or raw IP (12)
    uint32_t snaplen = 65535;   // longer frames are cut to this length (caplen < len)
    bool nanosecond = false;    // nanosecond pcap magic (0xa1b23c4d); default micro
  };

  // Creates (truncates) path. Errors: the errno of fopen (std::generic_category),
  // or kPcapIo when libpcap refuses; *detail gets libpcap's text when given.
  static wire::Result<PcapWriter> open(const std::string& path, Options opt,
                                 std::string* detail = nullptr);
  static wire::Result<PcapWriter> open(const std::string& path) { return open(path, Options{}); }

  PcapWriter(PcapWriter&&) noexcept;
  PcapWriter& operator=(PcapWriter&&) noexcept;
  ~PcapWriter();  // closes (and flushes) the file

  // Appends one frame of the writer's link type. ts: time since the Unix epoch
  // (or since a simulation's virtual time 0); rounded down to microseconds
  // unless Options::nanosecond. Errors: kClosed.
  std::error_code write(std::chrono::nanoseconds ts, std::span<const std::byte> frame);

  // Appends a RoCEv2 packet: udp_payload is the transport packet (BTH .. ICRC),
  // written as given; the IP and UDP headers come from ip (IPv4 when
  // !ip.dst.v6; write_ip_udp's rules: UDP checksum 0, lengths computed) and,
  // for an Ethernet writer, a synthesized Ethernet header (MACs from mac_for).
  // For Wireshark to decode the packet one of the UDP ports must be 4791 and the
  // other one higher (it tries the lower port first): use sport >= 49152.
  // Errors: kClosed, kOversized (udp_payload > kMaxRoceLen), kUnsupportedLinkType.
  std::error_code write_roce(std::chrono::nanoseconds ts, const wire::IpUdpInfo& ip,
                             std::span<const std::byte> udp_payload);

  // Pushes buffered packets to the file (pcap_dump_flush; nothing to do when
  // none are buffered). Between flushes the writer never lets a partial record
  // reach the file: a process killed then leaves a capture that decodes to its
  // last whole packet (a SIGKILL inside the flush's own write() can still cut
  // the last record). Errors: kPcapIo, kClosed.
  std::error_code flush();
  // Flushes and closes; later writes return kClosed. Errors: kPcapIo on a failed flush.
  std::error_code close();

  bool is_open() const { return s_ != nullptr; }
  uint64_t packets() const;  // frames written so far

 private:
  struct State;
  explicit PcapWriter(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace rocelab::capture
