/* The golden traces' HDF5 workload (tests/golden/README.md, tests/make_golden.py): every HDF5
 * call the tracer records (calls.def, category hdf5), once or twice, on one file of the fixed
 * folder /tmp/iotrace-golden-data, serially (no MPI). Built against HDF5 1.10 or later, shared.
 *   write: H5Fcreate, H5Gcreate2 /g, H5Dcreate2 /g/d (100 ints), H5Dwrite (all, 400 B),
 *          H5Acreate2 /g/d/a (2 doubles), H5Awrite, H5Aclose, H5Acreate_by_name /g/d/b (1 int),
 *          H5Awrite, H5Aclose, H5Dcreate2 /g/c (chunks of 16 ints, extendible), H5Dset_extent
 *          (32), 2 H5Dwrite_chunk (64 B each), H5Dclose x2, H5Gclose, H5Fflush, H5Fclose
 *   read:  H5Fopen, H5Dopen2 /g/d, H5Dread (10 ints at 20: 40 B), H5Aopen a, H5Aread, H5Aclose,
 *          H5Aopen_by_name b, H5Aread, H5Aclose, H5Dclose, H5Dopen2 of a dataset that is not
 *          there (fails: ret -1), H5Oopen /g/c, H5Dread_chunk (the second: 64 B), H5Idec_ref
 *          (closes it), H5Gopen2 /g, H5Gclose, H5Oopen /g, H5Oclose, H5Fclose */
#include <hdf5.h>
#include <stdio.h>

#ifndef DIR /* tests/test_format.py names its own */
#define DIR "/tmp/iotrace-golden-data"
#endif

int main(void) {
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* the failing open prints nothing */
  int ints[100], back[10], one = 7, one_back = 0;
  double two[2] = {1.5, 2.5}, two_back[2];
  for (int i = 0; i < 100; i++) ints[i] = i;

  hid_t f = H5Fcreate(DIR "/golden.h5", H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t g = H5Gcreate2(f, "g", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  hsize_t n = 100, n2 = 2, zero = 0, unlimited = H5S_UNLIMITED, chunk = 16, grown = 32;
  hid_t space = H5Screate_simple(1, &n, NULL);
  hid_t d = H5Dcreate2(g, "d", H5T_NATIVE_INT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, ints);
  hid_t aspace = H5Screate_simple(1, &n2, NULL);
  hid_t a = H5Acreate2(d, "a", H5T_NATIVE_DOUBLE, aspace, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, H5T_NATIVE_DOUBLE, two);
  H5Aclose(a);
  hid_t scalar = H5Screate(H5S_SCALAR);
  a = H5Acreate_by_name(f, "g/d", "b", H5T_NATIVE_INT, scalar, H5P_DEFAULT, H5P_DEFAULT,
                        H5P_DEFAULT);
  H5Awrite(a, H5T_NATIVE_INT, &one);
  H5Aclose(a);
  hid_t cspace = H5Screate_simple(1, &zero, &unlimited);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 1, &chunk);
  hid_t c = H5Dcreate2(g, "c", H5T_NATIVE_INT, cspace, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  H5Dset_extent(c, &grown);
  hsize_t at0 = 0, at16 = 16;
  H5Dwrite_chunk(c, H5P_DEFAULT, 0, &at0, 16 * sizeof(int), ints);
  H5Dwrite_chunk(c, H5P_DEFAULT, 0, &at16, 16 * sizeof(int), ints + 16);
  H5Dclose(c);
  H5Dclose(d);
  H5Gclose(g);
  H5Fflush(f, H5F_SCOPE_LOCAL);
  H5Fclose(f);

  f = H5Fopen(DIR "/golden.h5", H5F_ACC_RDONLY, H5P_DEFAULT);
  d = H5Dopen2(f, "/g/d", H5P_DEFAULT);
  hsize_t start = 20, count = 10;
  hid_t fs = H5Dget_space(d);
  H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &count, NULL);
  hid_t ms = H5Screate_simple(1, &count, NULL);
  H5Dread(d, H5T_NATIVE_INT, ms, fs, H5P_DEFAULT, back);
  a = H5Aopen(d, "a", H5P_DEFAULT);
  H5Aread(a, H5T_NATIVE_DOUBLE, two_back);
  H5Aclose(a);
  a = H5Aopen_by_name(f, "g/d", "b", H5P_DEFAULT, H5P_DEFAULT);
  H5Aread(a, H5T_NATIVE_INT, &one_back);
  H5Aclose(a);
  H5Dclose(d);
  H5Dopen2(f, "/g/missing", H5P_DEFAULT);
  c = H5Oopen(f, "g/c", H5P_DEFAULT);
  uint32_t filters = 0;
  int chunk_back[16];
  H5Dread_chunk(c, H5P_DEFAULT, &at16, &filters, chunk_back);
  H5Idec_ref(c);
  g = H5Gopen2(f, "g", H5P_DEFAULT);
  H5Gclose(g);
  g = H5Oopen(f, "g", H5P_DEFAULT);
  H5Oclose(g);
  H5Fclose(f);

  int ok =
      back[0] == 20 && back[9] == 29 && two_back[1] == 2.5 && one_back == 7 && chunk_back[0] == 16;
  H5Sclose(space);
  H5Sclose(aspace);
  H5Sclose(scalar);
  H5Sclose(cspace);
  H5Sclose(fs);
  H5Sclose(ms);
  H5Pclose(dcpl);
  printf(ok ? "ok\n" : "mismatch\n");
  return ok ? 0 : 1;
}
