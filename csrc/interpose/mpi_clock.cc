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
#include <time.h>

#include "buffer.h"
#include "clock.h"
#include "config.h"
#include "lifecycle.h"

namespace iot {
namespace {

using H = uintptr_t;  // an MPI handle (mpiio.cc)

// Rounds per rank: the shortest of them bounds the error. Ten are measured; more while the best
// is above kGoodRttNs, for kExtraNs at most, and while it is above kSlowRttNs (no network's
// round trip: a wait for a CPU) for kLongExtraNs at most. Rank 0 serves the ranks one after the
// other: the job waits for it, and the budgets bound the wait.
//
// Under load (more processes than cores) a round is fast only while rank 0 and the rank both
// hold a CPU. An MPI receive spins: where the two share one CPU, the one waiting holds it for a
// time slice (3-4 ms here) while the other's message waits, round after round. So
//  - the ten rounds spin (the fastest where each has a CPU: a few us on one host);
//  - the extra rounds are played napping: each side waits for its message by testing and
//    sleeping kNapNs, which hands a shared CPU to the other (a round in about two naps);
//  - the ranks not playing nap too, leaving the CPUs to the two that are: a rank waiting for
//    its turn, and every rank waiting for the others at the end.
constexpr int kRounds = 10, kMaxRounds = 1000;
constexpr int64_t kGoodRttNs = 100000, kExtraNs = 2000000;
constexpr int64_t kSlowRttNs = 1000000, kLongExtraNs = 40000000;
constexpr int64_t kNapNs = 20000;

// What a rank tells rank 0 in each round: whether another follows, and how rank 0 is to wait
// for it.
enum Next : int64_t { kLast = 0, kSpin = 1, kNap = 2 };

struct Pmpi {
  int (*comm_dup)(H, H*);
  int (*comm_free)(H*);
  int (*comm_rank)(H, int*);
  int (*comm_size)(H, int*);
  int (*send)(const void*, int, H, int, int, H);
  int (*recv)(void*, int, H, int, int, H, void*);
  int (*irecv)(void*, int, H, int, int, H, H*);
  int (*ibarrier)(H, H*);
  int (*test)(H*, int*, void*);
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
         find(abi, p.irecv, "PMPI_Irecv") && find(abi, p.ibarrier, "PMPI_Ibarrier") &&
         find(abi, p.test, "PMPI_Test");
}

bool wanted() {
  const char* v = getenv("IOTRACE_MPI_CLOCK");
  return !(v && *v && config_false(v));
}

// A request waited for without holding a CPU: tested, then a nap, until done.
bool wait_napping(const Pmpi& p, const MpiAbi& abi, H* req) {
  const timespec nap{0, kNapNs};
  for (int done = 0;;) {
    if (p.test(req, &done, reinterpret_cast<void*>(abi.status_ignore)) != 0) return false;
    if (done) return true;
    nanosleep(&nap, nullptr);
  }
}

// 8 bytes from rank `from`, spinning in the MPI library or napping.
bool receive(const Pmpi& p, const MpiAbi& abi, H comm, int from, int64_t* v, bool nap) {
  if (!nap)
    return p.recv(v, 8, abi.byte, from, 0, comm, reinterpret_cast<void*>(abi.status_ignore)) == 0;
  H req = 0;  // MPICH's int handle or Open MPI's pointer: either fits, zero-extended
  return p.irecv(v, 8, abi.byte, from, 0, comm, &req) == 0 && wait_napping(p, abi, &req);
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
  if (rank == 0) {
    // Serve each rank its rounds, in rank order; a rank says whether another round follows.
    for (int r = 1; r < size; r++) {
      for (int64_t next = kSpin; next != kLast;) {
        if (!receive(p, abi, comm, r, &next, next == kNap)) break;
        int64_t t = now_ns() + base;
        if (p.send(&t, 8, abi.byte, r, 0, comm) != 0) break;
      }
    }
    announce_clock(at, now_ns(), 0, 0);  // the reference
  } else {
    // Round 0 waits for this rank's turn; rounds 1-10 spin, the extra ones nap.
    int64_t best_rtt = INT64_MAX, offset = 0, mono = 0, start = 0;
    bool ok = true;
    for (int k = 0; ok && k <= kMaxRounds; k++) {
      int64_t t1 = now_ns();
      if (k == kRounds) start = t1;  // the budgets count from the end of the ten
      int64_t spent = t1 - start;
      bool more =
          k < kRounds || (k < kMaxRounds && ((best_rtt > kGoodRttNs && spent < kExtraNs) ||
                                             (best_rtt > kSlowRttNs && spent < kLongExtraNs)));
      int64_t next = !more ? kLast : k + 1 > kRounds ? kNap : kSpin, t_root = 0;
      ok = p.send(&next, 8, abi.byte, 0, 0, comm) == 0 &&
           receive(p, abi, comm, 0, &t_root, k == 0 || k > kRounds);
      int64_t t2 = now_ns();
      if (ok && k > 0 && t2 - t1 < best_rtt) {
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
  // on the last rank). A nap late at most.
  H req = 0;
  if (p.ibarrier(comm, &req) == 0) wait_napping(p, abi, &req);
  p.comm_free(&comm);
}

}  // namespace iot
