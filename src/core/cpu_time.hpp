#pragma once
// CPU time, of this process and of the whole node, to tell whether something else ran on
// the node while strata measured it (`strata calibrate`): the node's busy time over an
// interval, less what strata's own ranks used, over the interval's core time.
namespace strata {

// This process's user and system CPU seconds so far, every thread included.
double process_cpu_seconds();

// The node's busy CPU seconds so far, summed over its cores (/proc/stat: user, nice,
// system, irq, softirq and steal; a hypervisor's steal counts, since it too takes cores
// away); negative where /proc/stat cannot be read.
double node_busy_cpu_seconds();

}  // namespace strata
