// The field numbers below are proto/stat.proto's; tests/stat/encode_test.cc
// decodes what this writes with libprotobuf and checks every field.
#include "stat/encode.h"

#include <string_view>

#include "stat/pb_writer.h"

namespace rocelab::stat {
namespace {

void put_counters(PbWriter& w, uint32_t field, const emu::Counters& c) {
  c.for_each([&](std::string_view name, uint64_t v) {
    PbWriter m;
    m.bytes(1, name);
    m.varint(2, v);
    w.message(field, m);
  });
}

PbWriter qp_message(const emu::QpSnapshot& q) {
  PbWriter w;
  w.varint(1, q.qpn);
  w.bytes(2, emu::to_string(q.type));
  w.bytes(3, emu::to_string(q.state));
  w.varint(4, q.pd);
  w.varint(5, q.send_cq);
  w.varint(6, q.recv_cq);
  w.varint(7, q.srq);
  w.varint(8, emu::mtu_bytes(q.path_mtu));
  w.varint(9, q.connected);
  if (q.connected) w.bytes(10, q.peer.to_string());
  w.varint(11, q.dest_qpn);
  w.varint(12, q.sq_psn);
  w.varint(13, q.unacked_psn);
  w.varint(14, q.epsn);
  w.varint(15, q.retry_cnt);
  w.varint(16, q.rnr_retry);
  w.varint(17, q.retry_left);
  w.varint(18, q.rnr_retry_left);
  w.varint(19, q.timeout);
  w.varint(20, q.sq_outstanding);
  w.varint(21, q.rq_posted);
  w.varint(22, q.max_send_wr);
  w.varint(23, q.max_recv_wr);
  put_counters(w, 24, q.counters);
  return w;
}

PbWriter cq_message(const emu::CqSnapshot& c) {
  PbWriter w;
  w.varint(1, c.cqn);
  w.varint(2, c.capacity);
  w.varint(3, c.completions);
  w.varint(4, c.has_channel);
  w.varint(5, c.armed);
  w.varint(6, c.overflowed);
  w.varint(7, c.qps);
  return w;
}

PbWriter mr_message(const emu::MrSnapshot& m) {
  PbWriter w;
  w.varint(1, m.lkey);
  w.varint(2, m.rkey);
  w.varint(3, m.addr);
  w.varint(4, m.length);
  w.varint(5, m.iova);
  w.varint(6, m.access);
  w.varint(7, m.pd);
  return w;
}

PbWriter srq_message(const emu::SrqSnapshot& s) {
  PbWriter w;
  w.varint(1, s.srq_num);
  w.varint(2, s.xrc);
  w.varint(3, s.pd);
  w.varint(4, s.max_wr);
  w.varint(5, s.posted);
  w.varint(6, s.limit);
  w.varint(7, s.qps);
  return w;
}

PbWriter mcast_message(const emu::McastSnapshot& g) {
  PbWriter w;
  w.bytes(1, g.group.to_string());
  PbWriter qpns;  // packed, as proto3 writes a repeated scalar
  for (uint32_t q : g.qpns) qpns.raw(q);
  w.bytes(2, qpns.data());
  return w;
}

PbWriter device_message(const emu::DeviceSnapshot& d) {
  PbWriter w;
  w.bytes(1, d.name);
  w.bytes(2, d.address.to_string());
  w.varint(3, d.node_guid);
  w.int64(4, d.qpn_block);
  w.varint(5, emu::mtu_bytes(d.active_mtu));
  w.varint(6, d.pds);
  w.varint(7, d.ahs);
  w.varint(8, d.mws);
  w.varint(9, d.channels);
  w.varint(10, d.xrcds);
  w.int64(11, d.inflight_psns);
  put_counters(w, 12, d.counters);
  for (const auto& q : d.qps) w.message(13, qp_message(q));
  for (const auto& c : d.cqs) w.message(14, cq_message(c));
  for (const auto& m : d.mrs) w.message(15, mr_message(m));
  for (const auto& s : d.srqs) w.message(16, srq_message(s));
  for (const auto& g : d.mcast) w.message(17, mcast_message(g));
  return w;
}

}  // namespace

std::string encode_process(const ProcessInfo& p, std::span<const emu::DeviceSnapshot> devices) {
  PbWriter w;
  w.varint(1, p.pid);
  w.bytes(2, p.comm);
  w.bytes(3, p.cmdline);
  w.varint(4, p.start_ticks);
  w.bytes(5, p.version);
  w.varint(6, p.taken_unix_ns);
  for (const auto& d : devices) w.message(7, device_message(d));
  return w.data();
}

}  // namespace rocelab::stat
