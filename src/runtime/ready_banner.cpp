#include "runtime/ready_banner.h"

#include "comm/comm.h"
#include "runtime/engine_builder.h"
#include "util/logging.h"

namespace ds {

void log_engine_ready(const EngineParts& p) {
  const Config& c = *p.config;
  // The batch's last factor is the data-parallel world (the world when no pipeline, tensor or
  // sequence parallelism divides it).
  const bool dp_is_world = c.data_parallel_size == p.topology->world_size();
  log::info("engine ready (rank {} of {}, {} backend, ZeRO stage {}): {} trainable parameters in {} group(s) on {}; "
            "batch {} = micro {} x GAS {} x {} {}",
            p.topology->rank(), p.topology->world_size(), comm::to_string(p.topology->world().backend()), p.zero.stage,
            p.states->numel(), p.states->num_groups(), p.device.str(), c.train_batch_size,
            c.train_micro_batch_size_per_gpu, c.gradient_accumulation_steps, dp_is_world ? "world" : "data-parallel world",
            c.data_parallel_size);
  log::info("{}", p.dtypes.table());
  for (const auto& line : p.zero.describe()) log::info("{}", line);
}

}  // namespace ds
