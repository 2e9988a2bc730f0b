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
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
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

/// Replaces this process with `python3 -m MODULE args...`; returns only on failure.
int exec_python(const char* module, const std::vector<char*>& rest, const std::string& what,
                bool as_json) {
#ifdef TILEPIPE_PYTHON_EXE
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
  std::vector<char*> args = {const_cast<char*>(TILEPIPE_PYTHON_EXE), const_cast<char*>("-m"),
                             const_cast<char*>(module)};
  args.insert(args.end(), rest.begin(), rest.end());
  args.push_back(nullptr);
  execv(TILEPIPE_PYTHON_EXE, args.data());
  return cli::fail(cli::kExitInternal,
                   fmt::format("tilepipe {}: cannot run {}: {}", what, TILEPIPE_PYTHON_EXE,
                               std::strerror(errno)),
                   as_json);
#else
  (void)module;
  (void)rest;
  return cli::fail(cli::kExitBadInput,
                   fmt::format("tilepipe {}: this build has no Python front end (configure with "
                               "-DTILEPIPE_PYTHON=ON after scripts/setup.sh)",
                               what),
                   as_json);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "run-py")
    return exec_python("tilepipe", {argv + 2, argv + argc}, "run-py", false);
#ifdef TILEPIPE_PYTHON_EXE
  if (argc >= 2 && (std::string(argv[1]) == "fidelity" || std::string(argv[1]) == "calibrate") &&
      !std::getenv("TILEPIPE_NO_PYTHON"))
    return exec_python("tilepipe.cli", {argv + 1, argv + argc}, argv[1],
                       cli::json_requested(argc, argv));
#endif
  for (int i = 2; i < argc; ++i)
    if (is_python_source(argv[i]) && !is_output_value(argv, i))
      return exec_python("tilepipe.cli", {argv + 1, argv + argc},
                         fmt::format("{} {}", argv[1], argv[i]), cli::json_requested(argc, argv));
  if (wants_cluster(argc, argv))
    return exec_python("tilepipe.cli", {argv + 1, argv + argc}, "tune --scheduler",
                       cli::json_requested(argc, argv));
  kernels::register_all();
  return cli::main(argc, argv);
}
