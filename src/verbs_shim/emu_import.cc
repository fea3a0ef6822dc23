// Contexts that share objects (ibv_import_device, ibv_import_pd, ibv_import_mr;
// man ibv_import_device). On a real device a context's cmd_fd is its uverbs
// file: a dup of it, passed to ibv_import_device, gives a second context on
// the same file, and that context can import the first one's PDs and MRs by
// handle. Here an emulated context's cmd_fd is a memfd: its inode is the
// "file", contexts of one device share one engine, and an imported PD or MR
// is a second ibv_* shell around the same engine object.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <new>
#include <vector>

#include "verbs_shim/emulated.h"
#include "verbs_shim/shim_objects.h"

namespace rocelab::verbs_shim::emulated {
namespace {

std::mutex g_mu;
std::vector<ShimContext*> g_contexts;  // every open emulated context

// Whether `owner` (the context an engine object was made in) and `ctx` share a file.
bool same_file(const ibv_context* owner, ibv_context* ctx) {
  return owner != nullptr && is_emu(owner) && shim(const_cast<ibv_context*>(owner))->file_id == shim(ctx)->file_id;
}

}  // namespace

uint64_t file_id(int fd) noexcept {
  struct stat st;
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    if (fd < 0) errno = EBADF;
    return 0;
  }
  return (static_cast<uint64_t>(st.st_dev) << 40) ^ static_cast<uint64_t>(st.st_ino);
}

void register_context(ShimContext* sc) noexcept {
  std::lock_guard lk(g_mu);
  g_contexts.push_back(sc);
}

void unregister_context(ShimContext* sc) noexcept {
  std::lock_guard lk(g_mu);
  std::erase(g_contexts, sc);
}

ShimContext* context_of_fd(int cmd_fd) noexcept {
  const uint64_t id = file_id(cmd_fd);
  if (id == 0) return nullptr;
  std::lock_guard lk(g_mu);
  auto it = std::find_if(g_contexts.begin(), g_contexts.end(),
                         [&](const ShimContext* c) { return c->file_id == id; });
  return it == g_contexts.end() ? nullptr : *it;
}

ibv_context* import_device(ShimContext* origin, int cmd_fd) noexcept {
  // The new context owns cmd_fd (the caller dup'd it), as libibverbs' does.
  return make_context(*origin->dev, cmd_fd);
}

ibv_pd* import_pd(ibv_context* ctx, uint32_t pd_handle) noexcept {
  auto pd = engine_of(ctx).find_pd(pd_handle);
  if (!pd) return fail_null<ibv_pd>(pd.error());
  auto* owner = static_cast<ShimPd*>((*pd)->user_context());
  if (!owner || !same_file(owner->pd.context, ctx)) return fail_null<ibv_pd>(std::make_error_code(std::errc::invalid_argument));
  auto* p = new (std::nothrow) ShimPd{};
  if (!p) return fail_null<ibv_pd>(std::make_error_code(std::errc::not_enough_memory));
  p->e = *pd;
  p->imported = true;
  p->pd.context = ctx;
  p->pd.handle = pd_handle;
  return &p->pd;
}

void unimport_pd(ibv_pd* pd) noexcept { delete shim(pd); }

ibv_mr* import_mr(ibv_pd* pd, uint32_t mr_handle) noexcept {
  ibv_context* ctx = pd->context;
  auto mr = engine_of(ctx).find_mr(mr_handle);
  if (!mr) return fail_null<ibv_mr>(mr.error());
  auto* owner = static_cast<ShimMr*>((*mr)->user_context());
  if (!owner || !same_file(owner->mr.context, ctx) || (*mr)->pd() != shim(pd)->e)
    return fail_null<ibv_mr>(std::make_error_code(std::errc::invalid_argument));
  auto* m = new (std::nothrow) ShimMr{};
  if (!m) return fail_null<ibv_mr>(std::make_error_code(std::errc::not_enough_memory));
  m->e = *mr;
  m->imported = true;
  m->mr = owner->mr;  // addr, length, keys as registered
  m->mr.context = ctx;
  m->mr.pd = pd;
  return &m->mr;
}

void unimport_mr(ibv_mr* mr) noexcept { delete shim(mr); }

}  // namespace rocelab::verbs_shim::emulated
