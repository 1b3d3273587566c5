! tests/test_mpi.py: each rank writes 4 KiB independently and 8 KiB collectively to a shared file, reads its 4 KiB back (Fortran, use mpi: Open MPI binds it to the PMPI_ names)
program fio
  use mpi
  implicit none
  integer :: ierr, rank, nranks, fh, i
  integer(kind=MPI_OFFSET_KIND) :: off
  integer :: status(MPI_STATUS_SIZE)
  character(len=4096) :: a
  character(len=8192) :: b
  character(len=256) :: path
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  call get_command_argument(1, path)
  a = repeat('a', 4096)
  b = repeat('b', 8192)
  call MPI_File_open(MPI_COMM_WORLD, trim(path), MPI_MODE_CREATE + MPI_MODE_RDWR, MPI_INFO_NULL, fh, ierr)
  off = rank * 4096
  call MPI_File_write_at(fh, off, a, 4096, MPI_CHARACTER, status, ierr)
  off = 65536 + rank * 8192
  call MPI_File_write_at_all(fh, off, b, 8192, MPI_CHARACTER, status, ierr)
  off = rank * 4096
  call MPI_File_read_at(fh, off, a, 4096, MPI_CHARACTER, status, ierr)
  call MPI_File_close(fh, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(A,I0,A)', 'fortran ', nranks, ' ranks done'
  call MPI_Finalize(ierr)
end program fio
