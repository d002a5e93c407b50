// The communication layer's entry point: make_communicator picks and builds a backend.
// Include this header to use the layer; see src/comm/README.md and docs/comm.md.
#pragma once

#include "comm/communicator.h"
#include "comm/compressed_allreduce.h"
#include "comm/gradients.h"
#include "comm/kernels.h"
#include "comm/make_communicator.h"
#include "comm/mpi_communicator.h"
#include "comm/single_communicator.h"
#include "comm/types.h"
