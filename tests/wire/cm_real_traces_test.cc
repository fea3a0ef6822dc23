// CM MADs in other people's captures (../shared/traces/public): the kernel's
// CM over Soft-RoCE (montybeatnik_*.pcap: an rdma_cm connection over RDMA_PS_TCP,
// REQ REP RTU, data, DREQ DREP) and native InfiniBand (srinivaskoritala, ERF).
// Our decoder must agree with tshark on every CM field it shows and the
// connection must hang together: comm IDs pair up, the rdma_cm header names the
// IP addresses the packets travel between, and the data that follows uses the
// QPNs and starting PSNs the REQ and REP announced. Label `external`.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "capture/pcap_reader.h"
#include "tests/external.h"
#include "tests/wire/run_util.h"
#include "tests/wire/tshark_fields.h"
#include "wire/cm_mad.h"
#include "wire/cma_hdr.h"
#include "wire/gsi.h"
#include "wire/ib_native.h"

namespace rocelab::wire {
namespace {

using capture::PcapReader;

using namespace testutil;
namespace fs = std::filesystem;

const fs::path kDir = fs::path(ROCELAB_SHARED_DIR) / "traces" / "public";

struct Seen {
  DecodedFrame frame;
  std::optional<CmMad> cm;
};

TEST(RealCmTraces, SoftRoceRdmaCmConnectionDecodesAndHangsTogether) {
  ROCELAB_REQUIRE_EXTERNAL(kDir);
  for (const char* name : {"montybeatnik_test.pcap", "montybeatnik_roce_capture_read-write-ecn.pcap"}) {
    SCOPED_TRACE(name);
    const std::string path = (kDir / name).string();
    // The captures also hold ARP and other non-RoCE frames: skip those.
    auto reader = PcapReader::open(path);
    ASSERT_TRUE(reader) << reader.error().message();
    std::vector<std::vector<std::byte>> storage;
    std::vector<DecodedFrame> frames;
    storage.reserve(256);  // frames point into storage: no reallocation
    for (;;) {
      auto f = reader->next();
      ASSERT_TRUE(f);
      if (!f->has_value()) break;
      storage.emplace_back((*f)->data.begin(), (*f)->data.end());
      auto d = decode_frame(reader->link_type(), storage.back());
      if (!d && d.error() == make_error_code(WireErrc::kNotRoce)) continue;
      ASSERT_TRUE(d) << d.error().message();
      frames.push_back(*d);
    }
    ASSERT_LT(storage.size(), 256u);
    std::vector<Seen> seen;
    for (const DecodedFrame& d : frames) {
      Seen s{d, std::nullopt};
      if (is_gsi_mad(d.roce)) {
        auto m = parse_cm_mad(d.roce.payload);
        ASSERT_TRUE(m) << m.error().message();
        s.cm = *m;
        EXPECT_EQ(d.roce.hdr.deth.qkey, kGsiQkey);
        EXPECT_EQ(d.roce.hdr.deth.src_qpn, kGsiQpn);
        EXPECT_EQ(d.roce.hdr.bth.pkey, 0xFFFF);
        EXPECT_TRUE(d.roce.hdr.bth.ack_req);  // what gsi_headers() copies
      }
      seen.push_back(s);
    }
    // REQ REP RTU first, DREQ and DREP last, all with the active side's TID.
    ASSERT_GE(seen.size(), 6u);
    ASSERT_TRUE(seen[0].cm && seen[1].cm && seen[2].cm);
    ASSERT_TRUE(seen[seen.size() - 2].cm && seen.back().cm);
    const auto& req = std::get<CmReq>(seen[0].cm->msg);
    const auto& rep = std::get<CmRep>(seen[1].cm->msg);
    const auto& rtu = std::get<CmRtu>(seen[2].cm->msg);
    const auto& dreq = std::get<CmDreq>(seen[seen.size() - 2].cm->msg);
    const auto& drep = std::get<CmDrep>(seen.back().cm->msg);
    for (const Seen& s : seen) {
      if (!s.cm) continue;
      EXPECT_EQ(s.cm->hdr.tid, seen[0].cm->hdr.tid);
      EXPECT_EQ(s.cm->hdr.method, mad_method::kSend);
      EXPECT_EQ(s.cm->hdr.class_version, kCmClassVersion);
    }
    EXPECT_EQ(rep.remote_comm_id, req.local_comm_id);
    EXPECT_EQ(rtu.local_comm_id, req.local_comm_id);
    EXPECT_EQ(rtu.remote_comm_id, rep.local_comm_id);
    EXPECT_EQ(dreq.local_comm_id, req.local_comm_id);
    EXPECT_EQ(dreq.remote_comm_id, rep.local_comm_id);
    EXPECT_EQ(dreq.remote_qpn, rep.local_qpn);
    EXPECT_EQ(drep.remote_comm_id, req.local_comm_id);

    // rdma_cm: RDMA_PS_TCP, port 7471; the header and the GIDs name the IP hosts.
    const IpUdpInfo& ip = seen[0].frame.ip.info;
    auto svc = parse_rdma_cm_service_id(req.service_id);
    ASSERT_TRUE(svc);
    EXPECT_EQ(svc->port_space, rdma_ps::kTcp);
    EXPECT_EQ(svc->port, 7471);
    auto cma = parse_cma_hdr(std::as_bytes(std::span(req.private_data)));
    ASSERT_TRUE(cma) << cma.error().message();
    EXPECT_EQ(cma->src, ip.src);
    EXPECT_EQ(cma->dst, ip.dst);
    EXPECT_NE(cma->port, 0);
    EXPECT_EQ(req.primary.local_gid, ip.src.gid());
    EXPECT_EQ(req.primary.remote_gid, ip.dst.gid());
    EXPECT_EQ(req.primary.local_lid, 0xFFFF);  // permissive LID on RoCE
    EXPECT_EQ(req.transport, CmTransport::kRc);

    // The first RC packet from the active side goes to the REP's QPN with the
    // REP's starting PSN: each side's Starting PSN is what it expects to
    // receive (the kernel's cm_rep_handler: sq_psn = REP starting PSN).
    const Seen& data = seen[3];
    ASSERT_FALSE(data.cm);
    EXPECT_EQ(data.frame.ip.info.src, ip.src);
    EXPECT_EQ(data.frame.roce.hdr.bth.dest_qpn, rep.local_qpn);
    EXPECT_EQ(data.frame.roce.hdr.bth.psn, rep.starting_psn);
    // And the passive side answers to the REQ's QPN.
    const Seen& ack = seen[4];
    EXPECT_EQ(ack.frame.ip.info.src, ip.dst);
    EXPECT_EQ(ack.frame.roce.hdr.bth.dest_qpn, req.local_qpn);

    // tshark reads the same values.
    const std::string cmd = kTshark + " -r " + quote(path) +
                            " -Y infiniband.mad -T fields -E separator=/t"
                            " -e infiniband.mad.attributeid -e infiniband.mad.transactionid"
                            " -e infiniband.cm.req.serviceid -e infiniband.cm.req.localqpn"
                            " -e infiniband.cm.req.startpsn -e infiniband.cm.rep.localqpn"
                            " -e infiniband.cm.rep.startpsn -e infiniband.cm.req.ip_cm.sport";
    Output r = run(cmd);
    ASSERT_EQ(r.status, 0) << r.err;
    auto rows = split(r.out, '\n');
    ASSERT_EQ(rows.size(), 5u);
    auto c0 = split(rows[0], '\t');
    auto c1 = split(rows[1], '\t');
    c0.resize(8);
    c1.resize(8);
    EXPECT_EQ(num(c0[0]), static_cast<uint16_t>(CmAttr::kReq));
    EXPECT_EQ(num(c0[1]), seen[0].cm->hdr.tid);
    EXPECT_EQ(num(c0[2]), req.service_id);
    EXPECT_EQ(num(c0[3]), req.local_qpn.value());
    EXPECT_EQ(num(c0[4]), req.starting_psn.value());
    EXPECT_EQ(num(c0[7]), cma->port);
    EXPECT_EQ(num(c1[0]), static_cast<uint16_t>(CmAttr::kRep));
    EXPECT_EQ(num(c1[5]), rep.local_qpn.value());
    EXPECT_EQ(num(c1[6]), rep.starting_psn.value());
  }
}

// Native InfiniBand (ERF): three IB CM connections (REQ REP RTU, no rdma_cm:
// the service IDs are not in an IP port space) and SA MADs, which are not CM.
TEST(RealCmTraces, NativeInfinibandCmMads) {
  const fs::path file = kDir / "srinivaskoritala_infiniband.pcap";
  ROCELAB_REQUIRE_EXTERNAL(file);
  auto r = PcapReader::open(file.string());
  ASSERT_TRUE(r);
  int req = 0, rep = 0, rtu = 0, other_class = 0;
  for (;;) {
    auto f = r->next();
    ASSERT_TRUE(f);
    if (!f->has_value()) break;
    auto rec = parse_erf((*f)->data);
    ASSERT_TRUE(rec);
    auto ib = decode_ib(rec->payload);
    if (!ib || !is_gsi_mad(ib->roce)) continue;
    auto m = parse_cm_mad(ib->roce.payload);
    if (!m) {
      EXPECT_EQ(m.error(), make_error_code(WireErrc::kNotCmMad));
      ++other_class;
      continue;
    }
    const CmAttr a = attr_of(m->msg);
    if (a == CmAttr::kReq) {
      ++req;
      const auto& q = std::get<CmReq>(m->msg);
      EXPECT_FALSE(parse_rdma_cm_service_id(q.service_id));
      EXPECT_EQ(q.primary.local_lid, ib->lrh.slid);  // LID-routed: no GRH, real LIDs
      EXPECT_EQ(q.primary.remote_lid, ib->lrh.dlid);
    } else if (a == CmAttr::kRep) {
      ++rep;
    } else if (a == CmAttr::kRtu) {
      ++rtu;
    } else {
      ADD_FAILURE() << "unexpected " << short_name(a);
    }
  }
  // Counted independently with tshark: 9 MADs of class 0x07; of the 8 others, 2
  // are SA (class 0x03) to QP 1 and 6 directed-route SMPs (0x81) to QP 0.
  EXPECT_EQ(req, 3);
  EXPECT_EQ(rep, 3);
  EXPECT_EQ(rtu, 3);
  EXPECT_EQ(other_class, 2);
}

}  // namespace
}  // namespace rocelab::wire
