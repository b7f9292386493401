//===- Graph.h - deadlock check on a dependency graph ----------*- C++ -*-===//
//
// The one deadlock rule of the stream model: the dependency graph of one
// iteration (stream order, record -> wait, send -> recv) must be acyclic.
// The runtime validator and the compiler's checks call the same function.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEFILL_SUPPORT_GRAPH_H
#define PIPEFILL_SUPPORT_GRAPH_H

#include <cstdint>
#include <vector>

namespace pipefill {

/// A directed graph in compressed sparse row form: the successors of node u
/// are targets[first[u]] .. targets[first[u + 1]). Two allocations for the
/// whole graph instead of one per node: the compiler's deadlock check builds
/// one per pipeline with a node per instruction (10^5-10^6).
struct CsrGraph {
  std::vector<uint32_t> first{0};
  std::vector<uint32_t> targets;

  /// Starts the next node; its successors are the targets added until the
  /// next call (or finish()).
  void beginNode() {
    first.back() = static_cast<uint32_t>(targets.size());
    first.push_back(0);
  }
  void finish() { first.back() = static_cast<uint32_t>(targets.size()); }

  struct Range {
    const uint32_t *b, *e;
    const uint32_t *begin() const { return b; }
    const uint32_t *end() const { return e; }
  };
  size_t size() const { return first.size() - 1; }
  Range operator[](size_t u) const {
    return {targets.data() + first[u], targets.data() + first[u + 1]};
  }
};

/// Kahn's algorithm over `edges` (node -> successors: a
/// std::vector<std::vector<uint32_t>> or a CsrGraph). Returns -1 when the
/// graph is acyclic; otherwise the first node that can never run whose stream
/// predecessor (`streamPred(v)`, -1 for none) is not also stuck: the head of
/// a stuck stream, the op a message should name. Which nodes are stuck does
/// not depend on the order the ready ones are taken in.
template <typename Graph, typename StreamPred>
int64_t findBlockedNode(const Graph &edges, StreamPred streamPred) {
  const size_t n = edges.size();
  std::vector<uint32_t> indeg(n, 0);
  for (size_t u = 0; u < n; ++u)
    for (uint32_t v : edges[u])
      ++indeg[v];
  // A FIFO in one vector: every node enters it at most once.
  std::vector<uint32_t> ready;
  ready.reserve(n);
  for (uint32_t v = 0; v < n; ++v)
    if (!indeg[v])
      ready.push_back(v);
  for (size_t head = 0; head < ready.size(); ++head)
    for (uint32_t v : edges[ready[head]])
      if (--indeg[v] == 0)
        ready.push_back(v);
  if (ready.size() == n)
    return -1;
  int64_t any = -1;
  for (uint32_t v = 0; v < n; ++v) {
    if (!indeg[v])
      continue;
    if (any < 0)
      any = v;
    int64_t p = streamPred(v);
    if (p >= 0 && indeg[static_cast<size_t>(p)])
      continue;
    return v;
  }
  return any;
}

} // namespace pipefill

#endif // PIPEFILL_SUPPORT_GRAPH_H
