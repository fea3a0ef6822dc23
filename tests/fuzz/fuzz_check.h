// What a fuzz target asserts beyond "no crash": a broken invariant prints what
// broke and aborts, which libFuzzer (and the corpus replay) reports as a crash
// with the input that caused it.
#pragma once
#include <cstdio>
#include <cstdlib>

#define ROCELAB_FUZZ_CHECK(cond, msg)                                                   \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: invariant broken: %s (%s)\n", __FILE__, __LINE__,    \
                   msg, #cond);                                                         \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)
