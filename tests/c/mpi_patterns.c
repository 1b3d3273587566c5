/* MPI-IO access patterns, one per mode, for the MPI findings (tests/test_mpi.py):
 *   collective  each rank writes then reads 4 MiB of one shared file at r*4M, collectively
 *               (MPI_File_write_at_all, MPI_File_read_at_all): the clean run
 *   small       each rank writes 8192 blocks of 4 KiB to a shared file, independently
 *               (MPI_File_write_at), the ranks' blocks interleaved: block i of rank r at
 *               (i*ranks + r) * 4 KiB
 *   perproc     each rank writes 4 MiB to a file of its own in 1 MiB calls
 *   straggler   each rank writes 8 MiB to its own part of a shared file in 256 KiB calls, rank 1
 *               5 times over (5x the calls and bytes) and 8 ms after each call (as behind a slow
 *               storage target, whatever the load on the machine's cores or disk), then all sync
 *               (collective: the others wait for rank 1). Few bytes, so that the sync's flush
 *               (seconds for 256 MiB on a contended disk) stays short beside rank 1's 1.3 s
 *   misaligned  each rank writes 16 blocks of 1 MiB collectively at r*16 MiB + i MiB + 512 B:
 *               every request crosses a 1 MiB stripe boundary
 *   storm       every rank stats, opens and reads the same 8 files DIR/input*.cfg 100 times
 *   starved     20 steps of the same work on every rank (4M iterations of arithmetic, a 64 KiB
 *               write to its part of a shared file, a barrier); the last rank runs on the last
 *               CPU, the others on CPU 0 (the test loads the last CPU: that rank gets less CPU)
 *   compute     the same steps, rank 1 computing 4 times as much (a straggler by its own work)
 * Usage: mpi_patterns MODE DIR */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#define MiB (1 << 20)

static char buf[4 * MiB];

/* n iterations of dependent arithmetic: CPU work the compiler cannot drop or vectorise */
static double compute(long n) {
  volatile double x = 1.0;
  for (long i = 0; i < n; i++) x = x * 1.0000001 + 1e-9;
  return x;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int r, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const char* mode = argv[1];
  char path[4096];
  MPI_File fh;
  memset(buf, 'a' + r, sizeof buf);
  int amode = MPI_MODE_CREATE | MPI_MODE_RDWR;
  if (!strcmp(mode, "perproc")) {
    snprintf(path, sizeof path, "%s/part%d.dat", argv[2], r);
    MPI_File_open(MPI_COMM_SELF, path, amode, MPI_INFO_NULL, &fh);
    for (int i = 0; i < 4; i++)
      MPI_File_write_at(fh, (MPI_Offset)i * MiB, buf, MiB, MPI_BYTE, MPI_STATUS_IGNORE);
  } else if (!strcmp(mode, "storm")) {
    /* every rank stats, opens and reads the same 8 input files 100 times (a config read per
     * step), then writes its own part of a shared file collectively */
    for (int k = 0; k < 100; k++)
      for (int i = 0; i < 8; i++) {
        snprintf(path, sizeof path, "%s/input%d.cfg", argv[2], i);
        struct stat st;
        stat(path, &st);
        int fd = open(path, O_RDONLY);
        if (fd >= 0) {
          char b[64];
          if (read(fd, b, sizeof b) < 0) perror("read");
          close(fd);
        }
      }
    snprintf(path, sizeof path, "%s/shared.dat", argv[2]);
    MPI_File_open(MPI_COMM_WORLD, path, amode, MPI_INFO_NULL, &fh);
    MPI_File_write_at_all(fh, (MPI_Offset)r * MiB, buf, MiB, MPI_BYTE, MPI_STATUS_IGNORE);
  } else if (!strcmp(mode, "starved") || !strcmp(mode, "compute")) {
    if (!strcmp(mode, "starved")) {
      long cpus = sysconf(_SC_NPROCESSORS_ONLN);
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(r == n - 1 ? (int)cpus - 1 : 0, &set);
      if (sched_setaffinity(0, sizeof set, &set) != 0) perror("sched_setaffinity");
    }
    long work = !strcmp(mode, "compute") && r == 1 ? 16000000 : 4000000;
    snprintf(path, sizeof path, "%s/shared.dat", argv[2]);
    MPI_File_open(MPI_COMM_WORLD, path, amode, MPI_INFO_NULL, &fh);
    for (int k = 0; k < 20; k++) {
      compute(work);
      MPI_File_write_at(fh, ((MPI_Offset)r * 20 + k) * 65536, buf, 65536, MPI_BYTE,
                        MPI_STATUS_IGNORE);
      MPI_Barrier(MPI_COMM_WORLD);
    }
  } else {
    snprintf(path, sizeof path, "%s/shared.dat", argv[2]);
    MPI_File_open(MPI_COMM_WORLD, path, amode, MPI_INFO_NULL, &fh);
    if (!strcmp(mode, "collective")) {
      MPI_Offset at = (MPI_Offset)r * 4 * MiB;
      MPI_File_write_at_all(fh, at, buf, 4 * MiB, MPI_BYTE, MPI_STATUS_IGNORE);
      MPI_File_read_at_all(fh, at, buf, 4 * MiB, MPI_BYTE, MPI_STATUS_IGNORE);
    } else if (!strcmp(mode, "small")) {
      for (int i = 0; i < 8192; i++)
        MPI_File_write_at(fh, ((MPI_Offset)i * n + r) * 4096, buf, 4096, MPI_BYTE,
                          MPI_STATUS_IGNORE);
    } else if (!strcmp(mode, "straggler")) {
      int rounds = r == 1 ? 5 : 1;
      for (int k = 0; k < rounds; k++)
        for (int i = 0; i < 32; i++) {
          MPI_File_write_at(fh, (MPI_Offset)r * 8 * MiB + (MPI_Offset)i * (MiB / 4), buf, MiB / 4,
                            MPI_BYTE, MPI_STATUS_IGNORE);
          if (r == 1) usleep(8000); /* behind a slow storage target: slow on any machine */
        }
      MPI_File_sync(fh); /* collective: every rank once, the others waiting for rank 1 */
    } else if (!strcmp(mode, "misaligned")) {
      /* 1 MiB blocks at r*16 MiB + i MiB + 512: each crosses a 1 MiB stripe boundary */
      for (int i = 0; i < 16; i++)
        MPI_File_write_at_all(fh, (MPI_Offset)r * 16 * MiB + (MPI_Offset)i * MiB + 512, buf, MiB,
                              MPI_BYTE, MPI_STATUS_IGNORE);
    }
  }
  MPI_File_close(&fh);
  MPI_Barrier(MPI_COMM_WORLD);
  if (r == 0) printf("%s done\n", mode);
  MPI_Finalize();
  return 0;
}
