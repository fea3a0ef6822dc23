// `rocelab decode FILE...`: one line per RoCEv2 packet in pcap/pcapng captures.
// The work is src/decode (decode_capture); this is the command line.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "decode/capture_decode.h"
#include "tools/commands.h"

namespace rocelab::tools {
namespace {

using decode::kExitOk;

constexpr const char* kExitCodes =
    "Exit codes:\n"
    "  0  every file was read, every RoCEv2 packet decoded with a good ICRC\n"
    "  1  every file was read, but some RoCEv2 packet was malformed or had a BAD ICRC\n"
    "  2  some file could not be read as a capture (or the command line was wrong)\n\n"
    "Packets that are not UDP to port 4791 are counted and skipped; so are the\n"
    "frames of link types other than Ethernet, raw IP, Linux SLL/SLL2 and ERF.\n"
    "ERF captures of native InfiniBand (LRH [GRH] BTH ... ICRC VCRC) are decoded\n"
    "too, marked [native IB], with the native ICRC rule.";

struct Options {
  std::vector<std::string> files;
  decode::DecodeOptions d;
};

void out_line(std::string_view s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fputc('\n', stdout);
}

void err_line(std::string_view s) {
  std::fwrite(s.data(), 1, s.size(), stderr);
  std::fputc('\n', stderr);
}

}  // namespace

void register_decode(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("decode", "Decode RoCEv2 packets in pcap/pcapng captures");
  cmd->add_option("files", o->files, "Capture files (pcap or pcapng)")->required();
  cmd->add_flag("--json", o->d.json,
                "One JSON object per line: \"type\" is packet, malformed, file or qp");
  cmd->add_flag("--summary", o->d.summary, "End with a table per QP (source, destination, dest QP)");
  cmd->footer(kExitCodes);
  cmd->callback([o] {
    decode::Summary summary;
    const decode::DecodeSinks sinks{out_line, err_line};
    int status = kExitOk;
    for (const std::string& path : o->files)
      status = std::max(status, decode::decode_capture(o->d, path, path, summary, sinks));
    if (o->d.summary) {
      if (o->d.json) {
        for (const std::string& line : summary.json()) out_line(line);
      } else {
        const std::string text = summary.text();
        std::fwrite(text.data(), 1, text.size(), stdout);
      }
    }
    std::fflush(stdout);
    exit_code() = status;
  });
}

}  // namespace rocelab::tools
