#pragma once
// The threads one rank runs on and the CPUs it may run them on. A CPU rank's threads are
// OpenMP's: Kokkos' host kernels, OpenBLAS's products and oneDNN's bf16 products share
// one pool of them, whose size the process sets once at start (cli/thread_choice).
#include <string>

namespace strata {

// The size of the rank's thread pool (Kokkos' host execution space).
int rank_threads();

// The CPUs in this process's affinity mask (what the launcher gave it), and the online
// CPUs of the node.
int cores_given();
int cores_online();

// Where the rank's threads run: its CPUs as a list ("0-1", "0,2,4") and OpenMP's binding
// ("OMP_PROC_BIND=close OMP_PLACES=cores", or "threads not bound").
std::string thread_binding();

// Whether OpenMP's waiting threads sleep (OMP_WAIT_POLICY=passive): right where the node's
// threads outnumber its cores, a cost of 10-40% a threaded step where they do not (every
// parallel region, thousands a step, wakes its threads through the kernel).
bool passive_wait_policy();

// For its lifetime, the products (OpenBLAS and oneDNN, which take OpenMP's thread count at
// each call) run on n threads; Kokkos' kernels keep the rank's pool. For `strata
// calibrate`'s rates per thread count. Nothing in CUDA builds.
class ProductThreads {
 public:
  explicit ProductThreads(int n);
  ~ProductThreads();
  ProductThreads(const ProductThreads&) = delete;
  ProductThreads& operator=(const ProductThreads&) = delete;

 private:
  int before_ = 1;
};

}  // namespace strata
