// The clocks of an MPI job's ranks aligned (docs/trace-format.md, "Clock"). A rank's events are
// on its host's CLOCK_MONOTONIC, which readers put on the job clock with the process's own
// wall_ns - mono_ns: as good as the hosts' NTP, a few ms apart across nodes. So at the end of
// MPI_Init and at the start of MPI_Finalize (inside their events: the program waits for it
// there), rank 0 plays a few ping-pongs with every other rank, one rank after the other, and
// each rank keeps the round with the shortest round trip (as NTP and Score-P do): its offset to
// rank 0's job clock is t_root - (t_send + t_recv)/2, within rtt/2 (the reply left rank 0
// somewhere inside the round trip). It is said in an iotrace_clock line; readers add it to the
// process's shift.
//
// The exchange runs on a private communicator (a dup of MPI_COMM_WORLD, freed after), so no
// message of it can match one of the program's, through PMPI_ calls (no wrapper of ours
// records them), under the thread's guard (the POSIX calls the MPI library makes for it are
// not the program's either). A program without MPI never gets here: nothing is resolved.
#include "mpi_clock.h"

#include <stdint.h>
#include <stdlib.h>

#include "buffer.h"
#include "clock.h"
#include "config.h"
#include "lifecycle.h"

namespace iot {
namespace {

using H = uintptr_t;  // an MPI handle (mpiio.cc)

// Rounds per rank: the shortest of them bounds the error. Under load a round can wait for a
// time slice; more rounds are played while the best is above kGoodRttNs, up to kMaxRounds and
// for kExtraNs at most (rank 0 serves the ranks one after the other: the job waits for it).
constexpr int kRounds = 10, kMaxRounds = 100;
constexpr int64_t kGoodRttNs = 100000, kExtraNs = 2000000;

struct Pmpi {
  int (*comm_dup)(H, H*);
  int (*comm_free)(H*);
  int (*comm_rank)(H, int*);
  int (*comm_size)(H, int*);
  int (*send)(const void*, int, H, int, int, H);
  int (*recv)(void*, int, H, int, int, H, void*);
  int (*barrier)(H);
};

template <class F>
bool find(const MpiAbi& abi, F& f, const char* name) {
  f = reinterpret_cast<F>(abi.sym(name));
  return f != nullptr;
}

bool resolve(const MpiAbi& abi, Pmpi& p) {
  return find(abi, p.comm_dup, "PMPI_Comm_dup") && find(abi, p.comm_free, "PMPI_Comm_free") &&
         find(abi, p.comm_rank, "PMPI_Comm_rank") && find(abi, p.comm_size, "PMPI_Comm_size") &&
         find(abi, p.send, "PMPI_Send") && find(abi, p.recv, "PMPI_Recv") &&
         find(abi, p.barrier, "PMPI_Barrier");
}

bool wanted() {
  const char* v = getenv("IOTRACE_MPI_CLOCK");
  return !(v && *v && config_false(v));
}

}  // namespace

void mpi_clock_align(const MpiAbi& abi, const char* at) {
  if (!wanted()) return;
  Pmpi p;
  if (!resolve(abi, p)) return;
  Guard guard;  // the MPI library's work for the exchange is not the program's
  int rank = -1, size = 0;
  if (p.comm_rank(abi.comm_world, &rank) != 0 || p.comm_size(abi.comm_world, &size) != 0 ||
      size < 2)
    return;
  H comm = 0;
  if (p.comm_dup(abi.comm_world, &comm) != 0) return;
  const int64_t base = job_clock_base();
  void* ignore = reinterpret_cast<void*>(abi.status_ignore);
  if (rank == 0) {
    // Serve each rank its rounds, in rank order; a rank says how many it plays.
    for (int r = 1; r < size; r++) {
      for (int64_t more = 1; more;) {
        if (p.recv(&more, 8, abi.byte, r, 0, comm, ignore) != 0) break;
        int64_t t = now_ns() + base;
        if (p.send(&t, 8, abi.byte, r, 0, comm) != 0) break;
      }
    }
    announce_clock(at, now_ns(), 0, 0);  // the reference
  } else {
    int64_t best_rtt = INT64_MAX, offset = 0, mono = 0, extra_until = INT64_MAX;
    bool ok = true;
    for (int k = 0; ok && k < kMaxRounds; k++) {
      // Tells rank 0 whether another round follows this one.
      int64_t t1 = now_ns();
      int64_t more =
          k + 1 < kRounds || (best_rtt > kGoodRttNs && k + 1 < kMaxRounds && t1 < extra_until);
      int64_t t_root = 0;
      ok = p.send(&more, 8, abi.byte, 0, 0, comm) == 0 &&
           p.recv(&t_root, 8, abi.byte, 0, 0, comm, ignore) == 0;
      int64_t t2 = now_ns();
      if (k == 0) extra_until = t2 + kExtraNs;  // the first round waited for rank 0's turn
      if (ok && t2 - t1 < best_rtt) {
        best_rtt = t2 - t1;
        mono = t1 + (t2 - t1) / 2;
        offset = t_root - (mono + base);
      }
      if (!more) break;
    }
    if (ok) announce_clock(at, mono, offset, best_rtt);
  }
  // Every rank leaves together, as from MPI_Init: the ranks served first do not start their
  // work ahead of the others (a stagger the tracer would have made, and the analysis blamed
  // on the last rank).
  p.barrier(comm);
  p.comm_free(&comm);
}

}  // namespace iot
