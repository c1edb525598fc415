# An MPI ping-pong and allreduce, run by crates/verbs/tests/suites.rs with two ranks
# under Open MPI (pml ucx) over librocelink_verbs.so; each rank prints what it checked.
from mpi4py import MPI
from array import array
comm = MPI.COMM_WORLD
r = comm.Get_rank()
n = 200
size = 65536
msg = bytearray((i * 7 + 3) % 251 for i in range(size))
buf = bytearray(size) if r == 1 else bytearray(msg)
t = MPI.Wtime()
for i in range(n):
    if r == 0:
        comm.Send([buf, MPI.BYTE], dest=1, tag=i); comm.Recv([buf, MPI.BYTE], source=1, tag=i)
    else:
        comm.Recv([buf, MPI.BYTE], source=0, tag=i); comm.Send([buf, MPI.BYTE], dest=0, tag=i)
dt = MPI.Wtime() - t
x = array('q', [r + 1]) * (1 << 16)
s = array('q', [0]) * (1 << 16)
comm.Allreduce([x, MPI.INT64_T], [s, MPI.INT64_T], op=MPI.SUM)
print(f"rank {r}: pingpong {n} x {size} B intact={buf == msg} {dt / n / 2 * 1e6:.1f} us one-way; "
      f"allreduce {len(s)} sums right={all(v == 3 for v in s)}", flush=True)
