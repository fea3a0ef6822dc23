// `rocelab decode FILE...` (placeholder until the decoder lands).
#include "tools/commands.h"

namespace rocelab::tools {
void register_decode(CLI::App& app) {
  auto* cmd = app.add_subcommand("decode", "Decode RoCEv2 packets in pcap/pcapng captures");
  cmd->callback([] { exit_code() = 1; });
}
}  // namespace rocelab::tools
