#include "cli/thread_choice.hpp"

#include <cstdlib>
#include <cstring>

#include "core/error.hpp"
#include "core/rank_threads.hpp"

#if !defined(KOKKOS_ENABLE_CUDA)
#include <cblas.h>
#include <omp.h>
#endif

namespace strata {
namespace {

ThreadChoice g_choice;

int parse_count(const std::string& text, const char* what) {
  char* end = nullptr;
  const long n = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || n < 1 || n > 4096)
    throw UserError(std::string(what) + " wants a whole number of threads >= 1, got '" + text + "'");
  return int(n);
}

}  // namespace

ThreadChoice choose_threads(std::vector<char*>& args, int ranks_on_node) {
  ThreadChoice c;
  std::string given;
  for (size_t i = 0; i < args.size();) {
    const std::string a = args[i];
    if (a.rfind("--kokkos-threads", 0) == 0 || a.rfind("--kokkos-num-threads", 0) == 0)
      throw UserError("set a rank's threads with --threads N (Kokkos, OpenBLAS and oneDNN alike), not " + a);
    if (a == "--threads") {
      if (i + 1 >= args.size()) throw UserError("--threads wants a number of threads");
      given = args[i + 1];
      args.erase(args.begin() + long(i), args.begin() + long(i) + 2);
    } else if (a.rfind("--threads=", 0) == 0) {
      given = a.substr(std::strlen("--threads="));
      args.erase(args.begin() + long(i));
    } else {
      ++i;
    }
  }
#if defined(KOKKOS_ENABLE_CUDA)
  (void)ranks_on_node;
  if (!given.empty()) parse_count(given, "--threads");
  c.why = "CUDA build: host work on one thread";
  return c;
#else
  const char* env = std::getenv("OMP_NUM_THREADS");
  if (!given.empty()) {
    c.count = parse_count(given, "--threads");
    c.why = "--threads";
  } else if (env && *env) {
    const std::string first = std::string(env).substr(0, std::string(env).find(','));
    c.count = parse_count(first, "OMP_NUM_THREADS");
    c.why = "OMP_NUM_THREADS";
  } else if (cores_given() < cores_online()) {
    c.count = cores_given();
    c.why = "the rank's CPUs";
  } else {
    c.count = std::max(1, cores_online() / ranks_on_node);
    c.why = std::to_string(cores_online()) + " CPUs shared by " + std::to_string(ranks_on_node) + " ranks";
  }
  return c;
#endif
}

void apply_threads(const ThreadChoice& choice) {
#if !defined(KOKKOS_ENABLE_CUDA)
  omp_set_num_threads(choice.count);
  openblas_set_num_threads(choice.count);
#endif
  g_choice = choice;
}

const ThreadChoice& chosen_threads() { return g_choice; }

}  // namespace strata
