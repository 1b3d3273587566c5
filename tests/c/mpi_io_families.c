/* Every MPI-IO family once per rank, on one shared file and on a file of the rank's own; the
 * sizes and offsets the test expects are these (tests/test_mpi.py: FAMILIES):
 *   shared.dat  write_at        4 KiB at r*4K                         (explicit, independent)
 *               write_at_all    8 KiB at 64K + r*8K                   (explicit, collective)
 *               seek + write    4 KiB at 128K + r*8K                  (individual pointer)
 *               write_all       4 KiB at 128K + r*8K + 4K             (individual, collective)
 *               write_at_all_begin/_end  4 KiB at 192K + r*4K         (split collective)
 *               iwrite_at + MPI_Wait     4 KiB at 256K + r*4K         (non-blocking)
 *               write_shared    1 KiB, write_ordered 1 KiB            (shared pointer)
 *               read_at 4 KiB at r*4K, read_at_all 8 KiB at 64K + r*8K,
 *               iread_at + MPI_Wait 4 KiB at 256K + r*4K, sync, get_size
 *   r<rank>.dat write_at 2 x 64 KiB at 0 and 64K, seek 0 + read 64 KiB (MPI_COMM_SELF);
 *               write_at of derived types: 2 x 16 B at 128K, the type freed, then 1 x 48 B at
 *               128K + 32 (a new type, likely where the freed one was: its size is not the old
 *               one's), then 4 MPI_INTs at 128K + 80 (a predefined type again)
 * Usage: mpi_io_families DIR */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define K 1024

static char buf[64 * K];

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int r;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  char path[4096];
  MPI_File fh;
  MPI_Request req;
  MPI_Status st;
  memset(buf, 'a' + r, sizeof buf);

  snprintf(path, sizeof path, "%s/shared.dat", argv[1]);
  MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
  MPI_File_write_at(fh, (MPI_Offset)r * 4 * K, buf, 4 * K, MPI_BYTE, MPI_STATUS_IGNORE);
  MPI_File_write_at_all(fh, 64 * K + (MPI_Offset)r * 8 * K, buf, 2, MPI_DOUBLE, &st); /* 16 B */
  MPI_File_write_at_all(fh, 64 * K + (MPI_Offset)r * 8 * K, buf, 8 * K, MPI_BYTE, &st);
  MPI_File_seek(fh, 128 * K + (MPI_Offset)r * 8 * K, MPI_SEEK_SET);
  MPI_File_write(fh, buf, 4 * K, MPI_BYTE, MPI_STATUS_IGNORE);
  MPI_File_write_all(fh, buf, K, MPI_INT, MPI_STATUS_IGNORE); /* 4 KiB */
  MPI_File_write_at_all_begin(fh, 192 * K + (MPI_Offset)r * 4 * K, buf, 4 * K, MPI_BYTE);
  MPI_File_write_at_all_end(fh, buf, &st);
  MPI_File_iwrite_at(fh, 256 * K + (MPI_Offset)r * 4 * K, buf, 4 * K, MPI_BYTE, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  MPI_File_write_shared(fh, buf, K, MPI_BYTE, MPI_STATUS_IGNORE);
  MPI_File_write_ordered(fh, buf, K, MPI_BYTE, MPI_STATUS_IGNORE);
  MPI_File_sync(fh);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_File_read_at(fh, (MPI_Offset)r * 4 * K, buf, 4 * K, MPI_BYTE, &st);
  MPI_File_read_at_all(fh, 64 * K + (MPI_Offset)r * 8 * K, buf, 8 * K, MPI_BYTE, MPI_STATUS_IGNORE);
  MPI_File_iread_at(fh, 256 * K + (MPI_Offset)r * 4 * K, buf, 4 * K, MPI_BYTE, &req);
  MPI_Wait(&req, &st);
  MPI_Offset size;
  MPI_File_get_size(fh, &size);
  MPI_File_close(&fh);

  snprintf(path, sizeof path, "%s/r%d.dat", argv[1], r);
  MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
  MPI_File_write_at(fh, 0, buf, 64 * K, MPI_BYTE, MPI_STATUS_IGNORE);
  MPI_File_write_at(fh, 64 * K, buf, 64 * K, MPI_BYTE, MPI_STATUS_IGNORE);
  MPI_File_seek(fh, 0, MPI_SEEK_SET);
  MPI_File_read(fh, buf, 64 * K, MPI_BYTE, MPI_STATUS_IGNORE);
  MPI_Datatype t;
  MPI_Type_contiguous(16, MPI_BYTE, &t);
  MPI_Type_commit(&t);
  MPI_File_write_at(fh, 128 * K, buf, 2, t, MPI_STATUS_IGNORE);
  MPI_Type_free(&t);
  MPI_Type_contiguous(48, MPI_BYTE, &t);
  MPI_Type_commit(&t);
  MPI_File_write_at(fh, 128 * K + 32, buf, 1, t, MPI_STATUS_IGNORE);
  MPI_Type_free(&t);
  MPI_File_write_at(fh, 128 * K + 80, buf, 4, MPI_INT, MPI_STATUS_IGNORE);
  MPI_File_close(&fh);

  MPI_Barrier(MPI_COMM_WORLD);
  if (r == 0) printf("size %lld\n", (long long)size);
  MPI_Finalize();
  return 0;
}
