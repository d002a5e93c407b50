// Builds the enabled writers on rank 0 and explains the ones we cannot provide.
#include "profiling/monitor_master.h"

#include "config/config.h"
#include "profiling/csv_monitor.h"
#include "profiling/jsonl_monitor.h"
#include "profiling/tensorboard_monitor.h"
#include "util/logging.h"

namespace ds {
namespace {

// Where the user's TensorBoard logs will be, or how to get some: the upload advice needs a path.
std::string tensorboard_hint(const MonitorOptions& o) {
  if (o.tensorboard.enabled) return monitor_log_dir(o.tensorboard.output_path, o.tensorboard.job_name);
  return "";
}

std::string wandb_warning(const MonitorOptions& o) {
  const std::string dir = tensorboard_hint(o);
  std::string msg =
      "wandb: enabled, but deepspeed.cpp has no Weights & Biases client (there is no C++ SDK), so "
      "nothing is sent to W&B; training continues. ";
  if (!dir.empty()) return msg + "Upload the TensorBoard logs instead: wandb sync --sync-tensorboard " + dir;
  return msg + "Enable \"tensorboard\" and upload its directory with: wandb sync --sync-tensorboard "
               "<tensorboard.output_path>/<tensorboard.job_name>";
}

std::string comet_warning(const MonitorOptions& o) {
  const std::string dir = tensorboard_hint(o);
  return "comet: enabled, but deepspeed.cpp has no Comet client (there is no C++ SDK), so nothing is "
         "sent to Comet; training continues. Log with \"tensorboard\", \"csv_monitor\" or "
         "\"jsonl_monitor\" and import those files with Comet's Python SDK" +
         (dir.empty() ? std::string(".") : " (TensorBoard logs: " + dir + ").");
}

}  // namespace

MonitorOptions monitor_options(const Config& config, int rank) {
  return MonitorOptions{config.tensorboard, config.csv_monitor, config.jsonl_monitor, config.wandb,
                        config.comet, rank};
}

MonitorMaster::MonitorMaster(const MonitorOptions& options) {
  if (options.rank != 0) return;  // DeepSpeed builds no monitor objects off rank 0
  if (options.tensorboard.enabled) monitors_.push_back(std::make_unique<TensorBoardMonitor>(options.tensorboard));
  if (options.csv_monitor.enabled) monitors_.push_back(std::make_unique<CsvMonitor>(options.csv_monitor));
  if (options.jsonl_monitor.enabled) monitors_.push_back(std::make_unique<JsonlMonitor>(options.jsonl_monitor));
  if (options.wandb.enabled) warnings_.push_back(wandb_warning(options));
  if (options.comet.enabled) warnings_.push_back(comet_warning(options));
  for (const std::string& w : warnings_) log::warn_all_ranks("{}", w);  // we are rank 0 by now
}

void MonitorMaster::write_events(const std::vector<MonitorEvent>& events) {
  for (const auto& m : monitors_) m->write_events(events);
}

}  // namespace ds
