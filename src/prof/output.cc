#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "tilepipe/prof.h"

namespace tilepipe::prof {

void write_file_atomic(const std::string& path, const std::string& content) {
  // A temporary name of this process in the same directory (rename stays atomic there); an
  // interrupted run leaves at most this file behind, never a truncated `path`.
  static int serial = 0;
  std::string tmp = fmt::format("{}.tmp.{}.{}", path, static_cast<long>(::getpid()), serial++);
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    throw std::runtime_error(
        fmt::format("cannot write '{}': {} (does the directory exist and "
                    "is it writable?)",
                    path, std::strerror(errno)));
  bool ok = std::fwrite(content.data(), 1, content.size(), f) == content.size();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw std::runtime_error(fmt::format("cannot write '{}': {}", path, why));
  }
}

}  // namespace tilepipe::prof
