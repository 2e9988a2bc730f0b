// Output files: checked before a run, written through a temporary and a rename, and their
// temporaries removed when the process is interrupted.
#include <fmt/format.h>
#include <sys/stat.h>

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <stdexcept>

#include "tilepipe/prof.h"

namespace tilepipe::prof {
namespace {

namespace fs = std::filesystem;

std::string named(const std::string& flag, const std::string& path) {
  return flag.empty() ? fmt::format("'{}'", path) : fmt::format("{} '{}'", flag, path);
}

/// What a non-regular file is, for messages.
const char* file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

// Temporaries: plain pointers in a fixed table, so the signal handler reads them without
// locks or allocation (only unlink, which is async-signal-safe).
constexpr size_t kTempSlots = 1024;
std::array<std::atomic<char*>, kTempSlots> g_temps{};

extern "C" void remove_temps_and_die(int sig) {
  for (auto& slot : g_temps)
    if (char* p = slot.load()) ::unlink(p);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

std::string temp_beside(const std::string& target) {
  static std::atomic<int> serial{0};
  return fmt::format("{}.tmp.{}.{}", target, static_cast<long>(::getpid()), serial++);
}

int register_temp(const std::string& path) {
  char* copy = ::strdup(path.c_str());
  if (!copy) return -1;
  for (size_t i = 0; i < kTempSlots; ++i) {
    char* empty = nullptr;
    if (g_temps[i].compare_exchange_strong(empty, copy)) return static_cast<int>(i);
  }
  std::free(copy);
  return -1;  // more temporaries at once than slots: this one is not removed on a signal
}

void unregister_temp(int slot) {
  if (slot < 0) return;
  std::free(g_temps[static_cast<size_t>(slot)].exchange(nullptr));
}

void install_temp_cleanup() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, remove_temps_and_die);
}

namespace {

struct NotedInput {
  dev_t dev;
  ino_t ino;
  std::string path, what;
};
std::mutex g_inputs_mu;
std::vector<NotedInput> g_inputs;

/// The input `st` is, if it is one.
const NotedInput* noted_input(const struct stat& st) {
  for (const auto& in : g_inputs)
    if (in.dev == st.st_dev && in.ino == st.st_ino) return &in;
  return nullptr;
}

}  // namespace

void note_input(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  std::lock_guard<std::mutex> lock(g_inputs_mu);
  if (!noted_input(st)) g_inputs.push_back({st.st_dev, st.st_ino, path, what});
}

std::string resolve_output(const std::string& path, const std::string& flag) {
  std::error_code ec;
  fs::path link = fs::absolute(path, ec);
  // Links at `path` are followed by hand first: weakly_canonical stops at a link whose
  // target does not exist yet (a dangling link), and the rename would replace the link.
  std::error_code link_ec;
  for (int hops = 0; !ec && hops < 40 && fs::is_symlink(link, link_ec); ++hops) {
    fs::path to = fs::read_symlink(link, ec);
    link = to.is_absolute() ? to : link.parent_path() / to;
  }
  // weakly_canonical follows every symlink that exists, those in the directories included.
  fs::path target = ec ? link : fs::weakly_canonical(link, ec);
  if (ec)
    throw std::runtime_error(
        fmt::format("{}: cannot resolve the path ({})", named(flag, path), ec.message()));
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    struct stat link {};
    bool is_link = ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode);
    throw std::runtime_error(fmt::format(
        "{}: {} {}; tilepipe writes only regular files: choose a file path", named(flag, path),
        is_link ? fmt::format("links to '{}', which is", target.string()) : "exists and is",
        file_kind(st.st_mode)));
  }
  std::lock_guard<std::mutex> lock(g_inputs_mu);
  if (const NotedInput* in = ::stat(target.c_str(), &st) == 0 ? noted_input(st) : nullptr)
    throw std::runtime_error(fmt::format(
        "{} is {} '{}': writing it would destroy an input of the command; choose another path",
        named(flag, path), in->what, in->path));
  return target.string();
}

namespace {

/// Creates a file where the outputs will be written: the only test that holds on every file
/// system (read-only mounts, /proc, permissions as root).
void writable_dir(const std::string& flag, const std::string& path, const fs::path& dir) {
  std::string probe = (dir / fmt::format(".tilepipe-probe.{}", ::getpid())).string();
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0)
    // ENOENT in a directory that exists: a file system without files of its own (/proc).
    throw std::runtime_error(fmt::format(
        "{}: the directory '{}' is not writable: no file can be created there ({}); choose "
        "a writable directory",
        named(flag, path), dir.string(),
        errno == ENOENT ? "its file system does not hold regular files" : std::strerror(errno)));
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace

void check_outputs(const std::vector<OutputSpec>& outputs,
                   const std::vector<std::pair<std::string, std::string>>& inputs) {
  struct Target {
    std::string flag, path, resolved;
  };
  std::vector<Target> files;
  for (const auto& o : outputs) {
    if (o.path.empty()) continue;
    fs::path p(o.path);
    fs::path dir = o.is_dir ? p : p.parent_path();
    if (dir.empty()) dir = ".";
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      if (o.is_dir && fs::exists(p, ec))
        throw std::runtime_error(fmt::format(
            "{}: is not a directory; give a directory to write into", named(o.flag, o.path)));
      throw std::runtime_error(fmt::format("{}: the directory '{}' does not exist; create it first",
                                           named(o.flag, o.path), dir.string()));
    }
    writable_dir(o.flag, o.path, dir);
    auto add = [&](const std::string& path) {
      std::string resolved = resolve_output(path, o.flag);
      // A link into another directory (a dangling one too): its target's directory is the
      // one written, so it must exist and take new files as well.
      fs::path target_dir = fs::path(resolved).parent_path();
      if (!fs::equivalent(target_dir, dir, ec)) {
        if (!fs::is_directory(target_dir, ec))
          throw std::runtime_error(
              fmt::format("{}: links to '{}', whose directory '{}' does not exist; create it first",
                          named(o.flag, path), resolved, target_dir.string()));
        writable_dir(o.flag, path, target_dir);
      }
      files.push_back({o.flag, path, resolved});
    };
    if (o.is_dir) {
      for (const auto& f : o.files) add((p / f).string());
    } else {
      add(o.path);
    }
  }
  for (const auto& f : files) {
    if (::access(f.resolved.c_str(), F_OK) == 0 && ::access(f.resolved.c_str(), W_OK) != 0)
      throw std::runtime_error(
          fmt::format("{}: the file is read-only ({}); remove it or choose another path",
                      named(f.flag, f.path), std::strerror(errno)));
  }
  for (size_t i = 0; i < files.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (files[i].resolved == files[j].resolved)
        throw std::runtime_error(fmt::format(
            "{} and {} name the same file '{}': one would overwrite the other; give each "
            "output its own path",
            named(files[j].flag, files[j].path), named(files[i].flag, files[i].path),
            files[i].resolved));
  for (const auto& [flag, path] : inputs) {
    if (path.empty()) continue;
    std::error_code ec;
    for (const auto& f : files)
      if (fs::equivalent(f.resolved, path, ec) && !ec)
        throw std::runtime_error(fmt::format(
            "{} is the input {} '{}': writing it would destroy the input; choose another path",
            named(f.flag, f.path), flag, path));
  }
}

void write_file_atomic(const std::string& path, const std::string& content) {
  // Through a temporary: an interrupted run leaves neither it nor a truncated target.
  const std::string target = resolve_output(path);
  const std::string tmp = temp_beside(target);
  int slot = register_temp(tmp);
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) {
    unregister_temp(slot);
    throw std::runtime_error(
        fmt::format("cannot write '{}': {} (does the directory exist and is it writable?)", path,
                    std::strerror(errno)));
  }
  bool ok = std::fwrite(content.data(), 1, content.size(), f) == content.size();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), target.c_str()) != 0) {
    std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    unregister_temp(slot);
    throw std::runtime_error(fmt::format("cannot write '{}': {}", path, why));
  }
  unregister_temp(slot);
}

}  // namespace tilepipe::prof
