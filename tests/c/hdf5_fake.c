/* A stand-in for an HDF5 library whose calls go through its own public names (as an HDF5 built
 * without direct binding may: its PLT), for tests/test_hdf5_layers.py: H5Fcreate calls H5Fflush.
 * Built twice: as libhdf5_fake.so (-DFAKE_LIB), and as the program that calls it (H5Fcreate,
 * H5Fflush, H5Fclose), which prints how many flushes the library made. FAKE_HDF5_VERSION=1.8
 * makes it say it is HDF5 1.8 (a 32-bit hid_t: the tracer lets its calls pass). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int64_t hid_t;
typedef int herr_t;

#ifdef FAKE_LIB
static int flushes;
herr_t H5open(void) { return 0; }
herr_t H5get_libversion(unsigned* major, unsigned* minor, unsigned* release) {
  const char* v = getenv("FAKE_HDF5_VERSION");
  *major = 1;
  *minor = v && strcmp(v, "1.8") == 0 ? 8 : 10;
  *release = 0;
  return 0;
}
herr_t H5Fflush(hid_t obj, int scope) {
  (void)obj;
  (void)scope;
  flushes++;
  return 0;
}
hid_t H5Fcreate(const char* name, unsigned flags, hid_t fcpl, hid_t fapl) {
  (void)name, (void)flags, (void)fcpl, (void)fapl;
  return H5Fflush(72057594037927936, 0) == 0 ? 72057594037927936 : -1; /* its own public name */
}
herr_t H5Fclose(hid_t file) { return file == 72057594037927936 ? 0 : -1; }
int fake_flushes(void) { return flushes; }
#else
hid_t H5Fcreate(const char* name, unsigned flags, hid_t fcpl, hid_t fapl);
herr_t H5Fflush(hid_t obj, int scope);
herr_t H5Fclose(hid_t file);
int fake_flushes(void);

int main(int argc, char** argv) {
  (void)argc;
  hid_t f = H5Fcreate(argv[1], 2, 0, 0);
  herr_t a = H5Fflush(f, 1), b = H5Fclose(f);
  printf("%d %d %d\n", f >= 0 && a == 0 && b == 0, fake_flushes(), 0);
  return 0;
}
#endif
