// ds-train's command line: parsed into one options struct, checked before anything is built.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.h"
#include "models/gpt2_config.h"
#include "util/progress.h"

namespace ds::tools {

struct TrainOptions {
  std::string config_path;   // DeepSpeed JSON
  std::string data_path;     // text (byte tokens) or llm.c .bin tokens
  std::string model = "tiny";
  // 0: not given (the preset's value); the command line accepts only >= 1 (train_options.cpp).
  int64_t layers = 0, heads = 0, embd = 0, vocab = 0, seq = 0;
  int64_t steps = 1000;
  uint64_t seed = 42;
  ProgressMode progress = ProgressMode::Auto;
  bool show_memory = true;
  std::string save_dir;       // checkpoints: every save_interval steps (0: at the end only) and at the end
  int64_t save_interval = 0;
  std::string load_dir;       // resume from <load_dir>/latest; --steps counts from the start of training
  bool resume = false;        // --resume: from <save_dir>/latest when it exists (elastic restarts)
  int pipeline_stages = 0;    // --pipeline-stages: the config's pipeline.stages (0: as the config says)
  // Fine-tuning (--model-dir): a Hugging Face folder and JSON-lines data (tools/train_sft.cpp).
  std::string model_dir;
  bool pack = false;          // --pack (default) or --pad
  int64_t max_seq_len = 0;    // 0: min(the model's max positions, 1024)
  bool skip_bad_lines = false;
};

// Parses argv; returns false when --help was printed. Throws CLI errors as ds::Error.
bool parse_train_options(int argc, char** argv, TrainOptions& out);

// The model shape the options ask for (preset with overrides), validated.
models::GPT2Config resolve_model(const TrainOptions& o);

// The config file for `world` ranks, with --pipeline-stages written over its pipeline.stages (the
// batch triple is then resolved for the data-parallel world the stages leave).
Config load_train_config(const TrainOptions& o, int world);

}  // namespace ds::tools
