// The protobuf wire format, written by hand (no libprotobuf): varints, fixed 64-bit values
// and length-delimited fields appended to a byte string, with nested messages whose length
// is patched in when they end. Enough for the Perfetto trace writer (perfetto.cc); nothing
// here knows a schema: callers pass field numbers.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace tilepipe::prof::protowire {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2 };

/// Bytes a varint of `v` takes (1 to 10).
inline int varint_size(uint64_t v) {
  return v == 0 ? 1 : (std::bit_width(v) + 6) / 7;
}

/// Appends `v` as a varint: 7 bits a byte, least significant first, high bit = more follow.
inline void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

/// A message being written into a string. Fields in the order called; nested messages are
/// opened with begin(field) and closed with end(): the length is written when the message
/// ends (one byte reserved, the contents moved when a longer varint is needed).
class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}

  void tag(uint32_t field, WireType type) { put_varint(out_, (uint64_t{field} << 3) | type); }
  void varint(uint32_t field, uint64_t v) {
    tag(field, kVarint);
    put_varint(out_, v);
  }
  /// int32 / int64 fields: negative values as their 64-bit two's complement (10 bytes).
  void int64(uint32_t field, int64_t v) { varint(field, static_cast<uint64_t>(v)); }
  void boolean(uint32_t field, bool v) { varint(field, v ? 1 : 0); }
  void fixed64(uint32_t field, uint64_t v) {
    tag(field, kFixed64);
    for (int i = 0; i < 8; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xff);
  }
  void float64(uint32_t field, double v) { fixed64(field, std::bit_cast<uint64_t>(v)); }
  void bytes(uint32_t field, std::string_view b) {
    tag(field, kLengthDelimited);
    put_varint(out_, b.size());
    out_ += b;
  }

  /// Opens a nested message; returns the mark end() takes.
  size_t begin(uint32_t field) {
    tag(field, kLengthDelimited);
    out_ += '\0';
    return out_.size();
  }
  void end(size_t mark) {
    const uint64_t len = out_.size() - mark;
    if (len < 0x80) {
      out_[mark - 1] = static_cast<char>(len);
      return;
    }
    std::string v;
    put_varint(v, len);
    out_.replace(mark - 1, 1, v);
  }

  std::string& out() { return out_; }

 private:
  std::string& out_;
};

}  // namespace tilepipe::prof::protowire
