// The records at the engine's edge: the Protobuf event log (read back with
// the delimited-message parser) and the pcap tap (read back with libpcap via
// wire::decode_frame, ICRC checked).
#include <fcntl.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/util/delimited_message_util.h>
#include <pcap/pcap.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "emu/records/event_log.h"
#include "emu/records/pcap_tap.h"
#include "proto/events.pb.h"
#include "tests/emu/pair.h"
#include "wire/frame.h"

namespace rocelab::emu::test {
namespace {

constexpr unsigned kAll = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead;

std::string tmp_path(const char* name) {
  return ::testing::TempDir() + "/" + name + std::to_string(::getpid());
}

// The reader parses each message on its own: a field at its proto3 default
// (PSN 0, no reason: not written) reads back as that default, not as the
// previous event's value: a packet of PSN 0 sent after a retransmission
// timeout for PSN 1 reads back as PSN 0, with no reason.
TEST(Records, EventLogReadsDefaultsAsWritten) {
  const std::string path = tmp_path("emu_events_defaults");
  {
    auto log = EventLog::open(path);
    ASSERT_TRUE(log);
    EventSink* sink = (*log)->sink_for("A");
    EngineEvent e;
    e.kind = EventKind::kTimer;
    e.psn = 1;
    e.reason = "retransmit";
    sink->on_event(e);
    EngineEvent p;
    p.kind = EventKind::kPacketSent;
    p.bth_opcode = 0x0A;
    p.psn = 0;
    sink->on_event(p);
    ASSERT_FALSE((*log)->flush());
  }
  std::vector<std::string> lines;
  uint64_t n = 0;
  ASSERT_FALSE(read_event_log(path, false, [&](const EventLine& l) { lines.push_back(l.text); }, &n));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("retransmit psn 1"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("psn 0 "), std::string::npos) << lines[1];
  EXPECT_EQ(lines[1].find("retransmit"), std::string::npos) << lines[1];
}

TEST(Records, EventLogAndPcapOfOneWrite) {
  const std::string ev_path = tmp_path("emu_events"), pcap_path = tmp_path("emu_pcap");
  {
    Env env(Net::kSim);
    Node a = env.make_node(1, QpType::kRC, 8192, kAll);
    Node b = env.make_node(2, QpType::kRC, 8192, kAll);
    auto log = EventLog::open(ev_path);
    ASSERT_TRUE(log);
    auto pcap = capture::PcapWriter::open(pcap_path);
    ASSERT_TRUE(pcap);
    PcapTap tap_a(*pcap, PcapTap::Dirs::kTx), tap_b(*pcap, PcapTap::Dirs::kTx);
    a.dev->set_event_sink((*log)->sink_for("A"));
    b.dev->set_event_sink((*log)->sink_for("B"));
    a.dev->set_tap(&tap_a);
    b.dev->set_tap(&tap_b);
    ASSERT_FALSE(connect_pair(*a.dev, *a.qp, *b.dev, *b.qp, ConnectOptions{}));
    fill_pattern(a.buf, 0, 3000, 1);
    Sge s{a.addr(), 3000, a.mr->lkey()};
    SendWr wr = make_wr(WrOpcode::kRdmaWrite, &s, 1, 5);
    wr.rdma = {b.addr(), b.mr->rkey()};
    ASSERT_FALSE(post_send(a.qp, wr));
    ASSERT_EQ(env.wait_wcs(a.scq, 1, {a.dev.get(), b.dev.get()}).size(), 1u);
    a.dev->set_tap(nullptr);
    b.dev->set_tap(nullptr);
    ASSERT_FALSE(pcap->close());
  }
  // Event log: the state changes, the WR, 3 WRITE packets, the ACK, the completion.
  int fd = ::open(ev_path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  google::protobuf::io::FileInputStream in(fd);
  in.SetCloseOnDelete(true);
  std::vector<events::Event> evs;
  for (;;) {
    events::Event e;
    bool eof = false;
    if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&e, &in, &eof)) {
      EXPECT_TRUE(eof);
      break;
    }
    evs.push_back(e);
  }
  int sent_a = 0, state_changes = 0, completions = 0, posted = 0;
  std::vector<std::string> resp_paths, comp_paths;  // ROLE_STEPS: the roles' states, joined
  uint64_t last_time = 0;
  for (const auto& e : evs) {
    EXPECT_GE(e.time_ns(), last_time);  // one fabric clock
    last_time = e.time_ns();
    if (e.kind() == events::Event::PACKET_SENT && e.device() == "A") {
      ++sent_a;
      EXPECT_NE(e.opcode_name().find("RDMA WRITE"), std::string::npos);
    }
    if (e.kind() == events::Event::QP_STATE_CHANGE) ++state_changes;
    if (e.kind() == events::Event::ROLE_STEPS) {
      std::string path;
      for (const auto& st : e.states()) path += (path.empty() ? "" : " ") + st;
      (e.role() == "responder" ? resp_paths : comp_paths).push_back(e.device() + ": " + path);
    }
    if (e.kind() == events::Event::WR_POSTED) {
      ++posted;
      EXPECT_EQ(e.wr_opcode(), "RDMA_WRITE");
      EXPECT_EQ(e.length(), 3000u);
    }
    if (e.kind() == events::Event::COMPLETION && e.device() == "A") {
      ++completions;
      EXPECT_EQ(e.status(), "SUCCESS");
      EXPECT_EQ(e.wr_id(), 5u);
    }
  }
  EXPECT_EQ(sent_a, 3);
  EXPECT_EQ(state_changes, 6);  // INIT, RTR, RTS on each side
  EXPECT_EQ(posted, 1);
  EXPECT_EQ(completions, 1);
  // The roles' state machines by name (rxe's): B's responder ran once per WRITE
  // packet, A's completer once for the ACK.
  const std::string resp_ok = "B: get_req chk_psn chk_op_seq chk_op_valid chk_resource chk_length chk_rkey execute complete acknowledge done";
  EXPECT_EQ(resp_paths, (std::vector<std::string>{resp_ok, resp_ok, resp_ok}));
  EXPECT_EQ(comp_paths, (std::vector<std::string>{"A: get_wqe check_psn check_ack write_send comp_wqe done"}));

  // pcap: 3 WRITE packets and 1 ACK, every ICRC right.
  char err[PCAP_ERRBUF_SIZE];
  pcap_t* p = pcap_open_offline(pcap_path.c_str(), err);
  ASSERT_TRUE(p) << err;
  pcap_pkthdr* h;
  const u_char* data;
  std::vector<uint8_t> ops;
  while (pcap_next_ex(p, &h, &data) == 1) {
    auto f = wire::decode_frame(pcap_datalink(p), {reinterpret_cast<const std::byte*>(data), h->caplen});
    ASSERT_TRUE(f);
    EXPECT_TRUE(f->icrc_ok());
    EXPECT_GE(f->ip.info.sport, 0xC000);
    ops.push_back(f->roce.hdr.bth.opcode);
  }
  pcap_close(p);
  EXPECT_EQ(ops, (std::vector<uint8_t>{wire::op::kRcWriteFirst, wire::op::kRcWriteMiddle,
                                       wire::op::kRcWriteLast, wire::op::kRcAck}));
  ::unlink(ev_path.c_str());
  ::unlink(pcap_path.c_str());
}

}  // namespace
}  // namespace rocelab::emu::test
