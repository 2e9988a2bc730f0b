#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "tilepipe/prof.h"

namespace tilepipe::prof {

void write_file_atomic(const std::string& path, const std::string& content) {
  std::string tmp = path + ".tmp";
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
