#include "baton/comm/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <optional>

#include "baton/comm/blame.h"
#include "baton/core/blas_kernels.h"
#include "baton/core/error.h"
#include "baton/core/executable.h"

extern char** environ;

namespace baton::comm {
namespace {

using Clock = std::chrono::steady_clock;

// The signal (SIGINT, SIGTERM) that asked the launcher to stop; 0 until one does.
std::atomic<int> g_interrupted{0};

void on_interrupt(int signal) {
  g_interrupted = signal;
}

const char* interrupt_name(int signal) {
  return signal == SIGINT ? "SIGINT" : "SIGTERM";
}

// One output stream of one rank, cut into lines.
struct Stream {
  int fd = -1;
  std::string partial;
};

// A rank's last stderr lines, for naming the rank the others waited on.
constexpr size_t kKeptErrorLines = 16;

struct Rank {
  pid_t pid = -1;
  Stream streams[2];  // stdout, stderr
  bool running = true;
  int status = 0;  // once !running
  std::vector<std::string> error_lines;
};

std::vector<std::string> child_environment(int rank, int nproc, int port) {
  const std::vector<std::pair<std::string, std::string>> overrides = {
      {"RANK", std::to_string(rank)},       {"WORLD_SIZE", std::to_string(nproc)},
      {"LOCAL_RANK", std::to_string(rank)}, {"LOCAL_WORLD_SIZE", std::to_string(nproc)},
      {"MASTER_ADDR", "127.0.0.1"},         {"MASTER_PORT", std::to_string(port)}};
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string item(*entry);
    bool overridden = false;
    for (const auto& [name, value] : overrides) {
      overridden = overridden || item.rfind(name + "=", 0) == 0;
    }
    if (!overridden) env.push_back(item);
  }
  for (const auto& [name, value] : overrides) env.push_back(name + "=" + value);
  // OpenBLAS on its generic kernels here: the ranks start with the right ones
  // (core/blas_kernels.h; only where the user set no OPENBLAS_CORETYPE).
  const std::string core = advise_openblas_coretype(blas_facts());
  if (!core.empty()) env.push_back("OPENBLAS_CORETYPE=" + core);
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (auto& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

pid_t spawn(int rank, int nproc, int port, std::vector<std::string> argv, Rank& out) {
  int pipes[2][2];
  for (auto& p : pipes) {
    BATON_CHECK(pipe2(p, O_CLOEXEC) == 0, "[launch] pipe failed: ", std::strerror(errno));
  }
  // Built before fork: the child may only call async-signal-safe functions.
  std::vector<std::string> env = child_environment(rank, nproc, port);
  std::vector<char*> c_env = c_strings(env);
  std::vector<char*> c_argv = c_strings(argv);
  const pid_t launcher = getpid();
  const pid_t pid = fork();
  BATON_CHECK(pid >= 0, "[launch] fork failed: ", std::strerror(errno));
  if (pid == 0) {
    // Die with the launcher, even by SIGKILL; a launcher that died before
    // prctl took effect has already left this child to another parent.
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != launcher) _exit(128 + SIGKILL);
    setpgid(0, 0);
    dup2(pipes[0][1], STDOUT_FILENO);
    dup2(pipes[1][1], STDERR_FILENO);
    execvpe(c_argv[0], c_argv.data(), c_env.data());
    const char* message = "cannot execute the command\n";
    ssize_t ignored = write(STDERR_FILENO, message, std::strlen(message));
    (void)ignored;
    _exit(127);
  }
  setpgid(pid, pid);  // also here, so a kill right after fork reaches the group
  for (int s = 0; s < 2; ++s) {
    close(pipes[s][1]);
    fcntl(pipes[s][0], F_SETFL, O_NONBLOCK);
    out.streams[s].fd = pipes[s][0];
  }
  out.pid = pid;
  return pid;
}

// Writes one prefixed line in one piece; keeps it if it came from stderr.
void emit(Rank& rank, int r, int s, const std::string& line, std::ostream& sink) {
  sink << ("[rank " + std::to_string(r) + "] " + line + "\n");
  if (s == 1) {
    rank.error_lines.push_back(line);
    if (rank.error_lines.size() > kKeptErrorLines) rank.error_lines.erase(rank.error_lines.begin());
  }
}

// Reads what is available of rank r's stream s; writes complete lines, or
// everything at EOF. The first failed write leaves its errno in *write_error.
void pump(Rank& rank, int r, int s, std::ostream& sink, int* write_error) {
  Stream& stream = rank.streams[s];
  char buffer[4096];
  while (stream.fd >= 0) {
    const ssize_t n = read(stream.fd, buffer, sizeof buffer);
    if (n > 0) {
      stream.partial.append(buffer, static_cast<size_t>(n));
      size_t newline;
      while ((newline = stream.partial.find('\n')) != std::string::npos) {
        emit(rank, r, s, stream.partial.substr(0, newline), sink);
        stream.partial.erase(0, newline + 1);
      }
      sink.flush();
      if (!sink.good() && *write_error == 0) *write_error = errno ? errno : EIO;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (!stream.partial.empty()) emit(rank, r, s, stream.partial, sink);
    sink.flush();
    if (!sink.good() && *write_error == 0) *write_error = errno ? errno : EIO;
    stream.partial.clear();
    close(stream.fd);
    stream.fd = -1;
  }
}

std::string lost_output(int error) {
  return ::baton::detail::concat("cannot write the ranks' output to standard output",
                                 error ? ": " : "", error ? std::strerror(error) : "");
}

std::string describe(int status) {
  if (WIFSIGNALED(status)) {
    return ::baton::detail::concat("was killed by signal ", WTERMSIG(status), " (",
                                   strsignal(WTERMSIG(status)), ")");
  }
  return ::baton::detail::concat("exited with code ", WEXITSTATUS(status));
}

int exit_code(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

void signal_all(std::vector<Rank>& ranks, int signal) {
  for (const Rank& r : ranks) kill(-r.pid, signal);
}

// SIGTERM, and SIGCONT so that a stopped rank acts on it now.
void terminate_all(std::vector<Rank>& ranks) {
  signal_all(ranks, SIGTERM);
  signal_all(ranks, SIGCONT);
}

bool reports_wait_failure(const Rank& rank) {
  for (const std::string& line : rank.error_lines) {
    if (is_wait_failure(line)) return true;
  }
  return false;
}

std::vector<RankReport> reports_of(const std::vector<Rank>& ranks) {
  std::vector<RankReport> reports;
  for (size_t r = 0; r < ranks.size(); ++r) {
    reports.push_back(RankReport{static_cast<int>(r), !ranks[r].running, ranks[r].error_lines});
  }
  return reports;
}

}  // namespace

int launch_local(int nproc, const std::vector<std::string>& argv, const LaunchOptions& options) {
  BATON_CHECK(nproc >= 1, "[launch] nproc must be >= 1, got ", nproc);
  BATON_CHECK(!argv.empty(), "[launch] no command to run");
  const int port = options.master_port != 0 ? options.master_port : find_free_port();

  struct sigaction action {
  }, old_int{}, old_term{};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  g_interrupted = 0;
  sigaction(SIGINT, &action, &old_int);
  sigaction(SIGTERM, &action, &old_term);

  std::vector<Rank> ranks(static_cast<size_t>(nproc));
  for (int r = 0; r < nproc; ++r) spawn(r, nproc, port, argv, ranks[static_cast<size_t>(r)]);
  auto sink = [&](int s) -> std::ostream& { return s == 0 ? *options.out : *options.err; };
  int write_errors[2] = {0, 0};  // the errno of the first failed write to out, err

  int result = 0;
  int first_failed = -1;
  LaunchOutcome outcome;
  std::optional<Clock::time_point> blame_at;  // when to name the rank the others waited on
  std::optional<Clock::time_point> kill_at;   // set once the ranks are being stopped
  int running = nproc;
  auto stop = [&](const std::string& why) {
    outcome.cause = why;
    *options.err << ("[launch] " + why + "; stopping the " + std::to_string(running) +
                     " other running rank(s)\n")
                 << std::flush;
    terminate_all(ranks);
    kill_at = Clock::now() + options.grace_period;
    blame_at.reset();
  };
  // The first failure was a wait on a peer: name whom the ranks waited on.
  auto blame = [&] {
    std::string stuck = describe_stuck_ranks(reports_of(ranks));
    const Rank& first = ranks[static_cast<size_t>(first_failed)];
    outcome.failed_rank = first_failed;
    for (int r = 0; r < nproc && !stuck.empty(); ++r) {
      // "rank 2 stopped responding (...)": the rank the others waited on.
      if (stuck.rfind(::baton::detail::concat("rank ", r, " "), 0) == 0) outcome.failed_rank = r;
    }
    stop(stuck.empty() ? ::baton::detail::concat("rank ", first_failed, " ", describe(first.status))
                       : stuck);
  };
  while (running > 0) {
    std::vector<pollfd> fds;
    std::vector<std::pair<int, int>> owners;  // (rank, stream)
    for (int r = 0; r < nproc; ++r) {
      for (int s = 0; s < 2; ++s) {
        if (ranks[static_cast<size_t>(r)].streams[s].fd < 0) continue;
        fds.push_back(pollfd{ranks[static_cast<size_t>(r)].streams[s].fd, POLLIN, 0});
        owners.emplace_back(r, s);
      }
    }
    poll(fds.data(), fds.size(), 50);
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const auto [r, s] = owners[i];
      pump(ranks[static_cast<size_t>(r)], r, s, sink(s), &write_errors[s]);
    }
    for (int r = 0; r < nproc; ++r) {
      Rank& rank = ranks[static_cast<size_t>(r)];
      if (!rank.running || waitpid(rank.pid, &rank.status, WNOHANG) != rank.pid) continue;
      rank.running = false;
      --running;
      const bool failed = !(WIFEXITED(rank.status) && WEXITSTATUS(rank.status) == 0);
      if (!failed || kill_at) continue;
      // Everything it wrote is in its pipes now: read its error first.
      for (int s = 0; s < 2; ++s) pump(rank, r, s, sink(s), &write_errors[s]);
      const bool waited = WIFEXITED(rank.status) && reports_wait_failure(rank);
      if (first_failed < 0) {
        first_failed = r;
        result = exit_code(rank.status);
      }
      if (!waited && WIFEXITED(rank.status) && WEXITSTATUS(rank.status) == 2) {
        // Bad input the rank found and said (exit 2, as check_setup's): the
        // others find it too. No line of ours; they get the grace period to
        // say it and exit, so the job prints the one line of rank 0.
        if (first_failed != r) result = 2;
        outcome.failed_rank = r;
        outcome.cause = ::baton::detail::concat("rank ", r, " refused its input");
        kill_at = Clock::now() + options.grace_period;
        blame_at.reset();
      } else if (!waited) {
        // A crash or an error of its own: this rank is the cause.
        if (first_failed != r) result = exit_code(rank.status);
        outcome.failed_rank = r;
        stop(::baton::detail::concat("rank ", r, " ", describe(rank.status)));
      } else if (!blame_at) {
        // Let the other waiting ranks report whom they waited on too.
        blame_at = Clock::now() + options.blame_window;
      }
    }
    // The ranks' output is lost (a full disk): stop them now rather than
    // train on unseen.
    if (!options.out->good() && !kill_at) {
      result = 1;
      *options.err << ("[launch] " + lost_output(write_errors[0]) + "; stopping the " +
                       std::to_string(running) + " running rank(s)\n")
                   << std::flush;
      terminate_all(ranks);
      kill_at = Clock::now() + options.grace_period;
      blame_at.reset();
    }
    if (const int signal = g_interrupted; signal != 0 && !kill_at) {
      // As a shell reports a command that the signal stopped.
      result = 128 + signal;
      outcome.interrupted = true;
      outcome.failed_rank = -1;
      *options.err << "[launch] interrupted by " << interrupt_name(signal) << "; stopping "
                   << running << " rank(s)" << std::endl;
      terminate_all(ranks);
      kill_at = Clock::now() + options.grace_period;
      blame_at.reset();
    }
    if (blame_at && (Clock::now() >= *blame_at || running == 0)) blame();
    if (kill_at && Clock::now() >= *kill_at) {
      signal_all(ranks, SIGKILL);
      kill_at = Clock::time_point::max();
    }
  }
  if (blame_at) blame();
  // Every rank has exited: flush what is left in the pipes without waiting
  // for EOF, which a leftover grandchild could hold back forever.
  for (int r = 0; r < nproc; ++r) {
    Rank& rank = ranks[static_cast<size_t>(r)];
    for (int s = 0; s < 2; ++s) {
      Stream& stream = rank.streams[s];
      pump(rank, r, s, sink(s), &write_errors[s]);
      if (stream.fd >= 0) {
        if (!stream.partial.empty()) emit(rank, r, s, stream.partial, sink(s));
        sink(s).flush();
        close(stream.fd);
      }
    }
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  if (result == 0 && !options.out->good()) {
    *options.err << ("[launch] " + lost_output(write_errors[0]) + "\n") << std::flush;
    result = 1;
  }
  if (options.outcome != nullptr) *options.outcome = outcome;
  return result;
}

std::vector<std::string> self_command(int argc, const char* const* argv) {
  std::vector<std::string> command{this_executable("[launch]")};
  for (int i = 1; i < argc; ++i) command.emplace_back(argv[i]);
  return command;
}

int launch_self(int nproc, int argc, const char* const* argv, const LaunchOptions& options) {
  return launch_local(nproc, self_command(argc, argv), options);
}

int find_free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  BATON_CHECK(fd >= 0, "[launch] socket failed: ", std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t length = sizeof addr;
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) == 0;
  const int error = errno;
  close(fd);
  BATON_CHECK(ok, "[launch] cannot find a free port: ", std::strerror(error));
  return ntohs(addr.sin_port);
}

}  // namespace baton::comm
