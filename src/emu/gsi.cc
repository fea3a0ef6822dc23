// QP 1 (emu/gsi.h): what arrives for the GSI goes to its client after the
// checks a GSI QP makes; MADs leave through the normal transmit path.
#include <cerrno>
#include <cstring>

#include "emu/engine.h"
#include "wire/byte_order.h"
#include "wire/cm_mad.h"
#include "wire/icrc.h"
#include "wire/gsi.h"
#include "wire/mad.h"

namespace rocelab::emu {

// Called from receive() (device lock held) for a packet to QP 1 that passed
// the ICRC and P_Key checks, when a client is installed.
void Device::Engine::gsi_receive(const wire::RocePacket& pkt, const Datagram& d) {
  if (!wire::is_to_gsi(pkt)) return drop(nullptr, d, "not a MAD", &Counters::rcvd_hdr_err);
  // IBTA 10.2.5 / C10-15: QP 1 accepts only the well-known GSI Q_Key.
  if (pkt.hdr.deth.qkey != wire::kGsiQkey) {
    counters.qkey_viol += 1;
    return drop(nullptr, d, "Q_Key", &Counters::rcvd_hdr_err);
  }
  if (!wire::is_gsi_mad(pkt)) return drop(nullptr, d, "not a MAD", &Counters::rcvd_hdr_err);
  counters.rcvd_pkts++;
  if (logging()) {
    EngineEvent e;
    e.kind = EventKind::kPacketReceived;
    e.qpn = wire::kGsiQpn.value();
    e.bth_opcode = pkt.hdr.bth.opcode;
    e.psn = pkt.hdr.bth.psn.value();
    e.dest_qpn = pkt.hdr.bth.dest_qpn.value();
    e.length = static_cast<uint32_t>(d.payload.size());
    describe_mad(pkt.payload, e);
    log(e);
  }
  GsiMad m;
  m.ip = d.ip;
  m.src_qp = pkt.hdr.deth.src_qpn.value();
  m.mad = pkt.payload;
  gsi->on_mad(m);
}

void describe_mad(std::span<const std::byte> mad, EngineEvent& e) {
  auto h = wire::parse_mad_header(mad);
  if (!h) return;
  e.mad_class = h->mgmt_class;
  e.mad_tid = h->tid;
  if (h->mgmt_class == static_cast<uint8_t>(wire::MgmtClass::kCm))
    e.mad_attr = wire::to_string(static_cast<wire::CmAttr>(h->attr_id));
}

std::error_code Device::set_gsi_client(GsiClient* client) {
  std::lock_guard lk(engine_->mu);
  Engine& e = *engine_;
  if (client && e.gsi && e.gsi != client) return errc(EBUSY);
  if (client && !e.gsi) {
    // QP 1's UDP source port, from the QPN hash as for every QP (qp.cc).
    auto port = e.transport->reserve_source_port(preferred_source_port(1));
    if (!port) return port.error();
    e.gsi_sport = *port;
  }
  e.gsi = client;
  return {};
}

void Device::run_locked(const std::function<void()>& fn) {
  std::lock_guard lk(engine_->mu);
  fn();
  engine_->tx_flush();
}

namespace {
// The IP and UDP headers of a MAD from QP 1 to dst (ID 0 and DF, see transport.h).
wire::IpUdpInfo gsi_ip(const Device::Engine& e, const wire::IpAddr& dst, uint8_t tclass) {
  wire::IpUdpInfo ip;
  ip.src = e.transport->local_address();
  ip.dst = dst;
  ip.sport = e.gsi_sport;
  ip.dport = wire::kRoceV2Port;
  ip.tclass = tclass;
  ip.ip_id = 0;
  ip.df = true;
  return ip;
}
}  // namespace

std::error_code Device::send_mad_locked(const wire::IpAddr& dst, std::span<const std::byte> mad,
                                        uint8_t tclass) {
  if (mad.size() != wire::kMadLen) return errc(EINVAL);
  Engine& e = *engine_;
  const wire::IpUdpInfo ip = gsi_ip(e, dst, tclass);
  wire::RoceHeaders h = wire::gsi_headers(wire::Psn(e.gsi_psn));
  e.gsi_psn = (e.gsi_psn + 1) & 0xFFFFFF;
  std::byte* frame = e.tx_slot();
  const size_t iph = wire::ip_udp_header_len(dst.v6);
  auto hl = wire::encode_headers(std::span<std::byte>(frame + iph, wire::kMaxRoceLen), h);
  if (!hl) return hl.error();
  std::memcpy(frame + iph + *hl, mad.data(), mad.size());
  e.tx_commit_raw(wire::kGsiQpn.value(), nullptr, ip, frame, h, *hl, static_cast<uint32_t>(mad.size()));
  return {};
}

wire::Result<size_t> Device::mad_datagram_locked(const wire::IpAddr& dst, std::span<const std::byte> mad,
                                                 uint8_t tclass, std::span<std::byte> out) const {
  if (mad.size() != wire::kMadLen) return errc(EINVAL);
  const Engine& e = *engine_;
  const wire::IpUdpInfo ip = gsi_ip(e, dst, tclass);
  const size_t iph = wire::ip_udp_header_len(dst.v6);
  const size_t ip_hlen = dst.v6 ? wire::kIpv6HeaderLen : wire::kIpv4HeaderLen;
  if (out.size() < iph + wire::kMaxRoceLen) return errc(EINVAL);
  const wire::RoceHeaders h = wire::gsi_headers(wire::Psn(e.gsi_psn));
  auto hl = wire::encode_headers(out.subspan(iph, wire::kMaxRoceLen), h);
  if (!hl) return hl.error();
  std::byte* roce = out.data() + iph;
  std::memcpy(roce + *hl, mad.data(), mad.size());
  const size_t roce_len = *hl + mad.size() + wire::kIcrcLen;
  wire::write_ip_udp(out.data(), ip, roce_len);
  wire::IcrcAccumulator icrc(out.data(), ip_hlen, roce);
  icrc.add(std::span<const std::byte>(roce + wire::kBthLen, roce_len - wire::kBthLen - wire::kIcrcLen));
  wire::store_le32(roce + roce_len - wire::kIcrcLen, icrc.value());
  return iph + roce_len;
}

}  // namespace rocelab::emu
