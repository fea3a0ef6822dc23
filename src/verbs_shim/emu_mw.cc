// Emulated memory windows: ibv_alloc_mw, ibv_dealloc_mw and ibv_bind_mw (the
// context ops libibverbs' inline wrappers call), and the translation of a
// bind's shim objects to the engine's.
#include <cerrno>
#include <new>

#include "verbs_shim/convert.h"
#include "verbs_shim/emulated.h"

namespace rocelab::verbs_shim::emulated {

ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type) noexcept {
  if (!pd || !is_emu(pd->context)) return fail_null<ibv_mw>(std::error_code(EINVAL, std::generic_category()));
  auto mw = engine_of(pd->context).alloc_mw(shim(pd)->e, static_cast<emu::MwType>(type));
  if (!mw) return fail_null<ibv_mw>(mw.error());
  auto* m = new (std::nothrow) ShimMw{};
  if (!m) {
    (void)engine_of(pd->context).dealloc_mw(*mw);
    errno = ENOMEM;
    return nullptr;
  }
  m->e = *mw;
  m->e->set_user_context(m);
  m->mw.context = pd->context;
  m->mw.pd = pd;
  m->mw.rkey = m->e->rkey();
  m->mw.handle = m->e->rkey() >> 8;
  m->mw.type = type;
  return &m->mw;
}

int dealloc_mw(ibv_mw* mw) noexcept {
  if (!mw || !is_emu(mw->context)) return EINVAL;
  if (std::error_code ec = engine_of(mw->context).dealloc_mw(shim(mw)->e)) return ec.value();
  delete shim(mw);
  return 0;
}

bool to_emu_bind(ibv_context* ctx, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info& info,
                 emu::SendWr* out) noexcept {
  if (mw->context != ctx || (info.mr && info.mr->context != ctx)) return false;
  out->bind_mw.mw = shim(mw)->e;
  out->bind_mw.rkey = rkey;
  out->bind_mw.mr = info.mr ? shim(info.mr)->e : nullptr;
  out->bind_mw.addr = info.addr;
  out->bind_mw.length = info.length;
  out->bind_mw.access = static_cast<unsigned>(info.mw_access_flags);
  return true;
}

// rdma-core (providers/rxe rxe_bind_mw): a type 1 bind is a BIND_MW work
// request with the next R_Key (ibv_inc_rkey), which ibv_mw.rkey takes at once;
// a failed bind reports MW_BIND_ERR in its completion.
int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* mw_bind) noexcept {
  if (!qp || !mw || !mw_bind || !is_emu(qp->context) || mw->context != qp->context) return EINVAL;
  if (mw->type != IBV_MW_TYPE_1 || (mw_bind->bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED)) return EINVAL;
  ibv_send_wr wr{};
  wr.wr_id = mw_bind->wr_id;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = mw_bind->send_flags;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
  wr.bind_mw.bind_info = mw_bind->bind_info;
  ibv_send_wr* bad = nullptr;
  if (int rc = post_send(qp, &wr, &bad)) return rc;
  mw->rkey = wr.bind_mw.rkey;
  return 0;
}

}  // namespace rocelab::verbs_shim::emulated
