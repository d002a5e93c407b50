// Writer → reader round trips (every dtype, 0-d and empty tensors, metadata, streaming producers),
// golden bytes from the official implementation's own tests, and the reader's range reads and
// its behaviour on truncated or changed files.
#include <fcntl.h>
#include <unistd.h>

#include "checkpoint_test_util.h"
#include "safetensors_samples.h"

namespace ds::test {
namespace {

using format::SafetensorsFile;
using format::SafetensorsWriter;
using format::StDtype;
using format::TensorInfo;

std::string read_tensor(const SafetensorsFile& f, const TensorInfo& t) {
  std::string out(t.nbytes(), '\0');
  f.read(t, out.data(), out.size());
  return out;
}

std::vector<Sample> all_samples() {
  std::vector<Sample> s = numpy_samples();
  s.push_back(make_sample("f8_e4m3", StDtype::F8_E4M3, {5}));
  s.push_back(make_sample("f8_e5m2", StDtype::F8_E5M2, {1, 3}));
  return s;
}

TEST(SafetensorsRoundTrip, EveryDtypeShapeAndMetadata) {
  TempDir dir;
  const std::string path = dir.file("all.safetensors");
  const std::vector<Sample> samples = all_samples();
  SafetensorsWriter w(path);
  w.set_metadata("format", "pt");
  w.set_metadata("note", "\xc3\xbcnicode \"quoted\" \\ new\nline\ttab \x01");
  w.set_metadata("format", "np");  // replaces, keeps first position
  for (const Sample& s : samples) w.add(s.name, s.dtype, s.shape, s.bytes.data());
  w.commit();
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"all.safetensors"});

  const SafetensorsFile f(path);
  ASSERT_EQ(f.tensors().size(), samples.size());
  uint64_t cursor = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    const TensorInfo& t = f.tensors()[i];
    SCOPED_TRACE(samples[i].name);
    EXPECT_EQ(t.name, samples[i].name);  // file order = insertion order
    EXPECT_EQ(t.dtype, samples[i].dtype);
    EXPECT_EQ(t.shape, samples[i].shape);
    EXPECT_EQ(t.begin, cursor);
    cursor = t.end;
    EXPECT_EQ(read_tensor(f, t), samples[i].bytes);
    EXPECT_EQ(&f.at(t.name), &t);
  }
  EXPECT_EQ(f.at("scalar").numel(), 1);
  EXPECT_EQ(f.at("scalar").nbytes(), 4u);
  EXPECT_EQ(f.at("empty3d").nbytes(), 0u);
  EXPECT_EQ(f.data_offset() + cursor, f.file_size());
  EXPECT_EQ((f.data_offset()) % 8, 0u);  // header padded to 8
  ASSERT_EQ(f.metadata().size(), 2u);
  EXPECT_EQ(f.metadata().at("format"), "np");
  EXPECT_EQ(f.metadata().at("note"), "\xc3\xbcnicode \"quoted\" \\ new\nline\ttab \x01");
  // The header is compact JSON with "__metadata__" first, as the official writer emits it.
  const std::string image = read_file(path);
  const std::string head =
      R"({"__metadata__":{"format":"np","note":"ünicode \"quoted\" \\ new\nline\ttab \u0001"},"f64":{)";
  EXPECT_EQ(image.substr(8, head.size()), head);
}

TEST(SafetensorsRoundTrip, GoldenBytesOfTheOfficialWriter) {
  // Vectors from huggingface/safetensors' tensor.rs tests (test_serialization, test_empty,
  // test_serialization_forced_alignement).
  std::string six_floats;
  for (float v : {0.f, 1.f, 2.f, 3.f, 4.f, 5.f}) append<float>(six_floats, v);
  TempDir dir;
  auto write = [&](const std::string& name, std::vector<int64_t> shape, bool meta) {
    SafetensorsWriter w(dir.file("g.safetensors"));
    if (meta) w.set_metadata("framework", "pt");
    if (!name.empty()) w.add(name, StDtype::F32, std::move(shape), six_floats.data());
    w.commit();
    return read_file(dir.file("g.safetensors"));
  };
  EXPECT_EQ(write("attn.0", {1, 2, 3}, false),
            length_prefix(64) + R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})" + six_floats);
  EXPECT_EQ(write("attn0", {1, 1, 2, 3}, false),
            length_prefix(72) + R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}})" +
                std::string(7, ' ') + six_floats);
  EXPECT_EQ(write("", {}, false), length_prefix(8) + "{}      ");
  EXPECT_EQ(write("", {}, true), length_prefix(40) + R"({"__metadata__":{"framework":"pt"}})" + "     ");
}

TEST(SafetensorsRoundTrip, StreamingProducerInSmallAndLargeChunks) {
  TempDir dir;
  const std::string path = dir.file("stream.safetensors");
  const size_t n = 3 * 1024 * 1024 + 5;  // crosses the 1 MiB write buffer several ways
  std::string expect(n, '\0');
  for (size_t i = 0; i < n; ++i) expect[i] = static_cast<char>((i * 131) ^ (i >> 9));
  SafetensorsWriter w(path);
  w.add("small", StDtype::U8, {3}, "abc");
  w.add_streamed("big", StDtype::U8, {static_cast<int64_t>(n)}, [&](const SafetensorsWriter::ChunkSink& sink) {
    size_t at = 0;
    for (; at < 1000; at += 7) sink(expect.data() + at, 7);  // tiny chunks
    sink(expect.data() + at, 0);                             // empty chunks are fine
    sink(expect.data() + at, 2 * 1024 * 1024);               // bypasses the buffer
    at += 2 * 1024 * 1024;
    sink(expect.data() + at, n - at);
  });
  w.add("after", StDtype::I16, {2}, "\x01\x00\x02\x00");
  w.commit();
  const SafetensorsFile f(path);
  EXPECT_EQ(read_tensor(f, f.at("small")), "abc");
  EXPECT_EQ(read_tensor(f, f.at("big")), expect);
  EXPECT_EQ(read_tensor(f, f.at("after")), std::string("\x01\x00\x02\x00", 4));
}

TEST(SafetensorsRoundTrip, ProducerByteCountIsEnforced) {
  TempDir dir;
  const std::string path = dir.file("p.safetensors");
  for (size_t give : {3, 5}) {
    SafetensorsWriter w(path);
    w.add_streamed("t", StDtype::U8, {4}, [give](const SafetensorsWriter::ChunkSink& sink) { sink("12345", give); });
    const std::string msg = io_error_of([&] { w.commit(); });
    EXPECT_CONTAINS(msg, path + ": the producer of tensor 't' wrote");
    EXPECT_TRUE(dir.entries().empty()) << "temp file left behind";
  }
}

TEST(SafetensorsRoundTrip, WriterRejectsBadTensors) {
  SafetensorsWriter w("/nonexistent/x.safetensors");
  w.add("a", StDtype::F32, {1}, "abcd");
  EXPECT_CONTAINS(io_error_of([&] { w.add("a", StDtype::F32, {1}, "abcd"); }), "tensor 'a': added twice");
  EXPECT_CONTAINS(io_error_of([&] { w.add("n", StDtype::F32, {2, -1}, "abcd"); }), "negative dimension -1");
  EXPECT_CONTAINS(io_error_of([&] { w.add("__metadata__", StDtype::U8, {0}, nullptr); }), "reserved");
  EXPECT_CONTAINS(io_error_of([&] { w.add("\xff", StDtype::U8, {0}, nullptr); }), "not valid UTF-8");
  EXPECT_CONTAINS(io_error_of([&] { w.add("z", StDtype::U8, {2}, nullptr); }), "null data pointer for 2 bytes");
  EXPECT_CONTAINS(io_error_of([&] { w.add("o", StDtype::U8, {1LL << 40, 1LL << 40}, "x"); }), "overflows 64 bits");
  EXPECT_CONTAINS(io_error_of([&] { w.set_metadata("k", "\xc3"); }), "not valid UTF-8");
  w.add("e", StDtype::U8, {0}, nullptr);  // empty tensors need no data
  EXPECT_EQ(w.layout().size(), 2u);
}

TEST(SafetensorsReader, RangeReads) {
  TempDir dir;
  const std::string path = dir.file("r.safetensors");
  const Sample s = make_sample("w", StDtype::F32, {4, 5});
  SafetensorsWriter w(path);
  w.add("pad", StDtype::U8, {3}, "xyz");  // puts "w" at an odd absolute offset
  w.add(s.name, s.dtype, s.shape, s.bytes.data());
  w.commit();
  const SafetensorsFile f(path);
  const TensorInfo& t = f.at("w");
  std::string row(20, '\0');
  f.read_range(t, 2 * 20, row.data(), row.size());  // row 2 of [4, 5] F32
  EXPECT_EQ(row, s.bytes.substr(40, 20));
  f.read_range(t, t.nbytes(), row.data(), 0);  // empty range at the end is fine
  EXPECT_CONTAINS(io_error_of([&] { f.read_range(t, 60, row.data(), 21); }), "byte range [60, +21) is outside tensor 'w' (80 bytes)");
  EXPECT_CONTAINS(io_error_of([&] { f.read_range(t, UINT64_MAX, row.data(), 2); }), "is outside tensor 'w'");
  EXPECT_CONTAINS(io_error_of([&] { f.read(t, row.data(), row.size()); }), "holds 80 bytes but the destination buffer has 20");
  EXPECT_CONTAINS(io_error_of([&] { f.at("nope"); }), path + ": no tensor named 'nope' (the file holds 2 tensors)");
  EXPECT_EQ(f.find("nope"), nullptr);
  TensorInfo forged = t;
  forged.begin = 1'000'000;
  forged.end = 1'000'080;
  EXPECT_CONTAINS(io_error_of([&] { f.read(forged, row.data(), 80); }), "offsets do not belong to this file");
}

TEST(SafetensorsReader, EveryTruncationIsAnIoError) {
  TempDir dir;
  const std::string path = dir.file("t.safetensors");
  SafetensorsWriter w(path);
  const std::vector<Sample> samples = numpy_samples();  // the bytes must outlive commit()
  for (const Sample& s : samples) w.add(s.name, s.dtype, s.shape, s.bytes.data());
  w.set_metadata("k", "v");
  w.commit();
  const std::string image = read_file(path);
  const std::string cut = dir.file("cut.safetensors");
  write_file(cut, image);
  for (size_t len = image.size(); len-- > 0;) {  // every proper prefix, longest first
    ASSERT_EQ(::truncate(cut.c_str(), static_cast<off_t>(len)), 0);
    const std::string msg = io_error_of([&] { SafetensorsFile f(cut); });
    EXPECT_CONTAINS(msg, cut + ": ") << "length " << len;
  }
  write_file(cut, image + "x");
  EXPECT_CONTAINS(io_error_of([&] { SafetensorsFile f(cut); }), "trailing bytes belong to no tensor");
}

TEST(SafetensorsReader, FileShrunkAfterOpen) {
  TempDir dir;
  const std::string path = dir.file("s.safetensors");
  const std::string data(64, 'q');
  SafetensorsWriter w(path);
  w.add("t", StDtype::U8, {64}, data.data());
  w.commit();
  const SafetensorsFile f(path);
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(f.file_size() - 10)), 0);
  std::string buf(64, '\0');
  EXPECT_CONTAINS(io_error_of([&] { f.read(f.at("t"), buf.data(), buf.size()); }), "unexpected end of file at offset");
}

TEST(SafetensorsReader, OpenErrors) {
  TempDir dir;
  EXPECT_CONTAINS(io_error_of([&] { SafetensorsFile f(dir.file("missing.safetensors")); }),
                  dir.file("missing.safetensors") + ": open failed: No such file or directory");
  EXPECT_CONTAINS(io_error_of([&] { SafetensorsFile f(dir.path()); }), dir.path() + ": not a regular file");
  // A sparse 200 MB file claiming a 150 MB header: refused from the prefix alone.
  const std::string big = dir.file("big.safetensors");
  write_file(big, length_prefix(150'000'000));
  ASSERT_EQ(::truncate(big.c_str(), 200'000'000), 0);
  EXPECT_CONTAINS(io_error_of([&] { SafetensorsFile f(big); }), "header length 150000000 exceeds the 100000000-byte limit");
  write_file(big, length_prefix(4096) + "{}");
  EXPECT_CONTAINS(io_error_of([&] { SafetensorsFile f(big); }), "header length 4096 exceeds the file size 10");
}

}  // namespace
}  // namespace ds::test
