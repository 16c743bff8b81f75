// baton: pipeline-parallel training for LibTorch. Exit codes: 0 success,
// 1 a failure while running (a dead peer, a failed rank), 2 bad input (an
// unknown flag, a bad value, an invalid schedule or config), 3 an internal
// error, 128 + N death by signal N (of a rank under `train --nproc`, or of
// baton itself: the launcher returns 130 for SIGINT and 143 for SIGTERM).
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <iostream>
#include <string>

#include "baton/core/allocator.h"
#include "baton/core/blas_kernels.h"
#include "baton/core/error.h"
#include "baton/core/printable.h"
#include "tools/cli.h"

namespace baton::cli {
namespace {
std::vector<std::string> g_command_line;
}  // namespace
const std::vector<std::string>& command_line() {
  return g_command_line;
}

void print_error(const std::string& message) {
  std::string text = "baton: error: " + message;
  if (message.empty() || message.back() != '\n') text += '\n';
  // One write(2) for the whole text, so no signal and no other writer can cut
  // the line; a pipe takes up to PIPE_BUF (4 KiB) bytes in one piece.
  std::cerr.flush();
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = write(STDERR_FILENO, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
}

}  // namespace baton::cli

using baton::cli::print_error;

int main(int argc, char** argv) {
  // A file size limit (ulimit -f) must fail a write with EFBIG, reported in
  // one line as a full disk is, not kill the process without a word.
  std::signal(SIGXFSZ, SIG_IGN);
  // OpenBLAS on its generic kernels on a CPU it does not know: run again
  // with OPENBLAS_CORETYPE set (baton/core/blas_kernels.h; docs/cli.md).
  baton::reexec_for_openblas_kernels(argv);
  // Freed tensors stay in the process for the next step instead of being
  // faulted in again (baton/core/allocator.h; docs/cli.md).
  baton::keep_freed_memory();
  baton::cli::g_command_line.assign(argv, argv + argc);
  CLI::App app{"baton: pipeline-parallel training for LibTorch"};
  app.require_subcommand(1);
  const auto simulate = baton::cli::add_simulate(app);
  const auto train = baton::cli::add_train(app);
  const auto plan = baton::cli::add_plan(app);
  const auto data = baton::cli::add_data(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 quotes the arguments as given; escaped, they cannot break the line.
    print_error(baton::printable(e.what(), 1024));
    return 2;
  }
  try {
    if (app.got_subcommand("simulate")) return simulate();
    if (app.got_subcommand("train")) return train();
    if (app.got_subcommand("plan")) return plan();
    if (app.got_subcommand("data")) return data();
  } catch (const baton::Error& e) {
    print_error(e.what());
    return 2;
  } catch (const std::exception& e) {
    print_error(std::string("internal: ") + e.what());
    return 3;
  }
  return 0;
}
