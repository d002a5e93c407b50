// ds-train --model-dir DIR --data FILE.jsonl: fine-tuning a Hugging Face causal LM on JSON-lines
// records (src/data/sft_*: record shapes, -100 on prompts, packing or padding, the sharded sampler).
#pragma once

#include "train_options.h"

namespace ds::tools {

// Runs the whole fine-tuning job; returns the process exit code. Throws ds::Error on bad input.
int run_sft(const TrainOptions& opt);

}  // namespace ds::tools
