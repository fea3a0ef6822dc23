// The real librdmacm behind the shim: every exported rdma_* and r* function,
// in a process without emulated devices, forwards to the definition the
// dynamic linker would have bound had the shim not been preloaded.
#pragma once
#include <dlfcn.h>

#include <cerrno>

namespace rocelab::rdmacm_shim {

inline void* resolve_real(const char* name, const char* version) noexcept {
  return dlvsym(RTLD_NEXT, name, version);
}

// Resolves once per call site, typed as the shim's own definition.
#define ROCELAB_REAL_CM(fn, version)                                                        \
  ([]() noexcept {                                                                          \
    static const auto real_fn =                                                             \
        reinterpret_cast<decltype(&fn)>(::rocelab::rdmacm_shim::resolve_real(#fn, version)); \
    return real_fn;                                                                         \
  }())

// Forwards a call to the real library; -1 / ENOSYS when the program does not
// load librdmacm (it cannot have called this through it then, but a dlsym can).
#define ROCELAB_FORWARD(fn, version, fail, ...)                \
  do {                                                         \
    auto real_ = ROCELAB_REAL_CM(fn, version);                 \
    if (!real_) {                                              \
      errno = ENOSYS;                                          \
      return fail;                                             \
    }                                                          \
    return real_(__VA_ARGS__);                                 \
  } while (0)

}  // namespace rocelab::rdmacm_shim
