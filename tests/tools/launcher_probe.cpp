// launcher_probe: the smallest MPI program for ds-run's end-to-end tests. Prints one line per rank
// ("probe rank R of S MASTER_ADDR=... MASTER_PORT=...") and exits with a chosen code:
//   launcher_probe [--fail_rank R --code C] [--codes C0,C1,...]
//                  [--late_rank R --late_ms M]
// --fail_rank: rank R exits C right away (the others finish normally after a pause); --codes: after
// a barrier, rank r exits with the r-th code; --late_rank: that rank ignores SIGTERM (as a trainer
// saving a checkpoint would) and exits M ms after the others. Links MPI only (no LibTorch).
#include <mpi.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int fail_rank = -1, code = 0, late_rank = -1, late_ms = 0;
  std::vector<int> codes;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--fail_rank") == 0) fail_rank = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--code") == 0) code = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--late_rank") == 0) late_rank = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--late_ms") == 0) late_ms = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--codes") == 0)
      for (const char* p = argv[i + 1]; *p != '\0'; p = std::strchr(p, ',') ? std::strchr(p, ',') + 1 : "")
        codes.push_back(std::atoi(p));
  }
  const char* addr = std::getenv("MASTER_ADDR");
  const char* port = std::getenv("MASTER_PORT");
  std::printf("probe rank %d of %d MASTER_ADDR=%s MASTER_PORT=%s\n", rank, size, addr ? addr : "-", port ? port : "-");
  std::fflush(stdout);
  if (rank == fail_rank) _exit(code);  // a crash-like exit: no MPI_Finalize
  if (fail_rank >= 0) {
    sleep(2);  // long enough for mpirun to see the failure first and tear the job down
    MPI_Finalize();
    return 0;
  }
  if (rank == late_rank) std::signal(SIGTERM, SIG_IGN);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  if (rank == late_rank) usleep(late_ms * 1000);
  return rank < static_cast<int>(codes.size()) ? codes[rank] : 0;
}
