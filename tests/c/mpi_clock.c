// The clock alignment's program (tests/test_mpi_clock.py): every rank arrives at a barrier at
// its own time (rank r after r * 20 ms) and leaves it with the others; then writes a file of
// its own, meets the others at a second barrier and ends. With MPI_CLOCK_FORK set, rank 1 forks
// a child after the first barrier that writes child.out.
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int write_file(const char* dir, const char* name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  return fd >= 0 && write(fd, "x", 1) == 1 && close(fd) == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  const char* dir = argc > 1 ? argv[1] : ".";
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  struct timespec late = {0, rank * 20000000L};
  nanosleep(&late, NULL);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 1 && getenv("MPI_CLOCK_FORK")) {
    pid_t child = fork();
    if (child == 0) _exit(write_file(dir, "child.out"));
    int status = 1;
    if (child < 0 || waitpid(child, &status, 0) != child || status != 0) return 1;
  }
  char name[64];
  snprintf(name, sizeof name, "r%d.out", rank);
  if (write_file(dir, name)) return 1;
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  if (rank == 0) printf("%d ranks done\n", size);
  return 0;
}
