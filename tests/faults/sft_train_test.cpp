// ds-train --model-dir DIR --data FILE.jsonl end to end (docs/fine-tuning-data.md): a tiny Llama and
// the toy byte-level tokenizer written here, trained on examples/fine_tuning/train.jsonl (all three
// record shapes) packed and padded — the loss falls; bad input stops before training, naming it.
#include <gtest/gtest.h>

#include "sft_tool_util.h"

namespace ds::faults {
namespace {

TEST(SftTrain, PackedAndPaddedLossFalls) {
  TempDir dir("sft");
  const std::string model = write_model(dir, tiny_llama());
  const std::string data = source_path("examples/fine_tuning/train.jsonl");
  const std::string config = small_config(dir);
  for (const std::string mode : {"--pack", "--pad"}) {
    const auto r = run(sft_train(model, "--data " + data + " --max-seq-len 128 --config " + config + " " + mode));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::printf("%s", r.output.c_str());  // the figures, for the log
    EXPECT_NE(r.output.find("38 examples (text 8, prompt/completion 12, messages 18)"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(mode == "--pack" ? "packed rows" : "padded rows"), std::string::npos) << r.output;
    auto [first, last] = losses(r.output);
    EXPECT_GT(first, 4.0) << r.output;        // about ln(272) untrained
    EXPECT_LT(last, 0.85 * first) << r.output;  // and it learns (5.62 -> 3.80 measured)
  }
}

// Two ranks under mpirun: each trains its own half of the 38 padded rows (the shards line counts
// them across the ranks), the reported loss is the global batch's, and it falls.
TEST(SftTrain, TwoRanksTrainDisjointShardsAndTheLossFalls) {
  TempDir dir("sft_np2");
  const std::string model = write_model(dir, tiny_llama());
  const auto r = run("DS_COMM_TIMEOUT_S=120 " + mpirun(2) + " " +
                     sft_train(model, "--data " + source_path("examples/fine_tuning/train.jsonl") +
                                          " --pad --max-seq-len 128 --config " + small_config(dir)));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::printf("%s", r.output.c_str());
  EXPECT_NE(r.output.find("x 2 data-parallel ranks"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("shards: 2 data-parallel ranks x 19 rows per epoch; 38 of 38 rows trained, 0 on more than one rank"),
            std::string::npos) << r.output;
  auto [first, last] = losses(r.output);
  EXPECT_GT(first, 4.0) << r.output;
  EXPECT_LT(last, 0.85 * first) << r.output;
}

// Two pipeline stages (each rank reads only its stage's layers from the folder) against one process
// on the same batches: the same first and last loss, with rows padded to the full length and with
// packed rows (each micro-batch's document layout travelling with its activations). Two micro-batches
// a step are in flight at once on the stages, and checkpointed layers recompute in backward, so a
// layout must stay with its own micro-batch through both passes.
TEST(SftTrain, PipelineStagesMatchOneProcess) {
  TempDir dir("sft_pipe");
  const std::string model = write_model(dir, tiny_llama());
  const std::string config = dir.file("ds_config.json");
  write_text(config, R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2, "gradient_clipping": 1.0,
    "activation_checkpointing": {"number_checkpoints": 2},
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "betas": [0.9, 0.95], "weight_decay": 0.0}}})");
  const std::string args = "--data " + source_path("examples/fine_tuning/train.jsonl") + " --max-seq-len 128 --config " + config;
  for (const std::string mode : {"--pad", "--pack"}) {
    const auto one = run(sft_train(model, args + " " + mode));
    const auto pipe = run("DS_COMM_TIMEOUT_S=120 " + mpirun(2) + " " + sft_train(model, args + " " + mode + " --pipeline-stages 2"));
    ASSERT_EQ(one.exit_code, 0) << one.output;
    ASSERT_EQ(pipe.exit_code, 0) << pipe.output;
    std::printf("%s", pipe.output.c_str());
    EXPECT_NE(pipe.output.find(mode == "--pad" ? "padded rows (to the full length: pipeline stages) of 128 tokens"
                                               : "packed rows of 128 tokens"),
              std::string::npos)
        << pipe.output;
    const auto [first1, last1] = losses(one.output);
    const auto [first2, last2] = losses(pipe.output);
    EXPECT_GT(first1, 4.0) << one.output;
    EXPECT_LT(last1, 0.85 * first1) << one.output;
    EXPECT_NEAR(first2, first1, 2e-4) << one.output << pipe.output;
    EXPECT_NEAR(last2, last1, 2e-4) << one.output << pipe.output;
  }
}

// curriculum_learning (seqlen 32 for three steps, then the rows' 128): every per-token row of a packed
// micro-batch (ids, targets, documents, positions) is cut alike, on two pipeline stages as in one
// process; the first loss is not the uncut run's.
TEST(SftTrain, CurriculumCutsPackedRowsAlikeOnPipelineStages) {
  TempDir dir("sft_curriculum");
  const std::string model = write_model(dir, tiny_llama());
  const std::string base = R"("train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2, "gradient_clipping": 1.0,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "betas": [0.9, 0.95], "weight_decay": 0.0}})";
  const std::string plain = dir.file("plain.json"), curriculum = dir.file("curriculum.json");
  write_text(plain, "{" + base + "}");
  write_text(curriculum, "{" + base + R"(, "curriculum_learning": {"enabled": true, "curriculum_type": "seqlen",
    "min_difficulty": 32, "max_difficulty": 128, "schedule_type": "fixed_discrete",
    "schedule_config": {"difficulty": [32, 128], "max_step": [3]}}})");
  const std::string args = "--data " + source_path("examples/fine_tuning/train.jsonl") + " --max-seq-len 128 --pack --config ";
  const auto uncut = run(sft_train(model, args + plain, 5));
  const auto one = run(sft_train(model, args + curriculum, 5));
  const auto pipe = run("DS_COMM_TIMEOUT_S=120 " + mpirun(2) + " " + sft_train(model, args + curriculum + " --pipeline-stages 2", 5));
  for (const auto* r : {&uncut, &one, &pipe}) ASSERT_EQ(r->exit_code, 0) << r->output;
  const auto [first1, last1] = losses(one.output);
  const auto [first2, last2] = losses(pipe.output);
  EXPECT_NEAR(first2, first1, 2e-4) << one.output << pipe.output;
  EXPECT_NEAR(last2, last1, 2e-4) << one.output << pipe.output;
  EXPECT_GT(std::abs(first1 - losses(uncut.output).first), 1e-3) << "the first steps trained on 32 tokens\n"
                                                                  << one.output << uncut.output;
}

// The sampler is addressed by step: 4 steps, saved, resumed to 8 read the batches 8 straight steps
// read, so the last loss is the same.
TEST(SftTrain, ResumeContinuesWithTheSameBatches) {
  TempDir dir("sft_resume");
  const std::string model = write_model(dir, tiny_llama());
  const std::string args = "--data " + source_path("examples/fine_tuning/train.jsonl") + " --max-seq-len 128 --config " +
                           small_config(dir);
  const auto straight = run(sft_train(model, args, 8));
  const auto first = run(sft_train(model, args + " --save " + dir.file("ckpt"), 4));
  const auto resumed = run(sft_train(model, args + " --load " + dir.file("ckpt"), 8));
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  ASSERT_EQ(first.exit_code, 0) << first.output;
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("at global step 4"), std::string::npos) << resumed.output;
  EXPECT_EQ(losses(resumed.output).second, losses(straight.output).second) << straight.output << resumed.output;
}

TEST(SftTrain, BadInputStopsBeforeTrainingNamingIt) {
  TempDir dir("sft_bad");
  const std::string model = write_model(dir, tiny_llama());
  const std::string data = dir.file("bad.jsonl");
  write_text(data, "{\"text\": \"fine\"}\n{\"prompt\": \"p\", \"completion\": 5}\n");
  auto r = run(sft_train(model, "--data " + data));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find(data + ":2: field 'completion': must be a string"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("done:"), std::string::npos) << r.output;

  r = run(sft_train(model, "--data " + data + " --skip-bad-lines", 1));  // skipped and counted
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("1 bad lines skipped"), std::string::npos) << r.output;

  r = run(sft_train(model, "--data " + data + " --max-seq-len 129"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--max-seq-len: 129 exceeds the model's 128 positions"), std::string::npos) << r.output;
}

// GPT-2 takes packed rows too (learned positions per document, attention within each).
TEST(SftTrain, Gpt2PackedLossFalls) {
  TempDir dir("sft_gpt2");
  const std::string gpt2 = write_model(dir, {{"model_type", "gpt2"}, {"vocab_size", 272}, {"n_positions", 128},
                                             {"n_embd", 32}, {"n_layer", 2}, {"n_head", 2}});
  const auto r = run(sft_train(gpt2, "--data " + source_path("examples/fine_tuning/train.jsonl") +
                                         " --pack --max-seq-len 128 --config " + small_config(dir)));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::printf("%s", r.output.c_str());
  EXPECT_NE(r.output.find("packed rows of 128 tokens"), std::string::npos) << r.output;
  auto [first, last] = losses(r.output);
  EXPECT_GT(first, 4.0) << r.output;
  EXPECT_LT(last, 0.85 * first) << r.output;
}

}  // namespace
}  // namespace ds::faults
