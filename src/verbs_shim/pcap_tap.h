// ROCELAB_PCAP: every datagram a device sends and receives, written through
// libpcap as an Ethernet frame (synthesized MACs, the IP/UDP headers the
// datagram had), so tshark decodes it as RoCE. One writer per device.
#pragma once
#include <pcap/pcap.h>

#include <array>
#include <memory>
#include <mutex>
#include <string>

#include "emu/records.h"
#include "wire/error.h"

namespace rocelab::verbs_shim {

class PcapTap final : public emu::PacketTap {
 public:
  static wire::Result<std::unique_ptr<PcapTap>> open(const std::string& path, std::string* error);
  ~PcapTap() override;
  void on_packet(emu::Direction dir, emu::Nanos time, const emu::Datagram& d) override;

 private:
  PcapTap(pcap_t* dead, pcap_dumper_t* dumper) : dead_(dead), dumper_(dumper) {}
  pcap_t* dead_;
  pcap_dumper_t* dumper_;
  std::mutex mu_;  // taps run under the device lock, but two devices may share a file
  std::array<std::byte, 14 + 40 + 8 + 65536> frame_{};
};

}  // namespace rocelab::verbs_shim
