// Issue 22, items 2 and 14 (the checkpoint side):
//   2.   a flipped bit in a rank file's data section loaded silently (loss NaN, exit 0) and ds-zero-to-fp32
//        exported it: every file now carries CRC-32C checksums in the manifest, verified on load and on
//        export (--no-verify skips them), and a checkpoint saved without them still loads;
//   14a. a sharded export into a folder holding an old model.safetensors left it there (Hugging Face
//        would load it instead of the shards), and the reverse;
//   14b. a resume whose config changes the global batch said nothing.
#include <deepspeed/deepspeed.h>

#include <nlohmann/json.hpp>

#include "format/safetensors.h"
#include "faults_test_util.h"
#include "models/gpt2.h"
#include "models/token_data.h"
#include "util/error.h"

namespace ds::faults {
namespace {

#define EXPECT_HAS(text, part) \
  EXPECT_NE((text).find(part), std::string::npos) << "wanted: " << (part) << "\noutput:\n" << (text)
#define EXPECT_LACKS(text, part) \
  EXPECT_EQ((text).find(part), std::string::npos) << "unwanted: " << (part) << "\noutput:\n" << (text)

constexpr const char* kRankFile = "zero_pp_rank_0_mp_rank_00_optim_states.safetensors";

// One tiny ds-train checkpoint (2 steps, saved at global_step2), made once and copied by tests that damage it.
const std::string& saved_checkpoint() {
  static TempDir dir("ckpt_faults_base");
  static const bool made = [] {
    const RunResult r = run(tiny_train("--steps 2 --save " + dir.file("ckpt")));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return true;
  }();
  (void)made;
  static const std::string path = dir.file("ckpt");
  return path;
}

std::string copy_checkpoint(const TempDir& into) {
  const std::string dst = into.file("ckpt");
  fs::copy(saved_checkpoint(), dst, fs::copy_options::recursive);
  return dst;
}

// Flips the exponent's top bit of the first float of the first fp32 master piece in `file`: the weight
// becomes ~1e38 times larger, which trained to NaN before checksums.
void flip_master_bit(const std::string& file) {
  uint64_t at = 0;
  {
    format::SafetensorsFile f(file);
    for (const auto& t : f.tensors())
      if (t.name.rfind("fp32/", 0) == 0 && t.nbytes() >= 4) {
        at = f.data_offset() + t.begin + 3;  // little-endian: byte 3 holds the sign and the exponent's top bits
        break;
      }
  }
  ASSERT_GT(at, 0u);
  std::string bytes = read_text(file);
  bytes[at] = static_cast<char>(bytes[at] ^ 0x40);
  write_text(file, bytes);
}

std::string export_cmd(const std::string& ckpt, const std::string& out, const std::string& flags = "") {
  return tool("ds-zero-to-fp32") + " " + ckpt + " " + out + " " + flags;
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Item 2, as a user meets it: resume and export of a checkpoint with one flipped bit.
TEST(FaultCheckpointBitFlip, ResumeAndExportRefuseAFlippedBit) {
  TempDir dir("ckpt_bitflip");
  const std::string ckpt = copy_checkpoint(dir);
  flip_master_bit(ckpt + "/global_step2/" + kRankFile);

  const RunResult resume = run(tiny_train("--steps 4 --load " + ckpt));
  EXPECT_NE(resume.exit_code, 0) << resume.output;
  EXPECT_HAS(resume.output, std::string("global_step2/") + kRankFile + ": checksum mismatch in tensor 'fp32/");
  EXPECT_HAS(resume.output, "expected crc32c ");
  EXPECT_HAS(resume.output, ", actual ");
  EXPECT_LACKS(resume.output, "done:");

  const RunResult exported = run(export_cmd(ckpt, dir.file("hf")));
  EXPECT_NE(exported.exit_code, 0) << exported.output;
  EXPECT_HAS(exported.output, std::string(kRankFile) + ": checksum mismatch in tensor 'fp32/");
  EXPECT_FALSE(fs::exists(dir.file("hf"))) << "nothing may be written from a corrupted checkpoint";

  // An existing output folder keeps what it had, and gets nothing new.
  fs::create_directories(dir.file("hf2"));
  write_text(dir.file("hf2/notes.txt"), "mine");
  EXPECT_NE(run(export_cmd(ckpt, dir.file("hf2"))).exit_code, 0);
  EXPECT_EQ(entries(dir.file("hf2")), std::vector<std::string>{"notes.txt"});

  const RunResult forced = run(export_cmd(ckpt, dir.file("hf"), "--no-verify"));
  EXPECT_EQ(forced.exit_code, 0) << forced.output;
  EXPECT_TRUE(fs::exists(dir.file("hf/model.safetensors")));
  EXPECT_HAS(forced.output, "not verified (--no-verify)");
}

// Item 2 through the API: engine.load_checkpoint throws the IoError; the intact checkpoint loads.
TEST(FaultCheckpointBitFlip, EngineLoadThrowsNamingFileTensorAndChecksums) {
  TempDir dir("ckpt_bitflip_api");
  const std::string ckpt = copy_checkpoint(dir);
  auto c = models::GPT2Config::preset("tiny");  // as tiny_train's flags make it
  c.n_layer = 2;
  c.n_embd = 32;
  c.n_head = 2;
  auto engine = initialize(models::GPT2(c), load_config_text(R"({"train_micro_batch_size_per_gpu": 16,
      "optimizer": {"type": "AdamW", "params": {"lr": 3e-3}}})", 1));
  ASSERT_TRUE(engine.load_checkpoint(ckpt).has_value());
  flip_master_bit(ckpt + "/global_step2/" + kRankFile);
  try {
    engine.load_checkpoint(ckpt);
    FAIL() << "a flipped bit loaded";
  } catch (const IoError& e) {
    const std::string msg = e.what();
    EXPECT_HAS(msg, kRankFile);
    EXPECT_HAS(msg, "checksum mismatch in tensor 'fp32/");
    EXPECT_HAS(msg, "expected crc32c");
  }
}

// Item 2: a checkpoint saved before checksums (its manifest has none) still resumes and exports, with a warning.
TEST(FaultCheckpointBitFlip, CheckpointWithoutChecksumsStillLoads) {
  TempDir dir("ckpt_nosums");
  const std::string ckpt = copy_checkpoint(dir);
  const std::string manifest = ckpt + "/global_step2/manifest.json";
  auto j = nlohmann::json::parse(read_text(manifest));
  ASSERT_TRUE(j.contains("checksums"));
  j.erase("checksums");
  write_text(manifest, j.dump(1));
  const RunResult resume = run(tiny_train("--steps 3 --load " + ckpt));
  EXPECT_EQ(resume.exit_code, 0) << resume.output;
  EXPECT_HAS(resume.output, "has no checksums (saved by an older deepspeed.cpp)");
  const RunResult exported = run(export_cmd(ckpt, dir.file("hf")));
  EXPECT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_HAS(exported.output, "not verified (the checkpoint has no checksums");
}

// Item 14a: stale model files are removed once the new export is complete, in both directions.
TEST(FaultExportStaleFile, ShardedExportRemovesAStaleSingleFileAndBack) {
  TempDir dir("export_stale");
  const std::string out = dir.file("hf");
  fs::create_directories(out);
  write_text(out + "/model.safetensors", "an old export");
  write_text(out + "/README.md", "not a model file");

  const RunResult sharded = run(export_cmd(saved_checkpoint(), out, "--max-shard-size 20KB"));
  ASSERT_EQ(sharded.exit_code, 0) << sharded.output;
  EXPECT_FALSE(fs::exists(out + "/model.safetensors")) << "Hugging Face would load the stale file, not the shards";
  EXPECT_HAS(sharded.output, "removed stale " + out + "/model.safetensors");
  EXPECT_TRUE(fs::exists(out + "/model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(out + "/README.md"));
  size_t shards = 0;
  for (const auto& name : entries(out)) shards += name.rfind("model-0", 0) == 0;
  EXPECT_GT(shards, 1u);

  const RunResult single = run(export_cmd(saved_checkpoint(), out));
  ASSERT_EQ(single.exit_code, 0) << single.output;
  EXPECT_EQ(entries(out), (std::vector<std::string>{"README.md", "config.json", "model.safetensors"}))
      << "the shards and their index of the earlier export must go";
  EXPECT_HAS(single.output, "removed stale " + out + "/model.safetensors.index.json");
  EXPECT_HAS(single.output, "removed stale " + out + "/model-00001-of-");
}

// Item 14b: a resume that changes train_batch_size says so, with both triples; one that keeps it says nothing.
TEST(FaultResumeGlobalBatch, ChangedGlobalBatchIsNamedOnResume) {
  TempDir dir("resume_batch");
  auto config = [&](int gas) {
    const std::string path = dir.file("gas" + std::to_string(gas) + ".json");
    write_text(path, R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": )" + std::to_string(gas) +
                         R"(, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}})");
    return path;
  };
  const std::string ckpt = dir.file("ckpt");
  const RunResult saved = run(tiny_train("--steps 2 --config " + config(1) + " --save " + ckpt));
  ASSERT_EQ(saved.exit_code, 0) << saved.output;

  const RunResult changed = run(tiny_train("--steps 3 --config " + config(2) + " --load " + ckpt));
  EXPECT_EQ(changed.exit_code, 0) << changed.output;
  EXPECT_HAS(changed.output, "the global batch changed");
  EXPECT_HAS(changed.output, "saved with train_batch_size 4 (micro batch 4 x gradient_accumulation_steps 1 x data-parallel world 1)");
  EXPECT_HAS(changed.output, "this run uses 8 (4 x 2 x 1)");
  EXPECT_HAS(changed.output, "learning-rate schedule");

  const RunResult same = run(tiny_train("--steps 3 --config " + config(1) + " --load " + ckpt));
  EXPECT_EQ(same.exit_code, 0) << same.output;
  EXPECT_LACKS(same.output, "global batch changed");
}

}  // namespace
}  // namespace ds::faults
