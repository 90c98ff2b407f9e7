#pragma once
// The MPI handles that code above src/comm passes along without calling MPI: a
// communicator (MPI_Comm) to build a Grid or a checkpoint file on, MPI_COMM_WORLD. Every
// level but comm and app reaches MPI through this header and comm's own (Comm, Grid,
// control.hpp); CTest layers checks that no other file includes <mpi.h>.
#include <mpi.h>
