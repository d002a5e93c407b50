// The precompiled header shared by every LibTorch target (see CMakeLists.txt: ds_use_pch).
#pragma once
#include <torch/torch.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <fmt/format.h>
#include <algorithm>
#include <memory>
#include <string>
#include <vector>
