// The main() of a fuzz target in the ordinary (gcc, plain or ASan) build: runs
// LLVMFuzzerTestOneInput once on every file given, or on every file of every
// directory given — the checked-in seed corpus as a regression test
// (ctest fuzz.replay.*). The libFuzzer build (ROCELAB_FUZZ=ON) links
// libFuzzer's own main instead.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) __attribute__((weak));

// A target with a custom mutator: each seed also goes through it this many
// times (fixed seeds), and each result is run — the mutator is code too.
constexpr unsigned kMutationsPerSeed = 8;
constexpr size_t kMaxMutatedSize = 8192;

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path p(argv[i]);
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      for (const auto& e : std::filesystem::directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
    } else if (std::filesystem::is_regular_file(p, ec)) {
      files.push_back(p);
    } else {
      std::fprintf(stderr, "%s: not a file or directory\n", argv[i]);
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR|FILE...: no input given\n", argv[0]);
    return 2;
  }
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // A copy of exactly the input's size, so ASan catches a read one past it.
    std::vector<uint8_t> buf(bytes.begin(), bytes.end());
    LLVMFuzzerTestOneInput(buf.data(), buf.size());
    if (!LLVMFuzzerCustomMutator) continue;
    std::vector<uint8_t> m = buf;
    for (unsigned i = 0; i < kMutationsPerSeed; ++i) {
      const size_t cur = std::min(m.size(), kMaxMutatedSize);
      m.resize(kMaxMutatedSize);
      m.resize(LLVMFuzzerCustomMutator(m.data(), cur, kMaxMutatedSize, i + 1));
      std::vector<uint8_t> exact(m);  // exactly its size, for ASan
      LLVMFuzzerTestOneInput(exact.data(), exact.size());
    }
  }
  std::printf("%zu inputs ran\n", files.size());
  return 0;
}
