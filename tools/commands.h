// Each `rocelab` subcommand lives in its own cmd_*.cc and registers itself here.
// A command's callback returns the process exit code through `exit_code`.
#pragma once
#include <CLI/CLI.hpp>
#include <filesystem>

namespace rocelab::tools {

// Set by a subcommand's callback: the exit status of `rocelab`.
int& exit_code();

void register_decode(CLI::App& app);
void register_opcodes(CLI::App& app);
void register_loopback(CLI::App& app);
void register_run(CLI::App& app);
void register_devices(CLI::App& app);
void register_fsm(CLI::App& app);
void register_events(CLI::App& app);
void register_sim(CLI::App& app);
void register_ladder(CLI::App& app);
void register_check(CLI::App& app);
void register_replay(CLI::App& app);
void register_stat(CLI::App& app);

// The verbs shim next to this program: <dir of rocelab>/../lib/librocelab_verbs.so.
std::filesystem::path shim_library_path();
// The rdma_cm shim beside it: <dir of rocelab>/../lib/librocelab_rdmacm.so.
std::filesystem::path rdmacm_shim_library_path();

}  // namespace rocelab::tools
