// A PacketTap that writes to a capture::PcapWriter (Ethernet + IP + UDP headers
// synthesized around each RoCEv2 packet, see pcap_writer.h).
#pragma once
#include "capture/pcap_writer.h"
#include "emu/records.h"

namespace rocelab::emu {

class PcapTap final : public PacketTap {
 public:
  // Which directions to record. Two devices of one process that exchange
  // packets would record each packet twice with kBoth: tap kTx on both instead.
  enum class Dirs { kTx, kRx, kBoth };
  // offset is added to the transport clock for the pcap timestamp (e.g. to turn
  // the steady clock into wall-clock time).
  PcapTap(capture::PcapWriter& writer, Dirs dirs, Nanos offset = Nanos(0))
      : writer_(writer), dirs_(dirs), offset_(offset) {}
  void on_packet(Direction dir, Nanos time, const Datagram& d) override;
  void on_batch_end() override;
  uint64_t errors() const { return errors_; }

 private:
  capture::PcapWriter& writer_;
  Dirs dirs_;
  Nanos offset_;
  uint64_t errors_ = 0;
};

}  // namespace rocelab::emu
