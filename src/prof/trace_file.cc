// The file a trace is streamed to (trace_format.h): a temporary renamed when complete.
#include <fmt/format.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "tilepipe/prof.h"
#include "trace_format.h"

namespace tilepipe::prof::trace {
namespace {

gzFile as_gz(void* p) {
  return static_cast<gzFile>(p);
}

}  // namespace

TraceFile::TraceFile(const std::string& path, bool gzip)
    : path_(path), target_(resolve_output(path)) {
  // A temporary of this process beside the target, renamed by commit().
  tmp_ = temp_beside(target_);
  temp_slot_ = register_temp(tmp_);
  // "T": transparent (plain) through the same interface. zlib writes a gzip header without
  // a time stamp, so the same run gives a byte-identical file.
  gz_ = gzopen(tmp_.c_str(), gzip ? "wb6" : "wbT");
  if (!gz_) {
    unregister_temp(temp_slot_);
    throw std::runtime_error(fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
  }
  gzbuffer(as_gz(gz_), 1 << 20);
}

TraceFile::~TraceFile() {
  if (gz_) {
    gzclose(as_gz(gz_));
    std::remove(tmp_.c_str());
  }
  unregister_temp(temp_slot_);
}

void TraceFile::fail(const std::string& why) {
  if (gz_) gzclose(as_gz(gz_));
  gz_ = nullptr;
  std::remove(tmp_.c_str());
  throw std::runtime_error(fmt::format("cannot write '{}': {}", path_, why));
}

void TraceFile::write(std::string_view data) {
  if (data.empty()) return;
  if (gzwrite(as_gz(gz_), data.data(), static_cast<unsigned>(data.size())) !=
      static_cast<int>(data.size()))
    fail(std::strerror(errno));
}

void TraceFile::commit() {
  bool ok = gzclose(as_gz(gz_)) == Z_OK;
  gz_ = nullptr;
  if (!ok || std::rename(tmp_.c_str(), target_.c_str()) != 0) {
    std::string why = std::strerror(errno);
    std::remove(tmp_.c_str());
    throw std::runtime_error(fmt::format("cannot write '{}': {}", path_, why));
  }
}

}  // namespace tilepipe::prof::trace
