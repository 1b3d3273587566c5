// The clocks of an MPI job's ranks aligned to rank 0's (mpi_clock.cc).
#pragma once
#include <stdint.h>

namespace iot {

// The constants of the MPI library's ABI the exchange needs, and its functions by name (mpiio.cc
// finds both: the library may be out of RTLD_NEXT's reach).
struct MpiAbi {
  uintptr_t comm_world, byte, status_ignore;
  void* (*sym)(const char* name);
};

// This rank's job clock measured against rank 0's, and said in an iotrace_clock line. A
// collective of MPI_COMM_WORLD: every rank calls it, at the same place (`at`, a literal).
void mpi_clock_align(const MpiAbi& abi, const char* at);

}  // namespace iot
