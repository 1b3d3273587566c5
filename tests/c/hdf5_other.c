/* A library with an HDF5 of its own, for tests/test_hdf5_layers.py: built as a shared library
 * linked to the system's HDF5 and loaded (RTLD_LOCAL) by a Python process that has h5py's, the
 * copy its wheel brings: two HDF5 libraries in one process, neither in its global scope, each
 * answering its own callers, with the same ids for different objects.
 * other_write(path, n): /v, n ints 0..n-1, the file and dataset left open; other_close() closes
 * them; other_read(path): the sum of /v, -1 on error. Each returns -1 on error. */
#include <hdf5.h>

static hid_t file = -1, dset = -1;

int other_write(const char* path, int n) {
  int v[1024];
  hsize_t dims = (hsize_t)n;
  for (int i = 0; i < n; i++) v[i] = i;
  file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t s = H5Screate_simple(1, &dims, NULL);
  dset = H5Dcreate2(file, "v", H5T_NATIVE_INT, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Sclose(s);
  return file >= 0 && dset >= 0 &&
                 H5Dwrite(dset, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0
             ? 0
             : -1;
}

int other_close(void) { return H5Dclose(dset) >= 0 && H5Fclose(file) >= 0 ? 0 : -1; }

long other_read(const char* path) {
  int v[1024];
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, "/v", H5P_DEFAULT);
  hid_t s = H5Dget_space(d);
  hssize_t n = H5Sget_simple_extent_npoints(s);
  herr_t r = n > 0 && n <= 1024 ? H5Dread(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) : -1;
  long sum = 0;
  for (hssize_t i = 0; r >= 0 && i < n; i++) sum += v[i];
  H5Sclose(s);
  H5Dclose(d);
  return H5Fclose(f) >= 0 && r >= 0 ? sum : -1;
}
