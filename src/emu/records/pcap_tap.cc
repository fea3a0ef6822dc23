#include "emu/records/pcap_tap.h"

namespace rocelab::emu {

void PcapTap::on_packet(Direction dir, Nanos time, const Datagram& d) {
  if ((dir == Direction::kTx && dirs_ == Dirs::kRx) || (dir == Direction::kRx && dirs_ == Dirs::kTx)) return;
  if (writer_.write_roce(time + offset_, d.ip, d.payload)) ++errors_;
}

void PcapTap::on_batch_end() {
  if (writer_.flush()) ++errors_;
}

}  // namespace rocelab::emu
