/* The MPI-IO overhead benchmark's workload (benchmarks/mpiio_overhead.py): one rank calls
 * MPI_File_write_at (64 B, explicit offset) and MPI_File_seek in blocks of 1000, recorded and
 * paused in turn when traced (iotrace_pause, found at run time: untraced it is absent), and
 * prints the ns per call of each: "write_at recorded paused seek recorded paused".
 * Usage: mpiio_workload FILE BLOCKS */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  void (*pause_fn)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "iotrace_pause");
  int blocks = atoi(argv[2]);
  MPI_File fh;
  MPI_File_open(MPI_COMM_SELF, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
  static char buf[64];
  double t[2][2] = {{0, 0}, {0, 0}}; /* [call][paused] */
  for (int b = 0; b < 2 * blocks; b++) {
    int paused = b & 1;
    if (pause_fn) pause_fn(paused);
    double a = now();
    for (int i = 0; i < 1000; i++)
      MPI_File_write_at(fh, (MPI_Offset)(i % 64) * 64, buf, 64, MPI_BYTE, MPI_STATUS_IGNORE);
    double m = now();
    for (int i = 0; i < 1000; i++) MPI_File_seek(fh, (MPI_Offset)i * 64, MPI_SEEK_SET);
    double e = now();
    t[0][paused] += m - a;
    t[1][paused] += e - m;
  }
  if (pause_fn) pause_fn(0);
  MPI_File_close(&fh);
  double n = 1000.0 * blocks;
  printf("%.1f %.1f %.1f %.1f\n", t[0][0] / n, t[0][1] / n, t[1][0] / n, t[1][1] / n);
  MPI_Finalize();
  return 0;
}
