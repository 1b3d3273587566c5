/* The HDF5 overhead benchmark's workload (benchmarks/hdf5_overhead.py): one process writes and
 * reads 8 doubles (64 B) of a contiguous dataset with H5Dwrite / H5Dread, each at one of 64
 * places, in blocks of 1000, recorded and paused in turn when traced (iotrace_pause, found at
 * run time: untraced it is absent), and prints the ns per call of each:
 * "write recorded paused read recorded paused". The selection is made before each block, so
 * the loop times the transfer alone.
 * Usage: hdf5_workload FILE BLOCKS */
#include <dlfcn.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char** argv) {
  void (*pause_fn)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "iotrace_pause");
  int blocks = atoi(argv[2]);
  hsize_t n = 512, eight = 8;
  hid_t file = H5Fcreate(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t space = H5Screate_simple(1, &n, NULL);
  hid_t dset =
      H5Dcreate2(file, "d", H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  hid_t mem = H5Screate_simple(1, &eight, NULL);
  hid_t sel[64]; /* the 64 places, selected once */
  for (int i = 0; i < 64; i++) {
    hsize_t start = (hsize_t)i * 8;
    sel[i] = H5Scopy(space);
    H5Sselect_hyperslab(sel[i], H5S_SELECT_SET, &start, NULL, &eight, NULL);
  }
  static double buf[8];
  double t[2][2] = {{0, 0}, {0, 0}}; /* [call][paused] */
  for (int b = 0; b < 2 * blocks; b++) {
    int paused = b & 1;
    if (pause_fn) pause_fn(paused);
    double a = now();
    for (int i = 0; i < 1000; i++)
      H5Dwrite(dset, H5T_NATIVE_DOUBLE, mem, sel[i % 64], H5P_DEFAULT, buf);
    double m = now();
    for (int i = 0; i < 1000; i++)
      H5Dread(dset, H5T_NATIVE_DOUBLE, mem, sel[i % 64], H5P_DEFAULT, buf);
    double e = now();
    t[0][paused] += m - a;
    t[1][paused] += e - m;
  }
  if (pause_fn) pause_fn(0);
  for (int i = 0; i < 64; i++) H5Sclose(sel[i]);
  H5Sclose(mem);
  H5Sclose(space);
  H5Dclose(dset);
  H5Fclose(file);
  double k = 1000.0 * blocks;
  printf("%.1f %.1f %.1f %.1f\n", t[0][0] / k, t[0][1] / k, t[1][0] / k, t[1][1] / k);
  return 0;
}
