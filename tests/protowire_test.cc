// The protobuf wire writer (src/prof/protowire.h) against encodings worked out by hand from
// the protobuf encoding rules: varints, tags, fixed 64-bit little-endian values, and
// length-delimited nested messages whose length needs one, two or three bytes.
#include "prof/protowire.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

namespace tilepipe::prof::protowire {
namespace {

std::string hex(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    static const char* d = "0123456789abcdef";
    o += d[c >> 4];
    o += d[c & 15];
  }
  return o;
}

std::string varint_of(uint64_t v) {
  std::string s;
  put_varint(s, v);
  return s;
}

TEST(ProtoWire, VarintsAreSevenBitsLeastSignificantFirst) {
  EXPECT_EQ(hex(varint_of(0)), "00");
  EXPECT_EQ(hex(varint_of(1)), "01");
  EXPECT_EQ(hex(varint_of(127)), "7f");
  EXPECT_EQ(hex(varint_of(128)), "8001");
  EXPECT_EQ(hex(varint_of(300)), "ac02");
  EXPECT_EQ(hex(varint_of(16384)), "808001");
  EXPECT_EQ(hex(varint_of(uint64_t{1} << 32)), "8080808010");
  EXPECT_EQ(hex(varint_of(std::numeric_limits<uint64_t>::max())), "ffffffffffffffffff01");
  for (uint64_t v : {uint64_t{0}, uint64_t{127}, uint64_t{128}, uint64_t{1} << 35,
                     std::numeric_limits<uint64_t>::max()})
    EXPECT_EQ(varint_size(v), static_cast<int>(varint_of(v).size())) << v;
}

TEST(ProtoWire, FieldsCarryTheirNumberAndWireType) {
  std::string out;
  Writer w(out);
  w.varint(1, 150);                   // the protobuf documentation's example: 08 96 01
  w.varint(58, 64);                   // two-byte tag: (58 << 3) | 0 = 464
  w.int64(4, -1);                     // negative int64: ten bytes
  w.boolean(87, true);                // (87 << 3) | 0 = 696
  w.bytes(2, "testing");              // 12 07 74 65 73 74 69 6e 67
  w.fixed64(47, 0x0102030405060708);  // (47 << 3) | 1 = 377: little-endian
  w.float64(5, 1.0);                  // 0x3ff0000000000000
  EXPECT_EQ(hex(out),
            "089601"
            "d00340"
            "20ffffffffffffffffff01"
            "b80501"
            "120774657374696e67"
            "f9020807060504030201"
            "29000000000000f03f");
}

TEST(ProtoWire, NestedMessagesGetTheirLengthWhenTheyEnd) {
  std::string out;
  Writer w(out);
  size_t outer = w.begin(11);
  w.varint(9, 1);
  size_t inner = w.begin(4);
  w.varint(1, 2);
  w.end(inner);
  w.end(outer);
  EXPECT_EQ(hex(out),
            "5a06"
            "4801"
            "22020802");
  // Empty message: just its tag and a zero length.
  out.clear();
  w.end(w.begin(60));
  EXPECT_EQ(hex(out), "e20300");
}

TEST(ProtoWire, LongNestedMessagesMoveTheirContentsForALongerLength) {
  for (size_t n : {size_t{125}, size_t{126}, size_t{127}, size_t{128}, size_t{16381}, size_t{16382},
                   size_t{20000}}) {
    std::string out = "x";  // something before, which must stay
    Writer w(out);
    size_t m = w.begin(1);
    w.bytes(2, std::string(n, 'a'));  // 1 tag byte + length varint + n
    w.varint(3, 7);
    w.end(m);
    std::string body;
    Writer b(body);
    b.bytes(2, std::string(n, 'a'));
    b.varint(3, 7);
    std::string expected = "x\x0a" + varint_of(body.size()) + body;
    EXPECT_EQ(out, expected) << n;
  }
}

}  // namespace
}  // namespace tilepipe::prof::protowire
