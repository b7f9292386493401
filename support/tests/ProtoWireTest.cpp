// WireWriter (support/ProtoWire.h) against protobuf's own serializer: the
// stream program's messages, filled with random values (zeros, negatives,
// -0.0, values past 32 bits), written field by field must give exactly the
// bytes SerializeToString gives. codegen/StreamProgramWire.cpp relies on it
// to write programs equal to those written through the messages.
#include "support/ProtoWire.h"

#include "proto/stream_program.pb.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

namespace pipefill {
namespace {

class Values {
public:
  explicit Values(uint32_t seed) : rng(seed) {}
  /// Zero a third of the time (the case proto3 leaves out), else small,
  /// else anything.
  uint64_t u64() {
    switch (rng() % 3) {
    case 0:
      return 0;
    case 1:
      return rng() % 300;
    default:
      return (uint64_t(rng()) << 32) | rng();
    }
  }
  uint32_t u32() { return static_cast<uint32_t>(u64()); }
  int32_t i32() {
    switch (rng() % 4) {
    case 0:
      return 0;
    case 1:
      return -1;
    case 2:
      return -static_cast<int32_t>(rng() % 1000000);
    default:
      return static_cast<int32_t>(rng());
    }
  }
  double f64() {
    switch (rng() % 6) {
    case 0:
      return 0.0;
    case 1:
      return -0.0;
    case 2:
      return std::numeric_limits<double>::infinity();
    case 3:
      return -double(rng()) / 7.0;
    default:
      return double(rng()) * 1e3 / 3.0;
    }
  }
  bool coin() { return rng() % 2 == 0; }

private:
  std::mt19937 rng;
};

std::string written(const WireWriter &w) { return std::string(w.bytes()); }

TEST(ProtoWire, FillChunkOpLikeSerializeToString) {
  Values v(1);
  for (int trial = 0; trial < 2000; ++trial) {
    rt::FillChunkOp m;
    m.set_job(v.u32());
    m.set_bubble_id(v.u32());
    m.set_layer_begin(v.u32());
    m.set_layer_end(v.u32());
    m.set_batch(v.u32());
    m.set_sample_begin(v.u64());
    m.set_iteration_offset(v.i32());
    m.set_weights(v.coin() ? rt::FillChunkOp::WEIGHTS_STREAMED : rt::FillChunkOp::WEIGHTS_RESIDENT);
    m.set_activations(v.coin() ? rt::FillChunkOp::ACTIVATIONS_HOST
                               : rt::FillChunkOp::ACTIVATIONS_DEVICE);
    m.set_planned_us(v.f64());
    m.set_peak_bytes(v.u64());
    m.set_period(v.u32());
    m.set_phase(v.u32());
    char buf[13 * WireWriter::kMaxScalarFieldBytes];
    WireWriter w(buf);
    w.u32(1, m.job());
    w.u32(2, m.bubble_id());
    w.u32(3, m.layer_begin());
    w.u32(4, m.layer_end());
    w.u32(5, m.batch());
    w.u64(6, m.sample_begin());
    w.i32(7, m.iteration_offset());
    w.i32(8, m.weights());
    w.i32(9, m.activations());
    w.f64(10, m.planned_us());
    w.u64(11, m.peak_bytes());
    w.u32(12, m.period());
    w.u32(13, m.phase());
    ASSERT_EQ(written(w), m.SerializeAsString()) << m.ShortDebugString();
  }
}

TEST(ProtoWire, NestedAndEmptyMessagesLikeSerializeToString) {
  Values v(2);
  for (int trial = 0; trial < 1000; ++trial) {
    // A stream op with a compute case, possibly all zero: the case is still
    // written (an empty message, length 0).
    rt::StreamOp op;
    rt::ComputeOp *c = op.mutable_compute();
    c->set_kind(static_cast<rt::ComputeOp::Kind>(v.u32() % 7));
    c->set_microbatch(v.u32());
    c->set_chunk(v.u32());
    c->set_planned_us(v.f64());
    c->set_planned_start_us(v.f64());
    char body[5 * WireWriter::kMaxScalarFieldBytes];
    WireWriter b(body);
    b.i32(1, c->kind());
    b.u32(2, c->microbatch());
    b.u32(3, c->chunk());
    b.f64(4, c->planned_us());
    b.f64(5, c->planned_start_us());
    char outer[sizeof body + 16];
    WireWriter w(outer);
    w.bytes(1, b.bytes());
    ASSERT_EQ(written(w), op.SerializeAsString()) << op.ShortDebugString();
  }
  rt::StreamOp empty;
  empty.mutable_record();
  char buf[4];
  WireWriter w(buf);
  w.bytes(4, std::string_view());
  EXPECT_EQ(written(w), empty.SerializeAsString());
  EXPECT_EQ(w.size(), 2u); // the tag and a zero length
}

TEST(ProtoWire, StringsAndBoolsLikeSerializeToString) {
  Values v(3);
  for (int trial = 0; trial < 200; ++trial) {
    rt::ProgramStream s;
    std::string name(v.u32() % 200, 'x'); // lengths past one varint byte too
    s.set_name(name);
    s.set_role(static_cast<rt::ProgramStream::Role>(v.u32() % 4));
    s.set_priority(static_cast<rt::ProgramStream::Priority>(v.u32() % 4));
    char buf[256];
    WireWriter w(buf);
    w.string(1, s.name());
    w.i32(2, s.role());
    w.i32(3, s.priority());
    ASSERT_EQ(written(w), s.SerializeAsString());

    rt::BubbleOp b;
    b.set_bubble_id(v.u32());
    b.set_planned_duration_us(v.f64());
    b.set_emulate_idle(v.coin());
    char bb[64];
    WireWriter x(bb);
    x.u32(1, b.bubble_id());
    x.f64(4, b.planned_duration_us());
    x.boolean(6, b.emulate_idle());
    ASSERT_EQ(written(x), b.SerializeAsString());
  }
}

TEST(ProtoWire, VarintSizes) {
  for (uint64_t v : {uint64_t(0), uint64_t(127), uint64_t(128), uint64_t(16383), uint64_t(16384),
                     uint64_t(1) << 35, ~uint64_t(0)}) {
    char buf[10];
    WireWriter w(buf);
    w.varint(v);
    EXPECT_EQ(w.size(), WireWriter::varintSize(v)) << v;
  }
}

} // namespace
} // namespace pipefill
