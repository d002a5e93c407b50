// Checkpoint checksums (format/checksums.h): the writer's CRCs equal CRC-32C of the bytes on disk;
// a reader given them reads whole tensors and any byte range correctly and catches a flipped bit in
// exactly the chunks a read touches, in the header, or a file of another size or another save; the
// manifest carries them through JSON and rejects incomplete or malformed entries; a manifest without
// them (an older checkpoint) still loads.
#include <algorithm>
#include <functional>
#include <numeric>

#include "checkpoint/manifest.h"
#include "checkpoint_test_util.h"
#include "util/crc32c.h"

namespace ds::test {
namespace {

using format::FileChecksums;
using format::kChecksumChunkBytes;
using format::SafetensorsFile;
using format::SafetensorsWriter;
using format::StDtype;

// "big": 2.5 chunks of floats (three chunk CRCs), "small": 3 floats, "empty": none.
struct Sample {
  std::vector<float> big = std::vector<float>(kChecksumChunkBytes * 5 / 2 / sizeof(float));
  std::vector<float> small{1.f, 2.f, 3.f};
  FileChecksums sums;
  std::string path;

  explicit Sample(const TempDir& dir) : path(dir.file("rank.safetensors")) {
    std::iota(big.begin(), big.end(), 0.f);
    SafetensorsWriter w(path);
    w.set_metadata("format", "test");
    w.add("small", StDtype::F32, {3}, small.data());
    w.add_streamed("big", StDtype::F32, {int64_t(big.size())}, [&](const SafetensorsWriter::ChunkSink& sink) {
      for (size_t at = 0; at < big.size(); at += 1000)  // pieces that do not line up with the chunks
        sink(big.data() + at, std::min<size_t>(1000, big.size() - at) * sizeof(float));
    });
    w.add("empty", StDtype::F32, {0}, nullptr);
    w.commit();
    sums = w.checksums();
  }
};

void flip_bit(const std::string& path, uint64_t offset) {
  std::string bytes = read_file(path);
  bytes[offset] = static_cast<char>(bytes[offset] ^ 0x10);
  write_file(path, bytes);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const IoError& e) {
    return e.what();
  }
  return "";
}

TEST(Checksums, WriterRecordsTheCrcOfTheBytesOnDisk) {
  TempDir dir;
  Sample s(dir);
  const std::string bytes = read_file(s.path);
  SafetensorsFile f(s.path);
  EXPECT_EQ(s.sums.size, bytes.size());
  EXPECT_EQ(s.sums.header, crc32c(bytes.data(), f.data_offset()));
  ASSERT_EQ(s.sums.tensors.size(), 3u);
  const auto& big = f.at("big");
  const auto& crcs = s.sums.tensors.at("big");
  ASSERT_EQ(crcs.size(), 3u);
  for (uint64_t c = 0; c < 3; ++c) {
    const uint64_t lo = c * kChecksumChunkBytes, hi = std::min(lo + kChecksumChunkBytes, big.nbytes());
    EXPECT_EQ(crcs[c], crc32c(bytes.data() + f.data_offset() + big.begin + lo, hi - lo)) << "chunk " << c;
  }
  EXPECT_EQ(s.sums.tensors.at("small"), std::vector<uint32_t>{crc32c(s.small.data(), 12)});
  EXPECT_TRUE(s.sums.tensors.at("empty").empty());
}

TEST(Checksums, VerifiedReadsOfWholeTensorsAndAnyRange) {
  TempDir dir;
  Sample s(dir);
  SafetensorsFile f(s.path, &s.sums);
  EXPECT_TRUE(f.verified());
  std::vector<float> all(s.big.size());
  f.read(f.at("big"), all.data(), all.size() * sizeof(float));
  EXPECT_EQ(all, s.big);
  // Ranges inside one chunk, across one and two boundaries, up to the end, and single elements.
  const size_t per_chunk = kChecksumChunkBytes / sizeof(float);
  for (auto [lo, n] : std::vector<std::pair<size_t, size_t>>{{0, 1}, {5, 100}, {per_chunk - 3, 6}, {per_chunk, per_chunk},
                                                             {7, 2 * per_chunk}, {per_chunk + 1, s.big.size() - per_chunk - 1},
                                                             {s.big.size() - 1, 1}}) {
    std::vector<float> part(n);
    f.read_range(f.at("big"), lo * sizeof(float), part.data(), n * sizeof(float));
    EXPECT_TRUE(std::equal(part.begin(), part.end(), s.big.begin() + long(lo))) << "range " << lo << " +" << n;
  }
}

TEST(Checksums, AFlippedBitFailsExactlyTheReadsThatTouchItsChunk) {
  TempDir dir;
  Sample s(dir);
  uint64_t big_begin = 0, data_offset = 0;
  {
    SafetensorsFile f(s.path);
    big_begin = f.at("big").begin;
    data_offset = f.data_offset();
  }
  flip_bit(s.path, data_offset + big_begin + kChecksumChunkBytes + 17);  // in chunk 1 of "big"
  SafetensorsFile f(s.path, &s.sums);
  std::vector<float> buf(s.big.size());
  const std::string whole = error_of([&] { f.read(f.at("big"), buf.data(), buf.size() * sizeof(float)); });
  EXPECT_CONTAINS(whole, s.path + ": checksum mismatch in tensor 'big', bytes [1048576, 2097152) of its data");
  EXPECT_CONTAINS(whole, "expected crc32c " + format::crc_hex(s.sums.tensors.at("big")[1]) + ", actual ");
  EXPECT_CONTAINS(whole, "corrupted");
  // A read of chunk 0 only, or of chunk 2 only, does not touch the damage; one that overlaps chunk 1 by
  // a single element does (its whole chunk is verified).
  EXPECT_EQ(error_of([&] { f.read_range(f.at("big"), 0, buf.data(), kChecksumChunkBytes); }), "");
  EXPECT_EQ(error_of([&] { f.read_range(f.at("big"), 2 * kChecksumChunkBytes, buf.data(), 4); }), "");
  EXPECT_CONTAINS(error_of([&] { f.read_range(f.at("big"), kChecksumChunkBytes - 4, buf.data(), 8); }),
                  "checksum mismatch in tensor 'big'");
  // Without checksums the damage reads as data: what used to happen.
  SafetensorsFile unverified(s.path);
  EXPECT_EQ(error_of([&] { unverified.read(unverified.at("big"), buf.data(), buf.size() * sizeof(float)); }), "");
  EXPECT_NE(buf, s.big);
}

TEST(Checksums, HeaderSizeAndAnotherSaveAreCaughtAtOpen) {
  TempDir dir;
  Sample s(dir);
  const std::string good = read_file(s.path);
  // The header's metadata value "test" -> "tesu": still a valid header, but not the one written.
  std::string image = good;
  const size_t at = image.find("\"test\"");
  ASSERT_NE(at, std::string::npos);
  image[at + 4] = 'u';
  write_file(s.path, image);
  EXPECT_CONTAINS(error_of([&] { SafetensorsFile f(s.path, &s.sums); }), s.path + ": checksum mismatch in the header");
  write_file(s.path, good + "x");
  EXPECT_CONTAINS(error_of([&] { SafetensorsFile f(s.path, &s.sums); }),
                  "the file has " + std::to_string(good.size() + 1) + " bytes but the checkpoint manifest recorded " +
                      std::to_string(good.size()));
  write_file(s.path, good);
  FileChecksums other = s.sums;
  other.tensors.erase("small");
  other.tensors["renamed"] = {};
  EXPECT_CONTAINS(error_of([&] { SafetensorsFile f(s.path, &other); }), "no checksums of tensor 'small'");
  other = s.sums;
  other.tensors["big"].pop_back();
  EXPECT_CONTAINS(error_of([&] { SafetensorsFile f(s.path, &other); }), "another save of this file");
  EXPECT_EQ(error_of([&] { SafetensorsFile f(s.path, &s.sums); }), "");
}

checkpoint::Manifest two_rank_manifest() {
  checkpoint::Manifest m;
  m.tag = "t";
  m.dp_world_size = 2;
  m.rank_files = {"r0.safetensors", "r1.safetensors"};
  m.model_file = "model.safetensors";
  m.states = {"fp32"};
  m.params.push_back({"w", {4}, "F32", {{0, 0, 2}, {1, 2, 2}}});
  FileChecksums c;
  c.size = 100;
  c.header = 0xE3069283u;
  c.tensors["fp32/w@0"] = {0x01020304u};
  for (const auto& f : {"r0.safetensors", "r1.safetensors", "model.safetensors"}) m.checksums[f] = c;
  return m;
}

TEST(Checksums, ManifestRoundTripAndValidation) {
  const checkpoint::Manifest m = two_rank_manifest();
  const auto j = checkpoint::to_json(m);
  EXPECT_EQ(j["checksums"]["algorithm"], "crc32c");
  EXPECT_EQ(j["checksums"]["files"]["r1.safetensors"]["tensors"]["fp32/w@0"][0], "01020304");
  const auto back = checkpoint::manifest_from_json(j, "m.json");
  ASSERT_EQ(back.checksums.size(), 3u);
  EXPECT_EQ(back.checksums.at("r0.safetensors").header, 0xE3069283u);
  EXPECT_EQ(back.checksums.at("model.safetensors").tensors.at("fp32/w@0"), std::vector<uint32_t>{0x01020304u});
  EXPECT_EQ(back.checksums.at("r1.safetensors").size, 100u);

  auto broken = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json k = j;
    edit(k);
    return error_of([&] { checkpoint::manifest_from_json(k, "m.json"); });
  };
  EXPECT_CONTAINS(broken([](auto& k) { k["checksums"]["files"].erase("r1.safetensors"); }), "no checksums for r1.safetensors");
  EXPECT_CONTAINS(broken([](auto& k) { k["checksums"]["files"]["extra.bin"] = k["checksums"]["files"]["r0.safetensors"]; }),
                  "not part of the checkpoint");
  EXPECT_CONTAINS(broken([](auto& k) { k["checksums"]["algorithm"] = "md5"; }), "checksum algorithm \"md5\"");
  EXPECT_CONTAINS(broken([](auto& k) { k["checksums"]["files"]["r0.safetensors"]["header"] = "e30692"; }), "8 hex digits");
  EXPECT_CONTAINS(broken([](auto& k) { k["checksums"]["files"]["r0.safetensors"]["size"] = -1; }), "\"size\"");
  EXPECT_CONTAINS(broken([](auto& k) { k["checksums"]["files"]["r0.safetensors"]["tensors"]["fp32/w@0"] = 7; }),
                  "not an array");

  // An older manifest: no "checksums" at all loads, with none.
  nlohmann::json old = j;
  old.erase("checksums");
  EXPECT_TRUE(checkpoint::manifest_from_json(old, "m.json").checksums.empty());
  EXPECT_FALSE(checkpoint::to_json(checkpoint::manifest_from_json(old, "m.json")).contains("checksums"));
}

}  // namespace
}  // namespace ds::test
