// What ds-run needs to know about the machine it runs on: how many cores it may use (to decide
// --oversubscribe), how many NUMA nodes it has (the default rank count without a hostfile), which
// host names mean "this machine", and whether we are root (Open MPI then needs two variables).
#pragma once

#include <string>
#include <vector>

namespace ds::launcher {

int usable_cores();                          // CPUs in our affinity mask (at least 1)
int numa_nodes();                            // online NUMA nodes (at least 1)
std::vector<std::string> local_host_names(); // localhost, 127.0.0.1, hostname, short hostname
bool running_as_root();
std::string self_executable();               // absolute path of this binary (/proc/self/exe)
// The tool `name` ("ds-autotune") from the same build or install as this binary, else `name`
// itself (looked up on PATH when run).
std::string sibling_tool(const std::string& name);

}  // namespace ds::launcher
