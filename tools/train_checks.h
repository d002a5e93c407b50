// What ds-train checks from its options and config before it reads the data or builds anything
// (issue 22, items 5, 8, 9): each refusal names the option or key, the numbers and the fix.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.h"
#include "models/gpt2_config.h"

namespace ds::tools {

// RAM for this machine's ranks: building the fp32 model, then per rank the model states the engine
// will hold (its own estimate at init) plus the activations of one micro-batch of `seq` tokens.
// Throws ds::OutOfMemory naming what is too big and how to shrink it.
void check_memory_budget(const models::GPT2Config& shape, const Config& config, int64_t seq);

// --save DIR: created if missing and proved writable now, not at the first save (ds::IoError).
void check_save_dir(const std::string& dir);

// --load resumed at `checkpoint_step`; --steps counts from the start of training, so it must go
// further (ds::Error otherwise: nothing to train, and negative step counts).
void check_resume_step(int64_t checkpoint_step, int64_t steps, const std::string& load_dir);

// A line suggesting bf16 when `config` trains in fp32 on a CPU that computes bf16 natively
// (`cpu_bf16`: AVX512-BF16, util/system_info.h), "" otherwise (issue 15 item 2).
std::string bf16_suggestion(const Config& config, bool cpu_bf16);

}  // namespace ds::tools
