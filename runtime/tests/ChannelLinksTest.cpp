// orderedChannelLinks (runtime/Transport.h): which channels may share one ordered connection (an
// NCCL communicator in rank mode), checked against an exact count computed independently.
#include "runtime/Transport.h"
#include "runtime/tests/TestUtil.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>

namespace pfrt {
namespace test {

namespace {

// The longest run of `seq` in decreasing order (O(n^2) dynamic programming): by Dilworth's
// theorem, the fewest increasing runs that `seq` splits into.
size_t longestDecreasing(const std::vector<size_t> &seq) {
  std::vector<size_t> best(seq.size(), 1);
  size_t longest = 0;
  for (size_t i = 0; i < seq.size(); ++i) {
    for (size_t j = 0; j < i; ++j)
      if (seq[j] > seq[i])
        best[i] = std::max(best[i], best[j] + 1);
    longest = std::max(longest, best[i]);
  }
  return longest;
}

} // namespace

// Links of ordered channels (what NCCL communicators are made for): every link's receives come in
// its send order, every channel is in exactly one link, and there are as few links as the
// permutation allows (checked against the longest decreasing run, computed independently).
TEST(OrderedChannelLinksTest, FewestLinksWhoseReceivesFollowTheirSends) {
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    const size_t n = 1 + rng() % 9;
    std::vector<uint32_t> tags(n), order(n);
    for (size_t i = 0; i < n; ++i)
      tags[i] = order[i] = static_cast<uint32_t>(10 + i);
    std::shuffle(order.begin(), order.end(), rng);
    const Program program = twoDeviceSends(tags, order);
    std::map<uint32_t, size_t> recvPos;
    for (size_t i = 0; i < n; ++i)
      recvPos[order[i]] = i;
    std::vector<size_t> seq;
    for (uint32_t t : tags)
      seq.push_back(recvPos[t]);
    const std::vector<std::vector<ChannelKey>> links = orderedChannelLinks(program);
    EXPECT_EQ(links.size(), longestDecreasing(seq)) << "round " << round;
    std::set<uint32_t> seen;
    for (const auto &link : links) {
      for (size_t i = 0; i < link.size(); ++i) {
        EXPECT_TRUE(seen.insert(link[i].tag).second) << "tag " << link[i].tag << " twice";
        EXPECT_EQ(link[i].src, 0u);
        EXPECT_EQ(link[i].dst, 1u);
        if (i > 0) {
          EXPECT_LT(link[i - 1].tag, link[i].tag) << "not in send order";
          EXPECT_LT(recvPos[link[i - 1].tag], recvPos[link[i].tag]) << "received out of order";
        }
      }
    }
    EXPECT_EQ(seen.size(), n);
  }
}

TEST(OrderedChannelLinksTest, ChannelsOfDifferentStreamsNeverShareALink) {
  // In order at both ends, but tag 2 is sent from stream 1 and tag 4 received on stream 1: their
  // ops are issued by other threads, in no fixed order with the rest.
  const Program program =
      twoDeviceSends({1, 2, 3, 4}, {1, 2, 3, 4}, {{2, 1}}, {{4, 1}});
  const std::vector<std::vector<ChannelKey>> links = orderedChannelLinks(program);
  ASSERT_EQ(links.size(), 3u);
  std::map<uint32_t, size_t> linkOf;
  for (size_t l = 0; l < links.size(); ++l)
    for (const ChannelKey &k : links[l])
      linkOf[k.tag] = l;
  EXPECT_EQ(linkOf[1], linkOf[3]);
  EXPECT_NE(linkOf[1], linkOf[2]);
  EXPECT_NE(linkOf[1], linkOf[4]);
  EXPECT_NE(linkOf[2], linkOf[4]);
}

TEST(OrderedChannelLinksTest, OneLinkPerDirectionBetweenNeighbouringStagesOfGPipeAnd1F1B) {
  for (auto schedule : {samples::PipelineSpec::GPipe, samples::PipelineSpec::OneFOneB})
    for (uint32_t stages : {2u, 5u}) {
      samples::PipelineSpec spec;
      spec.schedule = schedule;
      spec.stages = stages;
      spec.microbatches = 12;
      spec.fill = false;
      ProgramPtr program = buildOk(spec);
      const std::vector<std::vector<ChannelKey>> links =
          orderedChannelLinks(program->program);
      EXPECT_EQ(links.size(), 2u * (stages - 1)) << stages << " stages";
      for (const auto &link : links) {
        EXPECT_EQ(link.size(), 12u);
        EXPECT_EQ(std::max(link.front().src, link.front().dst) -
                      std::min(link.front().src, link.front().dst),
                  1u);
      }
    }
}

} // namespace test
} // namespace pfrt
