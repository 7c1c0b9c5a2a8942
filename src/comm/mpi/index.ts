/**
 * The optional Open MPI transport: the same Communicator as `shm` and `tcp`, with MPI's own tuned
 * collectives doing the work. Needs the addon build/native/paratrain_mpi.node, which `npm ci`
 * builds only where Open MPI's development files are installed (Debian: libopenmpi-dev; mpirun
 * comes with openmpi-bin); without it init() fails with a message saying how to build it.
 *
 *   // every process, started by `mpirun -np N node …`
 *   const comm = await MpiCommunicator.init();   // in the main thread or ONE worker thread
 *   await comm.allreduce(grads, 'mean');          // MPI_Allreduce in place, then ÷ size
 *   const { commMs, bytes } = comm.takeStats();   // idleMs is 0: not measurable from outside MPI
 *   await comm.close();                           // MPI_Finalize (every rank; once per process)
 *
 * Calls: allreduce = MPI_Allreduce(MPI_IN_PLACE); reduceScatter = MPI_Reduce_scatter with the
 * ownedSlice counts (the result is moved from the front of the buffer to the owned slice);
 * allgather = MPI_Allgatherv(MPI_IN_PLACE) with the same counts; broadcast = MPI_Bcast;
 * barrier = MPI_Barrier; send/recv = MPI_Isend/MPI_Irecv polled with MPI_Test, so a thread can
 * have several in flight (two ranks that both send first do not deadlock). 'mean' is the sum
 * divided by the number of ranks. All run on a duplicate of MPI_COMM_WORLD.
 *
 * Threads: MPI is initialised with MPI_THREAD_FUNNELED by the thread that calls init(), and the
 * addon refuses MPI calls from any other thread. Collectives block that thread's event loop until
 * they complete (no timers or I/O run meanwhile), as MPI calls do in C.
 *
 * Failures: an MPI error is thrown as MpiError naming the rank, and the communicator refuses
 * further calls. A rank that exits without close() makes mpirun end the whole job (Open MPI
 * reports which process); abort(reason) ends it at once with MPI_Abort. There are no timeouts:
 * a rank that never joins a collective leaves the others waiting, as in any MPI program.
 */
export { MpiCommunicator, MpiError } from './mpiCommunicator.ts';
export { loadMpiAddon, mpiAddonPath, mpiUnavailableReason, type MpiAddon, type MpiInitInfo } from './addon.ts';
