// parse_header against one crafted bad header per validation rule: each must throw ds::IoError
// naming the source and the problem, never crash. Plus the valid edge cases the rules must allow.
#include "checkpoint_test_util.h"

namespace ds::test {
namespace {

using format::Header;
using format::parse_header;

const std::string kA8 = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";

Header parse_ok(const std::string& image) {
  return parse_header(reinterpret_cast<const uint8_t*>(image.data()), image.size(), image.size(), "ok.safetensors");
}

TEST(SafetensorsValidation, TooShortForLengthPrefix) {
  for (size_t n : {0, 1, 7}) {
    const std::string msg = parse_error(std::string(n, '\0'));
    EXPECT_CONTAINS(msg, "bad.safetensors: file is " + std::to_string(n) + " bytes, too short");
  }
}

TEST(SafetensorsValidation, HeaderLengthBeyondFileSize) {
  const std::string image = length_prefix(1234567890123ULL) + std::string(4088, ' ');
  EXPECT_EQ(parse_error(image, "model.safetensors"),
            "model.safetensors: header length 1234567890123 exceeds the file size 4096 "
            "(truncated or not a safetensors file)");
  EXPECT_CONTAINS(parse_error(length_prefix(UINT64_MAX)), "header length 18446744073709551615 exceeds");
  EXPECT_CONTAINS(parse_error(length_prefix(9) + "{}      "), "header length 9 exceeds the file size 16");
}

TEST(SafetensorsValidation, HeaderLengthOverLimit) {
  // The file claims to be large enough, but 150 MB of header is over the format's limit; only
  // the prefix is in memory, so nothing reads or allocates the claimed size.
  const std::string prefix = length_prefix(150'000'000);
  const std::string msg = io_error_of([&] {
    parse_header(reinterpret_cast<const uint8_t*>(prefix.data()), prefix.size(), 200'000'000, "big.safetensors");
  });
  EXPECT_CONTAINS(msg, "big.safetensors: header length 150000000 exceeds the 100000000-byte limit");
}

TEST(SafetensorsValidation, EmptyHeader) {
  EXPECT_CONTAINS(parse_error(length_prefix(0)), "header length is 0");
}

TEST(SafetensorsValidation, InvalidUtf8) {
  EXPECT_CONTAINS(parse_error(craft("{\"\xff\":1}")), "not valid UTF-8 (byte 0xff at header offset 2)");
  EXPECT_CONTAINS(parse_error(craft("{\"\xc0\x80\":1}")), "not valid UTF-8");     // overlong NUL
  EXPECT_CONTAINS(parse_error(craft("{\"\xed\xa0\x80\":1}")), "not valid UTF-8"); // surrogate
  EXPECT_CONTAINS(parse_error(craft("{\"\xf4\x90\x80\x80\":1}")), "not valid UTF-8");  // > U+10FFFF
  EXPECT_CONTAINS(parse_error(craft("{\"\xe2\x82\":1}")), "not valid UTF-8");     // cut sequence
}

TEST(SafetensorsValidation, NotJson) {
  EXPECT_CONTAINS(parse_error(craft("not json")), "header is not valid JSON");
  EXPECT_CONTAINS(parse_error(craft("{" + kA8, 8)), "header is not valid JSON");       // unterminated
  EXPECT_CONTAINS(parse_error(craft("{" + kA8 + "}x", 8)), "header is not valid JSON");  // trailing
  EXPECT_CONTAINS(parse_error(craft("{}{}")), "header is not valid JSON");
  EXPECT_CONTAINS(parse_error(craft(std::string("{\"a\0\":1}", 8))), "header is not valid JSON");
}

TEST(SafetensorsValidation, RootMustBeObject) {
  EXPECT_CONTAINS(parse_error(craft("[]")), "the header must be a JSON object, got an array");
  EXPECT_CONTAINS(parse_error(craft("\"x\"")), "the header must be a JSON object, got a string");
  EXPECT_CONTAINS(parse_error(craft("7")), "the header must be a JSON object, got the number 7");
  EXPECT_CONTAINS(parse_error(craft("null")), "the header must be a JSON object, got null");
}

TEST(SafetensorsValidation, EntryMustBeObject) {
  EXPECT_CONTAINS(parse_error(craft(R"({"w":1})")), "tensor 'w': entry must be an object");
  EXPECT_CONTAINS(parse_error(craft(R"({"w":[0,4]})")), "tensor 'w': entry must be an object");
}

TEST(SafetensorsValidation, EntryKeys) {
  EXPECT_CONTAINS(parse_error(craft(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", 4)), "tensor 'w': missing \"dtype\"");
  EXPECT_CONTAINS(parse_error(craft(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", 4)), "tensor 'w': missing \"shape\"");
  EXPECT_CONTAINS(parse_error(craft(R"({"w":{"dtype":"F32","shape":[1]}})", 4)), "tensor 'w': missing \"data_offsets\"");
  EXPECT_CONTAINS(parse_error(craft(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", 4)),
                  "tensor 'w': unexpected key 'x'");
  EXPECT_CONTAINS(parse_error(craft(R"({"w":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4)),
                  "tensor 'w': key 'dtype' appears twice");
}

TEST(SafetensorsValidation, Dtype) {
  EXPECT_CONTAINS(parse_error(craft(R"({"w":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", 4)),
                  "tensor 'w': dtype must be a string, got the number 4");
  EXPECT_CONTAINS(parse_error(craft(R"({"w":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}})", 16)),
                  "tensor 'w': unknown dtype 'F128'");
  EXPECT_CONTAINS(parse_error(craft(R"({"w":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}})", 4)),
                  "unknown dtype 'f32'");
}

TEST(SafetensorsValidation, Shape) {
  auto with_shape = [](const std::string& shape) {
    return craft(R"({"w":{"dtype":"U8","shape":)" + shape + R"(,"data_offsets":[0,4]}})", 4);
  };
  EXPECT_CONTAINS(parse_error(with_shape("4")), "tensor 'w': shape must be an array of non-negative integers, got the number 4");
  EXPECT_CONTAINS(parse_error(with_shape("[-4]")), "tensor 'w': shape entries must be non-negative integers, got the negative number -4");
  EXPECT_CONTAINS(parse_error(with_shape("[4.0]")), "got the number 4.0 (not an integer");
  EXPECT_CONTAINS(parse_error(with_shape("[\"4\"]")), "shape entries must be non-negative integers, got a string");
  EXPECT_CONTAINS(parse_error(with_shape("[[4]]")), "shape entries must be non-negative integers, got an array");
  EXPECT_CONTAINS(parse_error(with_shape("[null]")), "got null");
  EXPECT_CONTAINS(parse_error(with_shape("[9223372036854775808]")), "shape entry 9223372036854775808 exceeds 2^63-1");
  EXPECT_CONTAINS(parse_error(with_shape("[99999999999999999999]")), "not an integer that fits in 64 bits");
}

TEST(SafetensorsValidation, DataOffsetsShape) {
  auto with_offsets = [](const std::string& offs) {
    return craft(R"({"w":{"dtype":"U8","shape":[4],"data_offsets":)" + offs + "}}", 4);
  };
  EXPECT_CONTAINS(parse_error(with_offsets("4")), "data_offsets must be an array [begin, end], got the number 4");
  EXPECT_CONTAINS(parse_error(with_offsets("[4]")), "data_offsets must be [begin, end], got 1 entries");
  EXPECT_CONTAINS(parse_error(with_offsets("[]")), "got 0 entries");
  EXPECT_CONTAINS(parse_error(with_offsets("[0,4,4]")), "got more than 2 entries");
  EXPECT_CONTAINS(parse_error(with_offsets("[-1,4]")), "data_offsets entries must be non-negative integers, got the negative number -1");
  EXPECT_CONTAINS(parse_error(with_offsets("[0,4.5]")), "got the number 4.5");
  EXPECT_CONTAINS(parse_error(with_offsets("{\"b\":0}")), "data_offsets must be an array [begin, end], got an object");
}

TEST(SafetensorsValidation, OffsetsOrderAndRange) {
  EXPECT_CONTAINS(parse_error(craft(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})", 4)),
                  "tensor 'w': data_offsets [4, 0] end before they begin");
  EXPECT_CONTAINS(parse_error(craft(R"({"w":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})", 4)),
                  "tensor 'w': data_offsets [0, 8] extend past the data section, which holds 4 bytes");
  EXPECT_CONTAINS(parse_error(craft(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[18446744073709551615,0]}})", 4)),
                  "end before they begin");
}

TEST(SafetensorsValidation, SizeMismatch) {
  EXPECT_CONTAINS(parse_error(craft(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 20)),
                  "tensor 'w': shape [2, 3] of F32 needs 24 bytes but data_offsets [0, 20] hold 20");
  EXPECT_CONTAINS(parse_error(craft(R"({"w":{"dtype":"F32","shape":[],"data_offsets":[0,0]}})")),
                  "shape [] of F32 needs 4 bytes");  // 0-d is one element, not zero
}

TEST(SafetensorsValidation, Overflow) {
  EXPECT_CONTAINS(parse_error(craft(R"({"w":{"dtype":"U8","shape":[4294967296,4294967296,2],"data_offsets":[0,0]}})")),
                  "has more elements than fit in 64 bits");
  EXPECT_CONTAINS(parse_error(craft(R"({"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})")),
                  "needs more bytes than fit in 64 bits");
  // A zero dimension makes any product 0: valid, whatever the other dimensions.
  const Header h = parse_ok(craft(R"({"w":{"dtype":"F64","shape":[9223372036854775807,9223372036854775807,0],"data_offsets":[0,0]}})"));
  EXPECT_EQ(h.tensors.at(0).numel(), 0);
}

TEST(SafetensorsValidation, OverlapGapCoverage) {
  EXPECT_CONTAINS(parse_error(craft(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})", 8)),
                  "tensors 'a' [0, 8] and 'b' [4, 8] overlap");
  EXPECT_CONTAINS(parse_error(craft(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", 4)),
                  "overlap");  // aliasing: two names for the same bytes
  EXPECT_CONTAINS(parse_error(craft(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"e":{"dtype":"U8","shape":[0],"data_offsets":[4,4]}})", 8)),
                  "overlap");  // an empty tensor inside another one
  EXPECT_CONTAINS(parse_error(craft(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[2],"data_offsets":[6,8]}})", 8)),
                  "data bytes [4, 6) belong to no tensor (gap before 'b'");
  EXPECT_CONTAINS(parse_error(craft(R"({"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})", 4)),
                  "data bytes [0, 2) belong to no tensor");
  EXPECT_CONTAINS(parse_error(craft("{" + kA8 + "}", 12)),
                  "the data section holds 12 bytes but the tensors cover only 8");
  EXPECT_CONTAINS(parse_error(craft("{}", 3)), "the data section holds 3 bytes but the tensors cover only 0");
}

TEST(SafetensorsValidation, DuplicateNames) {
  EXPECT_CONTAINS(parse_error(craft("{" + kA8 + "," + kA8 + "}", 8)), "tensor 'a' appears twice in the header");
  EXPECT_CONTAINS(parse_error(craft(R"({"__metadata__":{},"__metadata__":{}})")), "\"__metadata__\" appears twice");
  EXPECT_CONTAINS(parse_error(craft(R"({"__metadata__":{"k":"1","k":"2"}})")), "__metadata__ key 'k' appears twice");
}

TEST(SafetensorsValidation, MetadataValuesAreStrings) {
  EXPECT_CONTAINS(parse_error(craft(R"({"__metadata__":{"k":1}})")), "__metadata__ 'k': value must be a string, got the number 1");
  EXPECT_CONTAINS(parse_error(craft(R"({"__metadata__":{"k":{"x":"y"}}})")), "__metadata__ 'k': value must be a string, got an object");
  EXPECT_CONTAINS(parse_error(craft(R"({"__metadata__":{"k":["y"]}})")), "got an array");
  EXPECT_CONTAINS(parse_error(craft(R"({"__metadata__":{"k":null}})")), "got null");
  EXPECT_CONTAINS(parse_error(craft(R"({"__metadata__":"pt"})")), "\"__metadata__\" must be an object of strings, got a string");
  EXPECT_CONTAINS(parse_error(craft(R"({"__metadata__":null})")), "\"__metadata__\" must be an object of strings, got null");
}

TEST(SafetensorsValidation, DeepNestingFailsFast) {
  // A million nested arrays: rejected at the first unexpected container, no recursion, no DOM.
  const std::string deep = std::string(1'000'000, '[') + std::string(1'000'000, ']');
  EXPECT_CONTAINS(parse_error(craft(deep)), "must be a JSON object, got an array");
  const std::string deep_entry = "{\"w\":{\"dtype\":" + std::string(100'000, '[');
  EXPECT_CONTAINS(parse_error(craft(deep_entry)), "tensor 'w': dtype must be a string, got an array");
}

TEST(SafetensorsValidation, LongNamesAreClippedInMessages) {
  const std::string name(10'000, 'n');
  const std::string msg = parse_error(craft("{\"" + name + "\":1}"));
  EXPECT_CONTAINS(msg, "... (10000 bytes)");
  EXPECT_LT(msg.size(), 400u);
}

TEST(SafetensorsValidation, AcceptsValidEdgeCases) {
  // No padding (the official writer pads, the official reader does not require it).
  EXPECT_EQ(parse_error(craft("{" + kA8 + "}", 8)), "");
  // Whitespace around the object, metadata anywhere, tensors listed out of data order.
  const std::string out_of_order = craft(
      R"( { "b" : {"dtype":"U8","shape":[2],"data_offsets":[4,6]}, "__metadata__":{"x":"y"},)"
      R"("a":{"dtype":"U8","shape":[2,2],"data_offsets":[0,4]}, "e":{"dtype":"BOOL","shape":[0],"data_offsets":[6,6]} }  )",
      6);
  const Header h = parse_ok(out_of_order);
  ASSERT_EQ(h.tensors.size(), 3u);
  EXPECT_EQ(h.tensors[0].name, "a");
  EXPECT_EQ(h.tensors[1].name, "b");
  EXPECT_EQ(h.tensors[2].name, "e");
  EXPECT_EQ(h.metadata.at("x"), "y");
  EXPECT_EQ(h.data_size, 6u);
  // Several empty tensors at one offset keep their header order; unknown names are fine.
  const Header e = parse_ok(craft(
      R"({"z":{"dtype":"F16","shape":[0,3],"data_offsets":[0,0]},"y":{"dtype":"I64","shape":[3,0],"data_offsets":[0,0]},"":{"dtype":"I8","shape":[],"data_offsets":[0,1]}})",
      1));
  ASSERT_EQ(e.tensors.size(), 3u);
  EXPECT_EQ(e.tensors[0].name, "z");
  EXPECT_EQ(e.tensors[1].name, "y");
  EXPECT_EQ(e.tensors[2].name, "");
  // An empty file: just "{}" padded.
  EXPECT_TRUE(parse_ok(length_prefix(8) + "{}      ").tensors.empty());
  // Escapes and non-ASCII names.
  EXPECT_EQ(parse_ok(craft(R"({"\u00e9\n\"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1)).tensors[0].name,
            "\xc3\xa9\n\"");
}

TEST(SafetensorsValidation, CallerBufferShorterThanHeader) {
  const std::string image = craft("{" + kA8 + "}", 8);
  const std::string msg = io_error_of([&] {
    parse_header(reinterpret_cast<const uint8_t*>(image.data()), 20, image.size(), "x");
  });
  EXPECT_CONTAINS(msg, "x: header length");
  EXPECT_CONTAINS(msg, "only 12 header bytes were given");
}

}  // namespace
}  // namespace ds::test
