#include "train_sft.h"

#include <deepspeed/deepspeed.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <type_traits>

#include "data/distributed_sampler.h"
#include "data/sft_batching.h"
#include "data/sft_dataset.h"
#include "models/pretrained.h"
#include "train_checks.h"
#include "train_resume.h"
#include "train_shards.h"
#include "util/error.h"
#include "util/progress.h"
#include "util/stop_signal.h"
#include "util/system_info.h"

namespace ds::tools {
namespace {

torch::Tensor as_tensor(const std::vector<int64_t>& v, const data::TokenRows& r) {
  return torch::tensor(v, torch::kLong).view({r.rows, r.seq});
}

// The model's context length from its config.json (GPT-2 spells it n_positions).
int64_t max_positions(const nlohmann::json& hf) {
  for (const char* key : {"max_position_embeddings", "n_positions"})
    if (hf.contains(key) && hf[key].is_number_integer()) return hf[key].get<int64_t>();
  return 1024;
}

// What the training loop reads, built before the engine.
struct SftRun {
  const TrainOptions& opt;
  const nlohmann::json& hf;
  const data::SftDataset& ds;
  const std::vector<std::vector<int64_t>>& items;
  int64_t seq = 0;
  int32_t pad_id = 0;
  bool drop_last = false;
};

// The training loop over either engine: the plain one runs each micro-batch's forward, backward and
// step; the pipeline's train_batch pulls the step's micro-batches (its first stage reads the inputs,
// its last the targets) and returns the loss already averaged over the data-parallel replicas.
template <class E>
int train_sft(E& engine, models::CausalLM& model, const SftRun& r) {
  constexpr bool kPipeline = std::is_same_v<E, PipelineEngine>;
  const TrainOptions& opt = r.opt;
  const int64_t micro = engine.train_micro_batch_size_per_gpu(), gas = engine.gradient_accumulation_steps();
  const int rank = engine.rank();
  // Shards go by data-parallel rank: the ranks of a tensor- or sequence-parallel group, and of a
  // pipeline, share one.
  const int world = engine.topology().data().size(), dp_rank = engine.topology().data().rank();
  data::SampledBatches batches(
      data::DistributedSampler(static_cast<int64_t>(r.items.size()), {.world_size = world, .rank = dp_rank, .seed = opt.seed}),
      micro, r.drop_last);
  // Pipeline stages exchange activations of one shape: every row is padded to the full length.
  const int64_t row_len = opt.pack || kPipeline ? r.seq : 0;
  if (rank == 0) {
    std::printf("model: %s\ndata: %s\nrows: %zu %s %lld tokens; %lld micro-batches per epoch per rank "
                "(micro %lld x GAS %lld x %d data-parallel ranks)\n",
                model.describe().c_str(), r.ds.describe().c_str(), r.items.size(),
                opt.pack ? "packed rows of"
                         : (kPipeline ? "padded rows (to the full length: pipeline stages) of"
                                      : "padded rows (to the longest of each micro-batch) of at most"),
                static_cast<long long>(r.seq), static_cast<long long>(batches.batches_per_epoch()),
                static_cast<long long>(micro), static_cast<long long>(gas), world);
    std::fflush(stdout);
  }
  if (world > 1) {
    const std::string shards = describe_shards(batches, static_cast<int64_t>(r.items.size()), engine.topology().data());
    if (rank == 0) std::printf("%s\n", shards.c_str());
    std::fflush(stdout);
  }
  // The loss of the global batch: each rank's mean over its micro-batches, averaged over the
  // data-parallel ranks (as ds-train reports it for the built-in GPT-2).
  auto global_loss = [&] {
    double loss = engine.last_loss();
    if (world > 1) {
      engine.topology().data().all_reduce(comm::Buffer(&loss, 1), comm::ReduceOp::Sum, "ds_train_loss");
      loss /= world;
    }
    return loss;
  };

  // The folder's config.json travels in the checkpoint, so ds-zero-to-fp32 writes it beside the weights.
  const nlohmann::json client_state = {
      {"model", {{"type", model.model_type()}, {"dir", opt.model_dir}, {"config", r.hf}}}, {"seed", opt.seed}};
  const std::optional<int64_t> resumed = resume_training(engine, opt);
  if (!resumed) return 0;
  const int64_t first_step = *resumed;
  ProgressReporter progress({opt.steps, rank == 0 ? opt.progress : ProgressMode::Off,
                             std::max<int64_t>(1, opt.steps / 20), stdout});
  double first_loss = 0.0, last_loss = 0.0, tokens = 0.0;
  const auto t_start = std::chrono::steady_clock::now();
  int64_t step = first_step;
  for (; step < opt.steps && !engine.stop_requested(); ++step) {
    // Micro-batch k of this rank's shard, counted from the start of training: a resumed run
    // continues where the checkpointed one stopped.
    // curriculum_learning (seqlen): every per-token row is cut to the step's length alike (a packed
    // row's documents and positions included), as Megatron-DeepSpeed cuts its tokens and labels.
    const std::optional<int64_t> seqlen = engine.curriculum_seqlen();
    auto rows_of = [&](int64_t m) {
      const auto rows = data::build_rows(r.ds.examples, r.items, batches.batch(step * gas + m), row_len, r.pad_id);
      tokens += static_cast<double>(rows.rows * std::min<int64_t>(rows.seq, seqlen.value_or(rows.seq)));
      return rows;
    };
    auto cut = [&](const torch::Tensor& t) { return seqlen ? truncate_to_seqlen(t, *seqlen) : t; };
    if constexpr (kPipeline) {
      int64_t m = 0;
      last_loss = engine.train_batch([&] {
        const auto rows = rows_of(m++);
        PipeBatch batch{cut(as_tensor(rows.input_ids, rows)), cut(as_tensor(rows.targets, rows)), {}};
        if (opt.pack)  // every stage's layers need the documents' layout: it travels with the activations
          batch.side = {cut(as_tensor(rows.segment_ids, rows)), cut(as_tensor(rows.position_ids, rows))};
        return batch;
      });
    } else {
      for (int64_t m = 0; m < gas; ++m) {
        const auto rows = rows_of(m);
        if (opt.pack)
          model.set_sequence_layout(models::SequenceLayout::from_segments(cut(as_tensor(rows.segment_ids, rows)),
                                                                          cut(as_tensor(rows.position_ids, rows))));
        auto loss = engine.forward(cut(as_tensor(rows.input_ids, rows)), cut(as_tensor(rows.targets, rows)));
        engine.backward(loss);
        engine.step();
      }
      last_loss = global_loss();
    }
    if (step == first_step) first_loss = last_loss;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    auto lr = engine.get_lr();
    progress.update({step + 1, last_loss, lr.empty() ? 0.0 : lr[0], tokens / std::max(secs, 1e-9),
                     current_rss_bytes()});
    if (!opt.save_dir.empty() && opt.save_interval > 0 && (step + 1) % opt.save_interval == 0 && step + 1 < opt.steps)
      engine.save_checkpoint(opt.save_dir, "", client_state);
  }
  progress.finish();
  if (!opt.save_dir.empty() && engine.global_steps() > first_step) {
    const std::string where = engine.save_checkpoint(opt.save_dir, "", client_state);
    if (rank == 0) std::printf("saved %s\n", where.c_str());
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  if (rank == 0)
    std::printf("done: %lld steps in %s, loss %.4f -> %.4f, %.0f tokens/s (rank 0, padding included), peak RSS %s\n",
                static_cast<long long>(step - first_step), format_duration(total).c_str(), first_loss,
                last_loss, tokens / std::max(total, 1e-9), format_bytes(peak_rss_bytes()).c_str());
  std::fflush(stdout);
  if (step < opt.steps) return opt.save_dir.empty() ? 128 + engine.stop_signal() : 0;  // stopped by a signal
  return 0;
}

void check_takes_packed_rows(const models::CausalLM& model, const TrainOptions& opt) {
  if (opt.pack && !model.supports_sequence_layout())
    throw NotSupported(model.model_type() + " (" + opt.model_dir + ") cannot take packed rows (positions and attention per document); use --pad");
}

}  // namespace

int run_sft(const TrainOptions& opt) {
  // Cheap checks first: the folder's config, the row length, the tokenizer, the data, --save.
  const nlohmann::json hf = models::read_hf_config(opt.model_dir);
  const int64_t limit = max_positions(hf);
  const int64_t seq = opt.max_seq_len ? opt.max_seq_len : std::min<int64_t>(limit, 1024);
  if (seq > limit)
    throw ConfigError("--max-seq-len", fmt::format("{} exceeds the model's {} positions ({}/config.json); use at most {}",
                                                   seq, limit, opt.model_dir, limit));
  Config config = load_train_config(opt, comm::launcher_world_size());
  const bool pipeline = config.parallel_sizes.pipeline_stages > 1;
  auto tok = data::load_tokenizer(opt.model_dir);
  data::SftReadOptions read{.max_tokens = static_cast<size_t>(seq), .skip_bad_lines = opt.skip_bad_lines};
  const data::SftDataset ds = data::read_sft_jsonl(opt.data_path, *tok, read);
  const int64_t vocab = hf.value("vocab_size", int64_t{0});
  for (const auto& ex : ds.examples)
    for (int32_t id : ex.ids)
      if (id >= vocab)
        throw ConfigError(opt.data_path, fmt::format("token id {} from {}'s tokenizer is outside the model's vocab_size {}",
                                                     id, opt.model_dir, vocab));
  const auto items = opt.pack ? data::pack_examples(ds.examples, seq) : data::one_per_row(ds.examples);
  check_save_dir(opt.save_dir);
  const int32_t pad_id = tok->special_id(tok->special_tokens().pad).value_or(
      tok->special_id(tok->special_tokens().eos).value_or(0));
  const SftRun run{opt, hf, ds, items, seq, pad_id, config.dataloader_drop_last};

  install_stop_signal_handlers();
  torch::manual_seed(opt.seed);
  if (pipeline) {
    // Each rank reads only its stage's layers from the folder (nn::LayerSelection).
    auto built = std::make_shared<std::shared_ptr<models::CausalLM>>();
    auto build = [&opt, built](const nn::LayerSelection& selection) {
      *built = models::from_pretrained(opt.model_dir, {.selection = selection});
      return parallel::BuiltModel{*built, &(*built)->layers()};
    };
    auto loss = [built](const torch::Tensor& logits, const torch::Tensor& targets) { return (*built)->loss(logits, targets); };
    // A packed micro-batch's segment and position ids (PipeBatch::side) become the stage's layout.
    auto use_side = [built](const std::vector<torch::Tensor>& side) {
      if (!side.empty()) (*built)->set_sequence_layout(models::SequenceLayout::from_segments(side.at(0), side.at(1)));
    };
    auto engine = initialize_pipeline(build, std::move(config), {"parameters", loss, use_side});
    check_takes_packed_rows(**built, opt);
    return train_sft(engine, **built, run);
  }
  std::shared_ptr<models::CausalLM> model = models::from_pretrained(opt.model_dir);
  check_takes_packed_rows(*model, opt);
  auto engine = initialize(model, std::move(config));
  return train_sft(engine, *model, run);
}

}  // namespace ds::tools
