/* Parallel HDF5 over MPI-IO over POSIX: the three layers of tests/test_hdf5_layers.py. Each rank
 * r of n, on one shared file DIR/shared.h5 (the MPI-IO driver):
 *   /grid/data   2-D, 2n*R rows x C doubles (contiguous): rank r writes rows [rR, rR+R)
 *                collectively, then rows [(n+r)R, (n+r)R+R) independently (R*C*8 = 8 KiB each);
 *                an attribute "units" of 4 ints (16 B), written by every rank (HDF5 asks it)
 *   /grid/steps  1-D, chunked by K doubles, extended from 0 to n*K: rank r writes its chunk
 *                [rK, rK+K) collectively (8 KiB)
 * then, the file opened again read-only: the attribute read (16 B), rank r's two blocks of
 * /grid/data read back (collectively, independently: 8 KiB each) and the whole of /grid/steps
 * read by every rank (H5S_ALL: n*K*8 bytes), each checked against what was written.
 * Usage: hdf5_layers DIR; rank 0 prints "ok <n>" when every rank read back what it wrote. */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define R 16
#define C 64
#define K 1024

static double block[R * C], steps[K];

static void fail(const char* what) {
  fprintf(stderr, "hdf5_layers: %s\n", what);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* The rows [row, row + R) of /grid/data's file space. */
static hid_t rows(hid_t dset, hsize_t row) {
  hid_t space = H5Dget_space(dset);
  hsize_t start[2] = {row, 0}, count[2] = {R, C};
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL);
  return space;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int r, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  char path[4096];
  snprintf(path, sizeof path, "%s/shared.h5", argv[1]);

  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL);
  hid_t coll = H5Pcreate(H5P_DATASET_XFER), ind = H5Pcreate(H5P_DATASET_XFER);
  H5Pset_dxpl_mpio(coll, H5FD_MPIO_COLLECTIVE);
  H5Pset_dxpl_mpio(ind, H5FD_MPIO_INDEPENDENT);
  hsize_t mdims[2] = {R, C};
  hid_t mem = H5Screate_simple(2, mdims, NULL);

  /* --- write */
  hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  hid_t grid = H5Gcreate2(file, "grid", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  hsize_t dims[2] = {2 * (hsize_t)n * R, C};
  hid_t space = H5Screate_simple(2, dims, NULL);
  hid_t data =
      H5Dcreate2(grid, "data", H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  for (int i = 0; i < R * C; i++) block[i] = r * 1000000.0 + i;
  hid_t fs = rows(data, (hsize_t)r * R);
  if (H5Dwrite(data, H5T_NATIVE_DOUBLE, mem, fs, coll, block) < 0) fail("collective write");
  H5Sclose(fs);
  for (int i = 0; i < R * C; i++) block[i] = -(r * 1000000.0 + i);
  fs = rows(data, (hsize_t)(n + r) * R);
  if (H5Dwrite(data, H5T_NATIVE_DOUBLE, mem, fs, ind, block) < 0) fail("independent write");
  H5Sclose(fs);

  hsize_t four = 4;
  hid_t aspace = H5Screate_simple(1, &four, NULL);
  hid_t attr = H5Acreate2(data, "units", H5T_NATIVE_INT, aspace, H5P_DEFAULT, H5P_DEFAULT);
  int units[4] = {1, 2, 3, n}, back_units[4] = {0, 0, 0, 0};
  H5Awrite(attr, H5T_NATIVE_INT, units);
  H5Aclose(attr);

  hsize_t zero = 0, unlimited = H5S_UNLIMITED, chunk = K, all = (hsize_t)n * K;
  hid_t sspace = H5Screate_simple(1, &zero, &unlimited);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 1, &chunk);
  hid_t st = H5Dcreate2(grid, "steps", H5T_NATIVE_DOUBLE, sspace, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  H5Dset_extent(st, &all);
  for (int i = 0; i < K; i++) steps[i] = r * K + i;
  hid_t sfs = H5Dget_space(st);
  hsize_t start = (hsize_t)r * K;
  H5Sselect_hyperslab(sfs, H5S_SELECT_SET, &start, NULL, &chunk, NULL);
  hid_t smem = H5Screate_simple(1, &chunk, NULL);
  if (H5Dwrite(st, H5T_NATIVE_DOUBLE, smem, sfs, coll, steps) < 0) fail("chunked write");
  H5Sclose(sfs);
  H5Dclose(st);
  H5Dclose(data);
  H5Gclose(grid);
  H5Fflush(file, H5F_SCOPE_GLOBAL);
  H5Fclose(file);

  /* --- read back */
  file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
  data = H5Dopen2(file, "/grid/data", H5P_DEFAULT);
  attr = H5Aopen(data, "units", H5P_DEFAULT);
  H5Aread(attr, H5T_NATIVE_INT, back_units);
  H5Aclose(attr);
  int ok = back_units[3] == n && back_units[0] == 1;
  fs = rows(data, (hsize_t)r * R);
  H5Dread(data, H5T_NATIVE_DOUBLE, mem, fs, coll, block);
  H5Sclose(fs);
  for (int i = 0; i < R * C; i++) ok &= block[i] == r * 1000000.0 + i;
  fs = rows(data, (hsize_t)(n + r) * R);
  H5Dread(data, H5T_NATIVE_DOUBLE, mem, fs, ind, block);
  H5Sclose(fs);
  for (int i = 0; i < R * C; i++) ok &= block[i] == -(r * 1000000.0 + i);
  H5Dclose(data);
  st = H5Oopen(file, "grid/steps", H5P_DEFAULT);
  double* whole = malloc(sizeof(double) * n * K);
  H5Dread(st, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, ind, whole);
  for (int i = 0; i < n * K; i++) ok &= whole[i] == i;
  free(whole);
  H5Oclose(st);
  H5Fclose(file);

  int all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (r == 0) printf(all_ok ? "ok %d\n" : "mismatch %d\n", n);
  H5Pclose(fapl);
  H5Pclose(coll);
  H5Pclose(ind);
  H5Pclose(dcpl);
  H5Sclose(mem);
  H5Sclose(space);
  H5Sclose(aspace);
  H5Sclose(sspace);
  H5Sclose(smem);
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
