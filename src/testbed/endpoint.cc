#include "testbed/endpoint.h"

namespace rocelab::testbed {

std::string Endpoint::open(const EndpointSpec& spec) {
  if (!dev) return "no device";
  auto failed = [](const char* verb, const std::error_code& ec) { return std::string(verb) + ": " + ec.message(); };
  auto p = dev->alloc_pd();
  if (!p) return failed("alloc_pd", p.error());
  pd = *p;
  if (spec.channel) {
    auto c = dev->create_comp_channel();
    if (!c) return failed("create_comp_channel", c.error());
    ch = *c;
  }
  auto s = dev->create_cq(spec.cqe, ch, 0);
  if (!s) return failed("create_cq", s.error());
  scq = *s;
  auto r = dev->create_cq(spec.cqe, ch, 0);
  if (!r) return failed("create_cq", r.error());
  rcq = *r;
  buf.assign(spec.len, std::byte{0});
  iova = spec.iova ? *spec.iova : reinterpret_cast<uint64_t>(buf.data());
  auto m = dev->reg_mr(pd, buf.data(), buf.size(), iova, spec.access);
  if (!m) return failed("reg_mr", m.error());
  mr = *m;
  if (!spec.with_qp) return {};
  emu::QpInitAttr ia;
  ia.send_cq = scq;
  ia.recv_cq = rcq;
  ia.qp_type = spec.type;
  ia.cap = spec.cap;
  auto q = dev->create_qp(pd, ia);
  if (!q) return failed("create_qp", q.error());
  qp = *q;
  return {};
}

}  // namespace rocelab::testbed
