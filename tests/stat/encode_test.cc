// What the shim writes without libprotobuf (src/stat/encode.cc) is what
// proto/stat.proto says: decoded with libprotobuf, every field of every
// message holds the value put in, and no byte lands in an unknown field.
#include "stat/encode.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "proto/stat.pb.h"
#include "stat/pb_writer.h"

namespace rocelab::stat {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

emu::Counters counters_from(uint64_t base) {
  emu::Counters c;
  uint64_t v = base;
  // Every counter a different non-zero value: a swap or a gap shows.
  c.sent_pkts = v++; c.rcvd_pkts = v++; c.duplicate_request = v++; c.out_of_seq_request = v++;
  c.rcvd_seq_err = v++; c.retry_exceeded_err = v++; c.rnr_nak_retry_err = v++; c.send_rnr_err = v++;
  c.rcvd_rnr_err = v++; c.completer_retry_err = v++; c.ack_deferred = v++; c.rcvd_icrc_err = v++;
  c.icrc_ip_recovered = v++; c.rcvd_hdr_err = v++; c.rdma_sends = v++; c.rdma_recvs = v++; c.qkey_viol = v++;
  c.np_ecn_marked_roce_packets = v++;
  c.np_cnp_sent = v++;
  c.rp_cnp_handled = v++;
  c.rp_cnp_ignored = v++;
  for (auto& d : c.drops) d = v++;
  return c;
}

emu::DeviceSnapshot full_device() {
  emu::DeviceSnapshot d;
  d.name = "rocelab3";
  d.address = wire::IpAddr::v4(10, 1, 2, 3);
  d.node_guid = 0x0123456789ABCDEFull;
  d.qpn_block = -1;
  d.active_mtu = emu::Mtu::k4096;
  d.pds = 2; d.ahs = 3; d.mws = 4; d.channels = 5; d.xrcds = 6;
  d.inflight_psns = -7;  // never negative in the engine; checks the sign survives
  d.counters = counters_from(1000);
  emu::QpSnapshot q;
  q.qpn = 0x12345; q.type = emu::QpType::kUC; q.state = emu::QpState::kRts; q.pd = 2;
  q.send_cq = 3; q.recv_cq = 4; q.srq = 5; q.path_mtu = emu::Mtu::k2048; q.connected = true;
  q.peer = wire::IpAddr::v4(10, 9, 8, 7); q.dest_qpn = 0xABCDEF; q.sq_psn = 0xFFFFFF; q.unacked_psn = 0x10;
  q.epsn = 0x20; q.retry_cnt = 7; q.rnr_retry = 6; q.retry_left = 5; q.rnr_retry_left = 4; q.timeout = 14;
  q.sq_outstanding = 11; q.rq_posted = 12; q.max_send_wr = 13; q.max_recv_wr = 14;
  q.counters = counters_from(2000);
  d.qps.push_back(q);
  d.cqs.push_back({.cqn = 9, .capacity = 128, .completions = 3, .has_channel = true, .armed = true,
                   .overflowed = true, .qps = 2});
  d.mrs.push_back({.lkey = 0x101, .rkey = 0x202, .addr = 0x7f0000001000ull, .length = 1ull << 33,
                   .iova = 0x5000, .access = 0xF, .pd = 2});
  d.srqs.push_back({.srq_num = 77, .xrc = true, .pd = 2, .max_wr = 64, .posted = 60, .limit = 8, .qps = 3});
  d.mcast.push_back({wire::IpAddr::v4(239, 1, 2, 3), {0x11, 0x12, 0xFFFFFF}});
  return d;
}

// Every field of m and of the messages below it is set (non-default) and
// nothing is unknown; returns the fields that are not, by full name.
void check_all_set(const Message& m, std::vector<std::string>* missing) {
  const auto* desc = m.GetDescriptor();
  const auto* refl = m.GetReflection();
  if (!refl->GetUnknownFields(m).empty()) missing->push_back(desc->full_name() + " (unknown fields)");
  for (int i = 0; i < desc->field_count(); ++i) {
    const FieldDescriptor* f = desc->field(i);
    if (f->is_repeated()) {
      if (refl->FieldSize(m, f) == 0) missing->push_back(f->full_name());
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE)
        for (int j = 0; j < refl->FieldSize(m, f); ++j)
          check_all_set(refl->GetRepeatedMessage(m, f, j), missing);
    } else if (!refl->HasField(m, f)) {
      missing->push_back(f->full_name());
    }
  }
}

TEST(StatEncode, EveryFieldDecodesAsWritten) {
  ProcessInfo p{.pid = 4242, .comm = "ib_write_bw", .cmdline = "ib_write_bw -d rocelab0 10.1.2.4",
                .start_ticks = 123456789, .version = "0.1", .taken_unix_ns = 1'700'000'000'000'000'000ull};
  const std::vector<emu::DeviceSnapshot> devs = {full_device()};
  Process m;
  ASSERT_TRUE(m.ParseFromString(encode_process(p, devs)));

  EXPECT_EQ(m.pid(), 4242u);
  EXPECT_EQ(m.comm(), "ib_write_bw");
  EXPECT_EQ(m.cmdline(), "ib_write_bw -d rocelab0 10.1.2.4");
  EXPECT_EQ(m.start_ticks(), 123456789u);
  EXPECT_EQ(m.version(), "0.1");
  EXPECT_EQ(m.taken_unix_ns(), 1'700'000'000'000'000'000ull);
  ASSERT_EQ(m.devices_size(), 1);
  const Device& d = m.devices(0);
  EXPECT_EQ(d.name(), "rocelab3");
  EXPECT_EQ(d.address(), "10.1.2.3");
  EXPECT_EQ(d.node_guid(), 0x0123456789ABCDEFull);
  EXPECT_EQ(d.qpn_block(), -1);
  EXPECT_EQ(d.active_mtu(), 4096u);
  EXPECT_EQ(d.pds(), 2u); EXPECT_EQ(d.ahs(), 3u); EXPECT_EQ(d.mws(), 4u);
  EXPECT_EQ(d.channels(), 5u); EXPECT_EQ(d.xrcds(), 6u);
  EXPECT_EQ(d.inflight_psns(), -7);

  // Counters: every one, by name, in the engine's order.
  std::vector<std::pair<std::string, uint64_t>> want;
  counters_from(1000).for_each([&](std::string_view n, uint64_t v) { want.emplace_back(n, v); });
  ASSERT_EQ(d.counters_size(), static_cast<int>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(d.counters(static_cast<int>(i)).name(), want[i].first);
    EXPECT_EQ(d.counters(static_cast<int>(i)).value(), want[i].second);
  }

  ASSERT_EQ(d.qps_size(), 1);
  const Qp& q = d.qps(0);
  EXPECT_EQ(q.qpn(), 0x12345u); EXPECT_EQ(q.type(), "UC"); EXPECT_EQ(q.state(), "RTS");
  EXPECT_EQ(q.pd(), 2u); EXPECT_EQ(q.send_cq(), 3u); EXPECT_EQ(q.recv_cq(), 4u); EXPECT_EQ(q.srq(), 5u);
  EXPECT_EQ(q.path_mtu(), 2048u); EXPECT_TRUE(q.connected()); EXPECT_EQ(q.peer(), "10.9.8.7");
  EXPECT_EQ(q.dest_qpn(), 0xABCDEFu); EXPECT_EQ(q.sq_psn(), 0xFFFFFFu); EXPECT_EQ(q.unacked_psn(), 0x10u);
  EXPECT_EQ(q.epsn(), 0x20u); EXPECT_EQ(q.retry_cnt(), 7u); EXPECT_EQ(q.rnr_retry(), 6u);
  EXPECT_EQ(q.retry_left(), 5u); EXPECT_EQ(q.rnr_retry_left(), 4u); EXPECT_EQ(q.timeout(), 14u);
  EXPECT_EQ(q.sq_outstanding(), 11u); EXPECT_EQ(q.rq_posted(), 12u);
  EXPECT_EQ(q.max_send_wr(), 13u); EXPECT_EQ(q.max_recv_wr(), 14u);
  ASSERT_EQ(q.counters_size(), static_cast<int>(want.size()));
  EXPECT_EQ(q.counters(0).value(), 2000u);

  ASSERT_EQ(d.cqs_size(), 1);
  EXPECT_EQ(d.cqs(0).cqn(), 9u); EXPECT_EQ(d.cqs(0).capacity(), 128u); EXPECT_EQ(d.cqs(0).completions(), 3u);
  EXPECT_TRUE(d.cqs(0).has_channel()); EXPECT_TRUE(d.cqs(0).armed()); EXPECT_TRUE(d.cqs(0).overflowed());
  EXPECT_EQ(d.cqs(0).qps(), 2u);
  ASSERT_EQ(d.mrs_size(), 1);
  EXPECT_EQ(d.mrs(0).lkey(), 0x101u); EXPECT_EQ(d.mrs(0).rkey(), 0x202u);
  EXPECT_EQ(d.mrs(0).addr(), 0x7f0000001000ull); EXPECT_EQ(d.mrs(0).length(), 1ull << 33);
  EXPECT_EQ(d.mrs(0).iova(), 0x5000u); EXPECT_EQ(d.mrs(0).access(), 0xFu); EXPECT_EQ(d.mrs(0).pd(), 2u);
  ASSERT_EQ(d.srqs_size(), 1);
  EXPECT_EQ(d.srqs(0).srq_num(), 77u); EXPECT_TRUE(d.srqs(0).xrc()); EXPECT_EQ(d.srqs(0).pd(), 2u);
  EXPECT_EQ(d.srqs(0).max_wr(), 64u); EXPECT_EQ(d.srqs(0).posted(), 60u); EXPECT_EQ(d.srqs(0).limit(), 8u);
  EXPECT_EQ(d.srqs(0).qps(), 3u);
  ASSERT_EQ(d.mcast_size(), 1);
  EXPECT_EQ(d.mcast(0).group(), "239.1.2.3");
  ASSERT_EQ(d.mcast(0).qpns_size(), 3);
  EXPECT_EQ(d.mcast(0).qpns(2), 0xFFFFFFu);

  // And nothing of the schema is left out (a field added to stat.proto and
  // not to encode.cc fails here).
  std::vector<std::string> missing;
  check_all_set(m, &missing);
  EXPECT_TRUE(missing.empty()) << ::testing::PrintToString(missing);
}

TEST(StatEncode, DefaultsAreLeftOutAndElementsKept) {
  // A QP in RESET with everything zero is still an element of qps, and a
  // zero counter is still named.
  emu::DeviceSnapshot d;
  d.name = "rocelab0";
  d.qps.emplace_back();
  d.cqs.emplace_back();
  Process m;
  const std::vector<emu::DeviceSnapshot> devs = {d};
  ASSERT_TRUE(m.ParseFromString(encode_process({}, devs)));
  ASSERT_EQ(m.devices_size(), 1);
  EXPECT_EQ(m.devices(0).qps_size(), 1);
  EXPECT_EQ(m.devices(0).cqs_size(), 1);
  EXPECT_EQ(m.devices(0).qps(0).state(), "RESET");
  EXPECT_FALSE(m.devices(0).qps(0).connected());
  EXPECT_EQ(m.devices(0).qps(0).peer(), "");
  ASSERT_GT(m.devices(0).counters_size(), 0);
  EXPECT_EQ(m.devices(0).counters(0).name(), "sent_pkts");
  EXPECT_EQ(m.devices(0).counters(0).value(), 0u);
}

TEST(StatEncode, VarintsAtTheirLimits) {
  PbWriter w;
  w.varint(1, ~uint64_t{0});
  w.int64(2, -1);
  w.varint(536870911, 1);  // the largest field number
  Mr probe;  // fields 1, 2 are uint32: a 64-bit value is cut, as protobuf does
  std::string bytes = w.data();
  ASSERT_TRUE(probe.ParseFromString(bytes));
  EXPECT_EQ(probe.lkey(), 0xFFFFFFFFu);
  Device dev;  // field 4 (qpn_block) is int32
  PbWriter w2;
  w2.int64(4, -1);
  ASSERT_TRUE(dev.ParseFromString(w2.data()));
  EXPECT_EQ(dev.qpn_block(), -1);
}

}  // namespace
}  // namespace rocelab::stat
