// `rocelab fsm`: the QP state machine of a QP type, drawn from the engine's
// own transition table — as a terminal table, Graphviz DOT or SVG — and
// `rocelab fsm check`, which says whether a modify_qp is legal and, if not,
// which attributes are missing or not allowed and what each one is for.
// Exit: 0 shown / legal, 1 refused, 2 bad arguments or no Graphviz for --svg.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "sim/fsm.h"
#include "tools/commands.h"

namespace rocelab::tools {
namespace {

struct FsmOptions {
  std::string type = "rc";
  std::string dot_file, svg_file;
  std::string from, to, mask = "STATE";
};

int usage_error(const std::string& what) {
  std::fprintf(stderr, "rocelab fsm: %s\n", what.c_str());
  return 2;
}

// Graphviz's `dot -Tsvg -o out`, fed the DOT text on stdin (no shell).
int render_svg(const std::string& dot_text, const std::string& out) {
  int in[2];
  if (::pipe(in) != 0) return usage_error("pipe failed");
  const pid_t pid = ::fork();
  if (pid < 0) return usage_error("fork failed");
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::close(in[0]);
    ::close(in[1]);
    ::execlp("dot", "dot", "-Tsvg", "-o", out.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(in[0]);
  size_t done = 0;
  while (done < dot_text.size()) {
    const ssize_t w = ::write(in[1], dot_text.data() + done, dot_text.size() - done);
    if (w <= 0) break;
    done += static_cast<size_t>(w);
  }
  ::close(in[1]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
    return usage_error("--svg needs Graphviz's `dot` (Debian package graphviz)");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return usage_error("dot failed to write " + out);
  return 0;
}

int show(const FsmOptions& o) {
  auto type = sim::parse_qp_type(o.type);
  if (!type) return usage_error("--type must be rc, uc or ud");
  if (o.dot_file.empty() && o.svg_file.empty()) {
    std::fputs(sim::fsm_table(*type).c_str(), stdout);
    return 0;
  }
  const std::string dot = sim::fsm_dot(*type);
  if (!o.dot_file.empty()) {
    if (o.dot_file == "-") {
      std::fputs(dot.c_str(), stdout);
    } else {
      std::ofstream f(o.dot_file);
      f << dot;
      if (!f.flush()) return usage_error("cannot write " + o.dot_file);
    }
  }
  return o.svg_file.empty() ? 0 : render_svg(dot, o.svg_file);
}

int check(const FsmOptions& o) {
  auto type = sim::parse_qp_type(o.type);
  if (!type) return usage_error("--type must be rc, uc or ud");
  auto from = sim::parse_qp_state(o.from);
  auto to = sim::parse_qp_state(o.to);
  if (!from) return usage_error("--from: not a QP state: " + o.from + " (RESET, INIT, RTR, RTS, SQD, SQE, ERR)");
  if (!to) return usage_error("--to: not a QP state: " + o.to + " (RESET, INIT, RTR, RTS, SQD, SQE, ERR)");
  std::string error;
  auto mask = sim::parse_attr_mask(o.mask, &error);
  if (!mask) return usage_error("--mask: " + error);
  std::fputs(sim::explain_modify(*from, *to, *type, *mask).c_str(), stdout);
  return emu::check_qp_modify(*from, *to, *type, *mask | emu::qp_attr::kState).ok ? 0 : 1;
}

}  // namespace

void register_fsm(CLI::App& app) {
  auto o = std::make_shared<FsmOptions>();
  auto* cmd = app.add_subcommand(
      "fsm", "The QP state machine of a QP type (from the engine's own table): a table, --dot or --svg");
  cmd->add_option("--type", o->type, "QP type: rc, uc or ud");
  cmd->add_option("--dot", o->dot_file, "write the machine as Graphviz DOT to FILE ('-': stdout)");
  cmd->add_option("--svg", o->svg_file, "draw the machine as SVG into FILE (needs Graphviz's dot)");
  auto* chk = cmd->add_subcommand(
      "check", "Is modify_qp FROM -> TO with MASK legal? If not, what is missing or not allowed, and why");
  chk->add_option("--type", o->type, "QP type: rc, uc or ud");
  chk->add_option("--from", o->from, "the QP's state now (RESET, INIT, RTR, RTS, SQD, SQE, ERR)")->required();
  chk->add_option("--to", o->to, "the state asked for")->required();
  chk->add_option("--mask", o->mask,
                  "the attribute mask: names (STATE,AV,PATH_MTU or IBV_QP_STATE|IBV_QP_AV) or a number; "
                  "STATE is implied");
  chk->callback([o] { exit_code() = check(*o); });
  cmd->callback([o, chk] {
    if (chk->parsed()) return;
    exit_code() = show(*o);
  });
}

}  // namespace rocelab::tools
