// `rocelab`: one program, one subcommand per job (CLI11).
#include <cstdio>
#include <exception>

#include "tools/commands.h"

namespace rocelab::tools {
int& exit_code() {
  static int code = 0;
  return code;
}
}  // namespace rocelab::tools

int main(int argc, char** argv) {
  CLI::App app{"rocelab: a user-space RoCEv2 emulator and protocol simulator"};
  app.require_subcommand(1);
  rocelab::tools::register_decode(app);
  rocelab::tools::register_opcodes(app);
  rocelab::tools::register_loopback(app);
  rocelab::tools::register_run(app);
  rocelab::tools::register_devices(app);
  rocelab::tools::register_fsm(app);
  rocelab::tools::register_events(app);
  rocelab::tools::register_sim(app);
  rocelab::tools::register_ladder(app);
  rocelab::tools::register_check(app);
  rocelab::tools::register_replay(app);
  rocelab::tools::register_stat(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // usage errors: exit code 2
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rocelab: %s\n", e.what());
    return 1;
  }
  return rocelab::tools::exit_code();
}
