#pragma once
// What a collective over a group of p ranks costs each rank, with the bandwidth-optimal
// algorithms: the bytes it sends per byte of payload (ring all-reduce = reduce-scatter
// then all-gather: 2(p-1)/p; pipelined broadcast and reduce: (p-1)/p; ring all-gather and
// reduce-scatter of an n-value block: p-1 blocks; a send: 1) and the messages it waits for
// one after another (2(p-1), p-1, p-1, 1). Comm counts its wire bytes with these factors
// (CommStats::wire_bytes, the quantity the V1D/V2D formulas count), and the planner turns
// the same counts into time with a machine's latency alpha and inverse bandwidth beta:
//   t = steps * alpha + wire factor * payload * beta.
namespace strata {

enum class Collective { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, Send, AllToAll };

inline double wire_factor(Collective k, int p) {
  if (k == Collective::Send) return 1.0;
  if (p <= 1) return 0.0;
  switch (k) {
    case Collective::AllReduce:
      return 2.0 * (p - 1) / p;
    case Collective::Broadcast:
    case Collective::Reduce:
    case Collective::AllToAll:
      return double(p - 1) / p;  // all-to-all: of the whole send buffer
    default:
      return double(p - 1);  // all-gather, reduce-scatter: per block of the payload
  }
}

inline int latency_steps(Collective k, int p) {
  if (k == Collective::Send) return 1;
  if (p <= 1) return 0;
  return k == Collective::AllReduce ? 2 * (p - 1) : p - 1;
}

inline double collective_seconds(Collective k, int p, double payload_bytes, double alpha, double beta) {
  return latency_steps(k, p) * alpha + wire_factor(k, p) * payload_bytes * beta;
}

}  // namespace strata
