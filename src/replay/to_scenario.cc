// `rocelab replay --to-scenario FILE`: the messages of a captured connection
// as a verbs-level workload in the teaching simulator's scenario format
// (proto/scenario.proto), which `rocelab sim FILE` re-executes.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>

#include "proto/scenario.pb.h"
#include "replay/plan.h"
#include "replay/replay.h"

#include <google/protobuf/text_format.h>

namespace rocelab::replay {

namespace {

using detail::OpClass;
using detail::rkey_text;
using wire::Psn;

constexpr uint64_t kMaxMessages = 100000;  // a scenario is a file people read: the first ones
constexpr uint32_t kBatch = 32;            // WRs posted before their completions are polled

std::string mr_name(uint32_t rkey) {
  char b[24];
  std::snprintf(b, sizeof b, "mr_%08x", rkey);
  return b;
}

}  // namespace

ReplayResult to_scenario(const ReplayOptions& o, const std::string& path) {
  ReplayResult r;
  detail::Plan plan;
  if (!detail::make_plan(o, r, plan)) return r;
  const detail::SpaceInfo& sp = plan.sp;
  const bool rc = sp.transport == wire::Transport::kRC;

  scenario::Scenario s;
  s.set_title("Replayed from " + o.capture);
  s.set_description("The messages of " + r.connection + " (" + r.transport +
                    ") as rocelab replay --to-scenario read them from the capture: which work requests, their "
                    "sizes and remote offsets. Retransmissions are not work requests and are left out; the payload "
                    "bytes are not carried over.");
  const bool distinct = !(sp.req_addr == sp.resp_addr) && sp.req_addr.v6 == sp.resp_addr.v6;
  scenario::Node* req = s.add_node();
  req->set_name("requester");
  if (distinct) req->set_address(sp.req_addr.to_string());
  req->set_mtu(plan.mtu);
  req->add_cq()->set_name("req_cq");
  req->mutable_cq(0)->set_cqe(4096);
  scenario::Mr* src = req->add_mr();
  src->set_name("src");
  src->add_access("LOCAL_WRITE");
  scenario::Qp* rq = req->add_qp();
  rq->set_name("req");
  rq->set_type(r.transport);
  rq->set_send_cq("req_cq");
  rq->set_max_send_wr(kBatch);
  rq->set_max_recv_wr(1);
  scenario::Node* resp = s.add_node();
  resp->set_name("responder");
  if (distinct) resp->set_address(sp.resp_addr.to_string());
  resp->set_mtu(plan.mtu);
  resp->add_cq()->set_name("resp_cq");
  resp->mutable_cq(0)->set_cqe(4096);
  uint64_t total = 0;
  for (const auto& [rkey, g] : plan.regions) {
    // `rocelab sim` allocates a scenario's MRs whole: their spans are memory.
    const uint64_t n = std::max<uint64_t>(g.hi > g.lo ? g.hi - g.lo : 8, 8);
    if (n > o.max_memory - std::min(total, o.max_memory)) {
      r.status = 2;
      r.error = "the requests of R_Key " + rkey_text(rkey) + " span " + std::to_string(n) +
                " bytes: a scenario's MRs are allocated whole, and together they would take more than the memory "
                "limit of " + std::to_string(o.max_memory) + " bytes";
      r.limit = "max_memory";
      return r;
    }
    total += n;
    scenario::Mr* m = resp->add_mr();
    m->set_name(mr_name(rkey));
    m->set_length(n);
    for (const char* a : {"LOCAL_WRITE", "REMOTE_WRITE", "REMOTE_READ", "REMOTE_ATOMIC"}) m->add_access(a);
  }
  scenario::Mr* rbuf = resp->add_mr();
  rbuf->set_name("rbuf");
  rbuf->set_length(std::max<uint64_t>(plan.max_send, 1));
  rbuf->add_access("LOCAL_WRITE");
  scenario::Qp* pq = resp->add_qp();
  pq->set_name("resp");
  pq->set_type(r.transport);
  pq->set_send_cq("resp_cq");
  pq->set_max_send_wr(1);
  pq->set_max_recv_wr(kBatch);
  scenario::Connect* c = s.add_step()->mutable_connect();
  c->set_qp("req");
  c->set_peer("resp");
  c->set_path_mtu(plan.mtu);

  // The messages, in order, each once.
  struct Msg {
    bool open = false;
    std::string opcode;
    uint32_t rkey = 0;
    uint64_t va = 0, len = 0;
    uint32_t imm = 0;
    uint64_t compare = 0, swap = 0;
    bool remote = false;
  } msg;
  uint64_t max_len = 8, batch = 0, batch_recvs = 0;
  int64_t ref_rel = 0;
  uint32_t ref_psn = plan.start_psn;
  bool seen_start = false;
  auto flush = [&] {
    if (batch) {
      scenario::PollCq* p = s.add_step()->mutable_poll_cq();
      p->set_cq("req_cq");
      p->set_count(static_cast<uint32_t>(batch));
    }
    if (batch_recvs) {
      scenario::PollCq* p = s.add_step()->mutable_poll_cq();
      p->set_cq("resp_cq");
      p->set_count(static_cast<uint32_t>(batch_recvs));
    }
    batch = batch_recvs = 0;
  };
  auto emit = [&] {
    if (r.requests >= kMaxMessages) {
      ++r.requests_skipped;
      return;
    }
    const bool recv = msg.opcode == "SEND" || msg.opcode == "SEND_WITH_IMM" || msg.opcode == "RDMA_WRITE_WITH_IMM";
    if (recv) {
      scenario::PostRecv* pr = s.add_step()->mutable_post_recv();
      pr->set_qp("resp");
      pr->set_wr_id(r.requests);
      pr->add_sge()->set_mr("rbuf");
      ++batch_recvs;
    }
    scenario::PostSend* ps = s.add_step()->mutable_post_send();
    ps->set_qp("req");
    ps->set_wr_id(r.requests);
    ps->set_opcode(msg.opcode);
    if (msg.len) {
      scenario::Sge* g = ps->add_sge();
      g->set_mr("src");
      g->set_length(static_cast<uint32_t>(msg.len));
    }
    if (msg.remote) {
      auto it = plan.regions.find(msg.rkey);
      if (it != plan.regions.end()) {
        ps->set_remote_mr(mr_name(msg.rkey));
        ps->set_remote_offset(msg.va - it->second.lo);
      } else {
        ps->set_rkey(0xFFFFFFFF);  // the capture's responder refused every request with this R_Key
      }
    }
    if (msg.opcode.find("IMM") != std::string::npos) ps->set_imm(msg.imm);
    if (msg.opcode == "ATOMIC_CMP_AND_SWP") {
      ps->set_compare_add(msg.compare);
      ps->set_swap(msg.swap);
    } else if (msg.opcode == "ATOMIC_FETCH_AND_ADD") {
      ps->set_compare_add(msg.swap);
    }
    max_len = std::max(max_len, msg.len);
    ++r.requests;
    if (++batch == kBatch) flush();
  };
  // The requests in PSN order, each PSN once: a capture taken at the
  // responder shows the packets after a loss before the retransmission that
  // fills it. A reorder buffer holds what came early; a gap never filled (UC
  // does not retransmit; the capture began or ended there) is skipped, and the
  // message it cut is left out.
  struct Pkt {
    uint8_t opcode = 0;
    uint32_t len = 0;
    wire::Reth reth;
    wire::AtomicEth atomic;
    uint32_t imm = 0;
  };
  std::map<int64_t, Pkt> early;
  int64_t next = 0;
  auto consume = [&](int64_t rel, const Pkt& k) {
    const wire::OpInfo& info = wire::op_info(k.opcode);
    const bool read = info.is(OpClass::kRead);
    next = rel + (read ? std::max<int64_t>(1, (k.reth.dma_len + plan.mtu - 1) / plan.mtu) : 1);
    if (detail::starts_message(info)) {
      msg = {};
      msg.open = true;
      if (info.carries(wire::Hdr::kReth)) {
        msg.remote = true;
        msg.rkey = k.reth.rkey;
        msg.va = k.reth.va;
      }
      if (info.is(OpClass::kAtomic)) {
        msg.remote = true;
        msg.rkey = k.atomic.rkey;
        msg.va = k.atomic.va;
        msg.compare = k.atomic.compare;
        msg.swap = k.atomic.swap_add;
        msg.len = 8;
        msg.opcode = wire::rc_relative(k.opcode) == wire::op::kRcCmpSwap ? "ATOMIC_CMP_AND_SWP" : "ATOMIC_FETCH_AND_ADD";
      } else if (read) {
        msg.len = k.reth.dma_len;
        msg.opcode = "RDMA_READ";
      }
    }
    if (!msg.open) return;  // a Middle or Last whose First is not in the capture
    if (info.is(OpClass::kSend) || info.is(OpClass::kWrite)) msg.len += k.len;
    if (!info.is(OpClass::kLast) && !read && !info.is(OpClass::kAtomic)) return;
    if (info.is(OpClass::kSend))
      msg.opcode = info.is(OpClass::kImm) ? "SEND_WITH_IMM" : "SEND";  // SEND with Invalidate: a SEND here
    else if (info.is(OpClass::kWrite))
      msg.opcode = info.is(OpClass::kImm) ? "RDMA_WRITE_WITH_IMM" : "RDMA_WRITE";
    if (info.carries(wire::Hdr::kImmDt)) msg.imm = k.imm;
    emit();
    msg.open = false;
  };
  auto drain = [&](bool all) {
    while (!early.empty()) {
      auto it = early.begin();
      if (it->first < next) {  // inside a READ's PSNs: a resumed READ
        early.erase(it);
        continue;
      }
      if (it->first != next) {
        if (!all && early.size() < 4096) return;
        msg.open = false;  // a gap never filled: the message it cut is left out
      }
      consume(it->first, it->second);
      early.erase(it);
    }
  };
  const detail::ReadPass p3 = detail::for_each_packet(o.capture, [&](uint64_t, Nanos, const wire::DecodedFrame& d) {
    if (!plan.is_request(d)) return;
    const wire::RoceHeaders& h = d.roce.hdr;
    if (!seen_start) {
      if (h.bth.psn.value() != plan.start_psn || !detail::starts_message(h.info())) return;
      seen_start = true;
    }
    const int64_t rel = ref_rel + Psn(h.bth.psn).distance(Psn(ref_psn));
    ref_rel = rel;
    ref_psn = h.bth.psn.value();
    if (rel < next || early.count(rel)) return;  // seen before: a retransmission, not a work request
    Pkt& k = early[rel];
    k.opcode = h.bth.opcode;
    k.len = static_cast<uint32_t>(d.roce.payload.size());
    k.reth = h.reth;
    k.atomic = h.atomic_eth;
    k.imm = h.immdt.imm;
    drain(false);
  });
  drain(true);
  flush();
  src->set_length(max_len);
  if (!rc) s.add_step()->mutable_run();
  if (!p3.ok) {
    r.status = 2;
    r.error = "cannot read as a capture: " + p3.error;
    return r;
  }
  std::string text;
  google::protobuf::TextFormat::PrintToString(s, &text);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << "# Generated by rocelab replay --to-scenario; run it with: rocelab sim " << path << "\n" << text;
  out.close();
  if (!out) {
    r.status = 2;
    r.error = path + ": cannot write";
    return r;
  }
  if (!r.damaged.empty()) {
    r.status = 2;
    r.error = "damaged capture: " + r.damaged + " (the scenario holds what came before)";
    return r;
  }
  r.status = 0;
  return r;
}

}  // namespace rocelab::replay
