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
#include <deque>
#include <vector>

namespace pipefill {

/// Kahn's algorithm over `edges` (node -> successors). Returns -1 when the
/// graph is acyclic; otherwise the first node that can never run whose stream
/// predecessor (`streamPred(v)`, -1 for none) is not also stuck: the head of
/// a stuck stream, the op a message should name.
template <typename StreamPred>
int64_t findBlockedNode(const std::vector<std::vector<uint32_t>> &edges, StreamPred streamPred) {
  const size_t n = edges.size();
  std::vector<uint32_t> indeg(n, 0);
  for (const auto &out : edges)
    for (uint32_t v : out)
      ++indeg[v];
  std::deque<uint32_t> ready;
  for (uint32_t v = 0; v < n; ++v)
    if (!indeg[v])
      ready.push_back(v);
  size_t done = 0;
  while (!ready.empty()) {
    uint32_t u = ready.front();
    ready.pop_front();
    ++done;
    for (uint32_t v : edges[u])
      if (--indeg[v] == 0)
        ready.push_back(v);
  }
  if (done == n)
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
