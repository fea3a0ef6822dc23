#include "verbs_shim/pcap_tap.h"

#include <sys/time.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "wire/ip_udp.h"

namespace rocelab::verbs_shim {

wire::Result<std::unique_ptr<PcapTap>> PcapTap::open(const std::string& path, std::string* error) {
  pcap_t* dead = pcap_open_dead(DLT_EN10MB, 65535);
  if (!dead) return std::error_code(ENOMEM, std::generic_category());
  pcap_dumper_t* dumper = pcap_dump_open(dead, path.c_str());
  if (!dumper) {
    if (error) *error = pcap_geterr(dead);
    pcap_close(dead);
    return std::error_code(EIO, std::generic_category());
  }
  return std::unique_ptr<PcapTap>(new PcapTap(dead, dumper));
}

PcapTap::~PcapTap() {
  pcap_dump_close(dumper_);
  pcap_close(dead_);
}

void PcapTap::on_packet(emu::Direction, emu::Nanos, const emu::Datagram& d) {
  const size_t ip_len = d.ip.src.v6 ? wire::kIpv6HeaderLen : wire::kIpv4HeaderLen;
  const size_t hdr = wire::kEthHeaderLen + ip_len + wire::kUdpHeaderLen;
  if (hdr + d.payload.size() > frame_.size()) return;  // larger than any RoCEv2 packet
  std::lock_guard lock(mu_);
  std::byte* out = frame_.data();
  wire::write_ethernet(out, wire::mac_for(d.ip.dst), wire::mac_for(d.ip.src),
                       d.ip.src.v6 ? wire::kEtherTypeIpv6 : wire::kEtherTypeIpv4);
  wire::write_ip_udp(out + wire::kEthHeaderLen, d.ip, d.payload.size());
  std::memcpy(out + hdr, d.payload.data(), d.payload.size());
  // Wall-clock time: captures from two processes line up (the transport's
  // clock is per process).
  auto wall = std::chrono::system_clock::now().time_since_epoch();
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(wall).count();
  pcap_pkthdr h{};
  h.ts.tv_sec = static_cast<time_t>(us / 1'000'000);
  h.ts.tv_usec = static_cast<suseconds_t>(us % 1'000'000);
  h.caplen = h.len = static_cast<bpf_u_int32>(hdr + d.payload.size());
  pcap_dump(reinterpret_cast<u_char*>(dumper_), &h, reinterpret_cast<const u_char*>(out));
}

}  // namespace rocelab::verbs_shim
