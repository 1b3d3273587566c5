/* Workload of benchmarks/many_files_bench.py: a job reading FILES distinct files once each
 * (ImageNet's shape: one small file per sample), the way a Python loader reads a sample.
 *
 *   many_files create DIR FILES         write DIR/dNNN/fNNNNNNN.bin, 1 KiB each (run untraced)
 *   many_files read DIR FILES PROCS N   N samples, sample i reading file i % FILES, over PROCS
 *                                       forked processes (PROCS 1: the process itself)
 *
 * Each sample makes 9 intercepted calls, those of Python's open(path, "rb").read() and an
 * os.stat before it: stat, access, open, fstat, lseek, read (1 KiB), read (end of file),
 * fstat, close. Under LD_PRELOAD=libiotrace.so a job of N samples is 9*N events. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PER_DIR 1000

static void path_of(char* buf, size_t n, const char* dir, long i) {
  snprintf(buf, n, "%s/d%04ld/f%07ld.bin", dir, i / PER_DIR, i);
}

static int create(const char* dir, long files) {
  char path[4096], buf[1024];
  memset(buf, 'x', sizeof buf);
  for (long i = 0; i < files; i++) {
    if (i % PER_DIR == 0) {
      snprintf(path, sizeof path, "%s/d%04ld", dir, i / PER_DIR);
      if (mkdir(path, 0755) && access(path, F_OK)) return perror(path), 1;
    }
    path_of(path, sizeof path, dir, i);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return perror(path), 1;
    if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) return perror("write"), 1;
    close(fd);
  }
  return 0;
}

static int sample(const char* dir, long i) {
  char path[4096], buf[1025];
  struct stat st;
  path_of(path, sizeof path, dir, i);
  if (stat(path, &st)) return 1;
  if (access(path, R_OK)) return 1;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 1;
  fstat(fd, &st);
  lseek(fd, 0, SEEK_CUR);
  if (read(fd, buf, sizeof buf) != 1024) return 2;
  if (read(fd, buf, sizeof buf) != 0) return 2;
  fstat(fd, &st);
  close(fd);
  return 0;
}

static int reader(const char* dir, long files, long from, long to) {
  for (long i = from; i < to; i++)
    if (sample(dir, i % files)) return fprintf(stderr, "sample %ld failed\n", i), 1;
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 4 && !strcmp(argv[1], "create")) return create(argv[2], atol(argv[3]));
  if (argc < 6 || strcmp(argv[1], "read"))
    return fprintf(stderr, "usage: %s create DIR FILES | read DIR FILES PROCS SAMPLES\n", argv[0]),
           2;
  const char* dir = argv[2];
  long files = atol(argv[3]), samples = atol(argv[5]);
  int procs = atoi(argv[4]);
  if (procs <= 1) return reader(dir, files, 0, samples);
  for (int k = 0; k < procs; k++) {
    pid_t p = fork();
    if (p == 0) _exit(reader(dir, files, samples * k / procs, samples * (k + 1) / procs));
    if (p < 0) return perror("fork"), 1;
  }
  int status, bad = 0;
  while (wait(&status) > 0) bad |= !WIFEXITED(status) || WEXITSTATUS(status);
  return bad;
}
