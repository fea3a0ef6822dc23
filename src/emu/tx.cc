// The transmit path: every packet is built in a pre-allocated frame (IP + UDP
// headers, then BTH .. ICRC), its ICRC computed over exactly the IP header the
// kernel sends (ID 0, DF: see transport.h) unless the transport lets it be
// left out, and sent in batches.
#include <cstring>

#include "emu/engine.h"
#include "wire/byte_order.h"
#include "wire/gsi.h"
#include "wire/icrc.h"

namespace rocelab::emu {

std::byte* Device::Engine::tx_slot() {
  if (tx.n == TxQueue::kFrames) tx_flush();
  return tx.frames[tx.n].data();
}

void Device::Engine::tx_commit(QpImpl& qp, const wire::IpUdpInfo& ip, std::byte* frame, wire::RoceHeaders& h,
                               size_t hdr_len, uint32_t len) {
  tx_commit_raw(qp.qpn, &qp.ctr, ip, frame, h, hdr_len, len);
}

void Device::Engine::tx_commit_raw(uint32_t qpn, Counters* qctr, const wire::IpUdpInfo& ip, std::byte* frame,
                                   wire::RoceHeaders& h, size_t hdr_len, uint32_t len) {
  const size_t iph = wire::ip_udp_header_len(ip.dst.v6);
  const size_t ip_hlen = ip.dst.v6 ? wire::kIpv6HeaderLen : wire::kIpv4HeaderLen;
  std::byte* roce = frame + iph;
  const size_t pad = h.bth.pad_count;
  std::memset(roce + hdr_len + len, 0, pad + wire::kIcrcLen);
  const size_t roce_len = hdr_len + len + pad + wire::kIcrcLen;
  wire::write_ip_udp(frame, ip, roce_len);
  // Left as zeros where nothing on the way reads it and nothing here captures it.
  const bool omit = icrc_optional && cfg.tap == nullptr;
  if (!omit) {
    wire::IcrcAccumulator icrc(frame, ip_hlen, roce);
    icrc.add(std::span<const std::byte>(roce + wire::kBthLen, roce_len - wire::kBthLen - wire::kIcrcLen));
    wire::store_le32(roce + roce_len - wire::kIcrcLen, icrc.value());
  }

  Datagram& d = tx.batch[tx.n++];
  d.ip = ip;
  d.payload = std::span<const std::byte>(roce, roce_len);
  d.icrc_omitted = omit;
  counters.sent_pkts++;
  if (qctr) qctr->sent_pkts++;
  if (cfg.tap) cfg.tap->on_packet(Direction::kTx, transport->now(), d);
  if (logging()) {
    EngineEvent e;
    e.kind = EventKind::kPacketSent;
    e.qpn = qpn;
    e.bth_opcode = h.bth.opcode;
    e.psn = h.bth.psn.value();
    e.dest_qpn = h.bth.dest_qpn.value();
    e.length = static_cast<uint32_t>(roce_len);
    if (qpn == wire::kGsiQpn.value()) describe_mad(std::span<const std::byte>(roce + hdr_len, len), e);
    log(e);
  }
}

void Device::Engine::tx_flush() {
  if (tx.n == 0) return;
  transport->send(std::span<const Datagram>(tx.batch.data(), tx.n));
  tx.n = 0;
  records_flush();
}

void Device::Engine::records_flush() {
  if (cfg.tap) cfg.tap->on_batch_end();
  if (cfg.events) cfg.events->on_batch_end();
}

}  // namespace rocelab::emu
