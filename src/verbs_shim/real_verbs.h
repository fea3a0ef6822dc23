// The real libibverbs behind the shim. Every exported ibv_* function that is
// handed an object of a real device (one the real libibverbs found) forwards
// it, unchanged, to the definition the dynamic linker would have bound had
// the shim not been preloaded: dlvsym(RTLD_NEXT, name, version).
#pragma once

namespace rocelab::verbs_shim {

// The next definition of `name` at `version` after the shim in the search
// order, or nullptr (the real library lacks it). Never the shim's own.
void* resolve_real(const char* name, const char* version) noexcept;

// Resolves once per call site, typed as the shim's own definition:
//   return ROCELAB_REAL(ibv_alloc_pd, "IBVERBS_1.1")(context);
#define ROCELAB_REAL(fn, version)                                                      \
  ([]() noexcept {                                                                     \
    static const auto real_fn =                                                        \
        reinterpret_cast<decltype(&fn)>(::rocelab::verbs_shim::resolve_real(#fn, version)); \
    return real_fn;                                                                    \
  }())

}  // namespace rocelab::verbs_shim
