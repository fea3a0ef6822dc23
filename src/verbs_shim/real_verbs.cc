#include "verbs_shim/real_verbs.h"

#include <dlfcn.h>

namespace rocelab::verbs_shim {

void* resolve_real(const char* name, const char* version) noexcept {
  // RTLD_NEXT is relative to the object this code is in: the shim. The shim
  // links libibverbs, so the real library follows it even in programs that
  // dlopen() libibverbs with RTLD_LOCAL.
  return dlvsym(RTLD_NEXT, name, version);
}

}  // namespace rocelab::verbs_shim
