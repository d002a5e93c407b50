// The lines an engine logs once its parts are built: ranks and backend, ZeRO stage, parameters and
// groups, the batch triple, the dtype table and the ZeRO plan.
#pragma once

namespace ds {
struct EngineParts;

void log_engine_ready(const EngineParts& parts);

}  // namespace ds
