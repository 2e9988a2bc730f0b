// The `tilepipe` binary: the built-in kernels registered with the driver, then the command
// line (tools/cli.cc). Two kinds of command run in Python (Debian's python3, the package and
// extension module found next to the installed binary, <prefix>/lib/python3.N/dist-packages,
// else in the source and build trees):
//   tilepipe run-py FILE.py [args...]    the script itself (python3 -m tilepipe FILE.py ...)
//   tilepipe VERB FILE.py[:kernel] ...   the same command line with a Python file as the
//                                        kernel source (python3 -m tilepipe.cli VERB ...)
//   tilepipe tune ... --scheduler ADDR   the same command line with the configs simulated on
//                                        a Dask cluster (python3 -m tilepipe.cli tune ...)
//   tilepipe fidelity|calibrate ...      likewise: their anchors include Python files (a build
//                                        without the front end runs them here and skips those)
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "cli.h"
#include "registry.h"

namespace {

using namespace tilepipe;

/// FILE.py or FILE.py:kernel, optionally followed by the script's own arguments
/// ("bench_sfa.py --file sparse_flash_attn_pa", python/tilepipe/sources.py).
bool is_python_source(const std::string& arg) {
  static const std::regex spec(R"(.*\.py(:[A-Za-z_][A-Za-z_0-9]*)?(\s.*)?)");
  return !arg.empty() && arg[0] != '-' && std::regex_match(arg, spec);
}

/// The value of an output flag (`emit KERNEL -o FILE.py`) is a file to write, not a kernel.
bool is_output_value(char** argv, int i) {
  const std::string prev = argv[i - 1];
  return prev == "-o" || prev == "--output";
}

/// `tune ... --scheduler ADDR`: the Dask executor lives in the Python module.
bool wants_cluster(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) != "tune") return false;
  for (int i = 2; i < argc; ++i)
    if (std::string a = argv[i]; a == "--scheduler" || a.rfind("--scheduler=", 0) == 0) return true;
  return false;
}

#ifdef TILEPIPE_PYTHON_EXE
/// The environment that makes `python3 -m tilepipe...` find the package and extension: the
/// installed copy next to this binary, else the source and build trees.
void python_environment() {
  std::string package_dir = TILEPIPE_PYTHON_DIR, module_dir = TILEPIPE_PYMODULE_DIR;
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    std::filesystem::path installed = exe.parent_path() / TILEPIPE_BIN_TO_PYTHON;
    if (std::filesystem::is_regular_file(installed / "tilelang" / "__init__.py", ec))
      package_dir = module_dir = installed.lexically_normal().string();
  }
  std::string path = package_dir + ":" + module_dir;
  if (const char* old = std::getenv("PYTHONPATH"); old && *old) path += std::string(":") + old;
  setenv("PYTHONPATH", path.c_str(), 1);
  setenv("TILEPIPE_BUILD_DIR", module_dir.c_str(), 1);
}

std::vector<char*> python_argv(const char* module, const std::vector<char*>& rest) {
  std::vector<char*> args = {const_cast<char*>(TILEPIPE_PYTHON_EXE), const_cast<char*>("-m"),
                             const_cast<char*>(module)};
  args.insert(args.end(), rest.begin(), rest.end());
  args.push_back(nullptr);
  return args;
}
#endif

#ifndef TILEPIPE_PYTHON_EXE
int no_front_end(const std::string& what, bool as_json) {
  return cli::fail(cli::kExitBadInput,
                   fmt::format("tilepipe {}: this build has no Python front end (configure with "
                               "-DTILEPIPE_PYTHON=ON after scripts/setup.sh)",
                               what),
                   as_json);
}
#endif

/// Replaces this process with `python3 -m MODULE args...` (run-py: the script's own exit
/// status is the command's); returns only on failure.
int exec_python(const char* module, const std::vector<char*>& rest, const std::string& what,
                bool as_json) {
#ifdef TILEPIPE_PYTHON_EXE
  python_environment();
  execv(TILEPIPE_PYTHON_EXE, python_argv(module, rest).data());
  return cli::fail(cli::kExitInternal,
                   fmt::format("tilepipe {}: cannot run {}: {}", what, TILEPIPE_PYTHON_EXE,
                               std::strerror(errno)),
                   as_json);
#else
  (void)module;
  (void)rest;
  return no_front_end(what, as_json);
#endif
}

#ifdef TILEPIPE_PYTHON_EXE
pid_t g_child = 0;

/// A SIGTERM / SIGHUP, or a SIGINT sent with kill(), reaches this process only: the child
/// gets it too. A terminal's Ctrl-C reaches the whole process group, the child included.
extern "C" void forward_signal(int sig, siginfo_t* info, void*) {
  if (g_child > 0 && (sig != SIGINT || info->si_code == SI_USER || info->si_code == SI_QUEUE))
    ::kill(g_child, sig);
}
#endif

/// Runs a verb in `python3 -m MODULE args...` as a child and returns the verb's result. The
/// child hands its exit code over a pipe (TILEPIPE_RESULT_FD, python/tilepipe/cli.py) once
/// the command has finished; a child that ends without handing it over was ended by the
/// user's code (os._exit, posix._exit, a thread's exit) before the command finished, and
/// has checked nothing: bad input, never 0. A child killed by a signal ends this process by
/// the same signal.
int supervise_python(const char* module, const std::vector<char*>& rest, const std::string& what,
                     bool as_json) {
#ifdef TILEPIPE_PYTHON_EXE
  python_environment();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return cli::fail(
        cli::kExitInternal,
        fmt::format("tilepipe {}: cannot create a pipe: {}", what, std::strerror(errno)), as_json);
  std::vector<char*> args = python_argv(module, rest);
  struct sigaction sa = {};
  sa.sa_sigaction = forward_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, SIG_DFL);
    const int fd = ::fcntl(fds[1], F_DUPFD, 3);  // a copy without O_CLOEXEC: exec keeps it
    setenv("TILEPIPE_RESULT_FD", std::to_string(fd).c_str(), 1);
    execv(TILEPIPE_PYTHON_EXE, args.data());
    std::fprintf(stderr, "tilepipe %s: cannot run %s: %s\n", what.c_str(), TILEPIPE_PYTHON_EXE,
                 std::strerror(errno));
    ::_exit(cli::kExitInternal);
  }
  ::close(fds[1]);
  if (pid < 0)
    return cli::fail(cli::kExitInternal,
                     fmt::format("tilepipe {}: cannot start {}: {}", what, TILEPIPE_PYTHON_EXE,
                                 std::strerror(errno)),
                     as_json);
  g_child = pid;
  std::string result;
  char buf[64];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    result.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_child = 0;
  if (WIFSIGNALED(status)) {
    std::signal(WTERMSIG(status), SIG_DFL);
    std::raise(WTERMSIG(status));
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : cli::kExitInternal;
  char* end = nullptr;
  const long handed = std::strtol(result.c_str(), &end, 10);
  if (!result.empty() && *end == '\n') return static_cast<int>(handed);
  if (code != 0) return code;  // an error the child reported (exit 1, 2, 3) before its end
  return cli::fail(
      cli::kExitBadInput,
      fmt::format("tilepipe {}: code of the kernel's file (or of a module it imports) ended the "
                  "process itself (os._exit, posix._exit, a thread's exit) with status 0 "
                  "before the command finished, so nothing was run or checked; remove that "
                  "exit from the code the command imports, or guard it with `if __name__ == "
                  "\"__main__\":`",
                  what),
      as_json);
#else
  (void)module;
  (void)rest;
  return no_front_end(what, as_json);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "run-py")
    return exec_python("tilepipe", {argv + 2, argv + argc}, "run-py", false);
#ifdef TILEPIPE_PYTHON_EXE
  if (argc >= 2 && (std::string(argv[1]) == "fidelity" || std::string(argv[1]) == "calibrate") &&
      !std::getenv("TILEPIPE_NO_PYTHON"))
    return supervise_python("tilepipe.cli", {argv + 1, argv + argc}, argv[1],
                            cli::json_requested(argc, argv));
#endif
  for (int i = 2; i < argc; ++i)
    if (is_python_source(argv[i]) && !is_output_value(argv, i))
      return supervise_python("tilepipe.cli", {argv + 1, argv + argc},
                              fmt::format("{} {}", argv[1], argv[i]),
                              cli::json_requested(argc, argv));
  if (wants_cluster(argc, argv))
    return supervise_python("tilepipe.cli", {argv + 1, argv + argc}, "tune --scheduler",
                            cli::json_requested(argc, argv));
  kernels::register_all();
  return cli::main(argc, argv);
}
