// libc's own definition of a function the preloaded shim interposes.
#pragma once
#include <dlfcn.h>

// The next definition of `name` after the shim's (libc's), found once.
#define ROCELAB_LIBC(name)                                                                \
  ([]() {                                                                                 \
    static const auto fn = reinterpret_cast<decltype(&::name)>(dlsym(RTLD_NEXT, #name)); \
    return fn;                                                                            \
  }())
