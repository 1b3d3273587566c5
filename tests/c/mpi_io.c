/* Each rank writes 4 blocks of 64 KiB to a file of its own, reads them back, then waits for
 * the others: the POSIX I/O of an MPI job of file-per-process shape. */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char path[4096];
  snprintf(path, sizeof path, "%s/r%d.bin", argv[1], rank);
  static char buf[65536];
  memset(buf, 'a' + rank, sizeof buf);
  int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
  for (int i = 0; i < 4; i++) pwrite(fd, buf, sizeof buf, (off_t)i * sizeof buf);
  for (int i = 0; i < 4; i++) pread(fd, buf, sizeof buf, (off_t)i * sizeof buf);
  close(fd);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) printf("%d ranks done\n", size);
  MPI_Finalize();
  return 0;
}
