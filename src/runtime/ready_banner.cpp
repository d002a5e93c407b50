#include "runtime/ready_banner.h"

#include "comm/comm.h"
#include "runtime/engine_builder.h"
#include "util/logging.h"

namespace ds {

void log_engine_ready(const EngineParts& p) {
  const Config& c = *p.config;
  log::info("engine ready (rank {} of {}, {} backend, ZeRO stage {}): {} trainable parameters in {} group(s) on {}; "
            "batch {} = micro {} x GAS {} x world {}",
            p.topology->rank(), p.topology->world_size(), comm::to_string(p.topology->world().backend()), p.zero.stage,
            p.states->numel(), p.states->num_groups(), p.device.str(), c.train_batch_size,
            c.train_micro_batch_size_per_gpu, c.gradient_accumulation_steps, p.topology->world_size());
  log::info("{}", p.dtypes.table());
  for (const auto& line : p.zero.describe()) log::info("{}", line);
}

}  // namespace ds
