// Tests that read material from outside the repository (../shared: real NICs'
// captures, Linux's QP table) carry the ctest label `external`. A user's clone
// has no ../shared: there they skip, saying which folder is missing; where it
// is present (as in CI) they run and can fail.
#pragma once

#include <filesystem>

#include <gtest/gtest.h>

// In a test body: skips the test unless `where` (a file or a folder) exists.
#define ROCELAB_REQUIRE_EXTERNAL(where)                                                        \
  do {                                                                                        \
    const std::filesystem::path rocelab_external_path_(where);                                 \
    if (!std::filesystem::exists(rocelab_external_path_))                                     \
      GTEST_SKIP() << "external: " << rocelab_external_path_.string()                         \
                   << " is missing (it lives outside the repository, in ../shared); skipped"; \
  } while (0)
