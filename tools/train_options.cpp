#include "train_options.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <sstream>

#include "cli_checks.h"
#include "config/loader.h"
#include "util/error.h"

namespace ds::tools {
namespace {

// Upper bounds that keep every size product (parameter counts, activations) inside int64; the
// memory checks refuse far smaller shapes on any real machine.
constexpr int64_t kMaxLayers = 1 << 16, kMaxEmbd = 1 << 20, kMaxVocab = (1ll << 31) - 1, kMaxSeq = 1 << 24;
constexpr int64_t kMaxSteps = 1ll << 40;

}  // namespace

bool parse_train_options(int argc, char** argv, TrainOptions& o) {
  CLI::App app{"ds-train: train a GPT-2 family model on text, or fine-tune a Hugging Face folder on JSON lines "
               "(--model-dir), with deepspeed.cpp"};
  o.config_path = std::string(DS_SOURCE_DIR) + "/examples/configs/ds_train.json";
  o.data_path = std::string(DS_SOURCE_DIR) + "/data/devils_dictionary.txt";
  std::string progress = "auto";
  app.add_option("--config", o.config_path, "DeepSpeed JSON config")->capture_default_str();
  app.add_option("--data", o.data_path, "text file (byte tokens) or llm.c .bin token file")->capture_default_str();
  app.add_option("--model", o.model, "tiny | small | medium | large | xl (GPT-2 sizes)")->capture_default_str();
  app.add_option("--layers", o.layers, "override n_layer")->check(whole_number(1, kMaxLayers));
  app.add_option("--heads", o.heads, "override n_head (must divide n_embd)")->check(whole_number(1, kMaxEmbd));
  app.add_option("--embd", o.embd, "override n_embd")->check(whole_number(1, kMaxEmbd));
  app.add_option("--vocab", o.vocab, "override vocab_size")->check(whole_number(1, kMaxVocab));
  app.add_option("--seq", o.seq, "sequence length (default: the model's n_positions; a longer one raises n_positions)")
      ->check(whole_number(1, kMaxSeq));
  app.add_option("--steps", o.steps, "optimizer steps, counted from the start of training (also after --load)")
      ->capture_default_str()->check(whole_number(1, kMaxSteps));
  app.add_option("--seed", o.seed, "seed for weights and data order")->capture_default_str()
      ->check(whole_number(0, INT64_MAX));
  app.add_option("--progress", progress,
                 "auto | bar | lines | off. auto: a bar redrawn in place when stdout is an interactive terminal and this is "
                 "not an MPI rank (mpirun gives ranks a pseudo-terminal, and logs), else plain lines; bar forces the bar")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "bar", "lines", "off"}));
  app.add_option("--save", o.save_dir,
                 "save checkpoints into this directory (at the end, every --save-interval steps, and on SIGTERM/SIGINT); "
                 "created and checked writable before training");
  app.add_option("--save-interval,--save_interval", o.save_interval, "steps between checkpoints (0: only at the end)")
      ->check(whole_number(0, kMaxSteps));
  app.add_option("--pipeline-stages,--pipeline_stages", o.pipeline_stages,
                 "cut the model into this many pipeline stages (sets the config's pipeline.stages; 1F1B schedule)")
      ->check(whole_number(1, 1 << 16));
  app.add_option("--load", o.load_dir, "resume from the checkpoint named by <dir>/latest (any world size)");
  app.add_flag("--resume", o.resume,
               "continue from the --save directory's latest checkpoint when it has one, else start fresh; a checkpoint "
               "already at --steps ends the run at once (ds-run --elastic_training restarts)");
  app.add_option("--model-dir", o.model_dir,
                 "fine-tune this Hugging Face folder (config.json, safetensors, tokenizer.json) on --data JSON lines "
                 "(docs/fine-tuning-data.md)");
  bool pad = false;
  auto* pack_flag = app.add_flag("--pack", o.pack, "with --model-dir: pack examples into full rows (the default)");
  app.add_flag("--pad", pad, "with --model-dir: one example per row, padded")->excludes(pack_flag);
  app.add_option("--max-seq-len,--max_seq_len", o.max_seq_len,
                 "with --model-dir: row length in tokens; longer examples are truncated (default: the model's "
                 "max positions, at most 1024)")
      ->check(whole_number(2, kMaxSeq));
  app.add_flag("--skip-bad-lines", o.skip_bad_lines, "with --model-dir: leave out malformed JSON lines (counted) "
                                                       "instead of stopping at the first");
  bool no_progress = false;
  app.add_flag("--no_progress,--no-progress", no_progress, "same as --progress off");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    std::fputs(app.help().c_str(), stdout);
    return false;
  } catch (const CLI::ParseError& e) {
    throw Error(fmt::format("{} (see ds-train --help)", e.what()));
  }
  static const std::map<std::string, ProgressMode> modes = {
      {"auto", ProgressMode::Auto}, {"bar", ProgressMode::Bar}, {"lines", ProgressMode::Lines}, {"off", ProgressMode::Off}};
  o.progress = no_progress ? ProgressMode::Off : modes.at(progress);
  if (o.resume && o.save_dir.empty())
    throw Error("--resume continues from the --save directory's latest checkpoint: give --save DIR");
  if (!o.model_dir.empty()) {
    o.pack = !pad;
    if (app.count("--data") == 0)
      throw Error("--model-dir needs --data FILE.jsonl (lines of {\"text\"}, {\"prompt\",\"completion\"} or "
                  "{\"messages\"}; docs/fine-tuning-data.md)");
    for (const char* shape : {"--model", "--layers", "--heads", "--embd", "--vocab", "--seq"})
      if (app.count(shape)) throw Error(std::string(shape) + " shapes the built-in GPT-2; with --model-dir the shape is "
                                        "the folder's config.json (use --max-seq-len for the row length)");
  } else if (o.pack || pad || o.max_seq_len || o.skip_bad_lines) {
    throw Error("--pack, --pad, --max-seq-len and --skip-bad-lines need --model-dir DIR (fine-tuning a Hugging Face model)");
  }
  return true;
}

models::GPT2Config resolve_model(const TrainOptions& o) {
  auto c = models::GPT2Config::preset(o.model);
  if (o.layers) c.n_layer = o.layers;
  if (o.heads) c.n_head = o.heads;
  if (o.embd) c.n_embd = o.embd;
  if (o.vocab) c.vocab_size = o.vocab;
  if (o.seq) c.n_positions = std::max(c.n_positions, o.seq);
  try {
    c.validate();
  } catch (const ConfigError& e) {  // name the options, not the model's field names alone
    throw ConfigError("--model " + o.model + " with --layers/--heads/--embd/--vocab", e.what());
  }
  return c;
}

Config load_train_config(const TrainOptions& o, int world) {
  std::ifstream in(o.config_path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true);
  // Unreadable or malformed: the loader's error names the file and the place.
  if (o.pipeline_stages == 0 || !in || !j.is_object()) return load_config_file(o.config_path, world);
  j["pipeline"]["stages"] = o.pipeline_stages;
  return load_config_text(j.dump(), world, o.config_path + " with --pipeline-stages");
}

}  // namespace ds::tools
