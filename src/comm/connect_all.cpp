#include "comm/connect_all.hpp"

#include <vector>

namespace strata {

void connect_all_pairs(MPI_Comm comm) {
  int size = 1, rank = 0;
  MPI_Comm_size(comm, &size);
  MPI_Comm_rank(comm, &rank);
  if (size == 1 || size > kConnectAllMostRanks) return;
  // one message each way per pair (not an all-to-all of one int: a library may send short
  // all-to-alls by Bruck's algorithm, to log2(size) partners, MPICH from 8 ranks on)
  constexpr int kTag = 7301;
  std::vector<int> received(static_cast<size_t>(size));
  std::vector<MPI_Request> requests;
  requests.reserve(2 * static_cast<size_t>(size));
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    requests.emplace_back();
    MPI_Irecv(&received[static_cast<size_t>(peer)], 1, MPI_INT, peer, kTag, comm, &requests.back());
    requests.emplace_back();
    MPI_Isend(&rank, 1, MPI_INT, peer, kTag, comm, &requests.back());
  }
  MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
}

}  // namespace strata
