#include "core/cpu_time.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>

namespace strata {

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const auto seconds = [](const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

double node_busy_cpu_seconds() {
  std::FILE* f = std::fopen("/proc/stat", "r");
  if (!f) return -1;
  unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  const int n = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &system, &idle, &iowait,
                            &irq, &softirq, &steal);
  std::fclose(f);
  if (n < 7) return -1;
  return double(user + nice + system + irq + softirq + steal) / double(sysconf(_SC_CLK_TCK));
}

}  // namespace strata
