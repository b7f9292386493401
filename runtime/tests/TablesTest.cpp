// Programs as static tables (runtime/pfrt_tables.h): a hand-written table set replays into the
// same program as the same rows written through the builder API, with every op kind and field;
// every malformed table set is an error that names the table and row.
#include "runtime/ProgramIO.h"
#include "runtime/pfrt_tables.h"
#include "runtime/tests/TestUtil.h"

#include "proto/stream_program.pb.h"

#include <string>
#include <vector>

namespace pfrt {
namespace test {
namespace {

// Two devices: compute, send/recv, record/wait, a bubble with its fill chunk, a copy, an
// alloc/free pair; one training job of two MLP layers with every job field set.
struct Rows {
  std::vector<pfrt_device_desc> devices;
  std::vector<pfrt_table_stream> streams;
  std::vector<pfrt_table_event> events;
  std::vector<pfrt_table_job> jobs;
  std::vector<pfrt_fill_layer_desc> layers;
  std::vector<pfrt_bubble_desc> bubbles;
  std::vector<pfrt_fill_chunk_desc> chunks;
  std::vector<pfrt_table_op> ops;

  Rows() {
    for (uint32_t d = 0; d < 2; ++d) {
      pfrt_device_desc dd{};
      dd.stage = d;
      dd.memory_bytes = 8ull << 30;
      dd.static_bytes = 1ull << 30;
      dd.planned_iteration_us = 9000;
      dd.forward_us = 1000;
      dd.backward_us = 2000;
      dd.gemm_dim = 256;
      devices.push_back(dd);
      streams.push_back({d, PFRT_STREAM_MAIN, PFRT_PRIORITY_HIGH, "main"});
      streams.push_back({d, PFRT_STREAM_FILL, PFRT_PRIORITY_LOW, "fill"});
      streams.push_back({d, PFRT_STREAM_COPY, PFRT_PRIORITY_DEFAULT, "copy"});
      events.push_back({d, "bubble"});
    }
    pfrt_table_job job{};
    job.desc.name = "mlp";
    job.desc.kind = PFRT_FILL_TRAINING;
    job.desc.samples = 64;
    job.desc.samples_per_iteration = 8;
    job.desc.seed = 7;
    job.desc.learning_rate = 0.05f;
    job.first_layer = 0;
    job.num_layers = 2;
    jobs.push_back(job);
    for (int l = 0; l < 2; ++l) {
      pfrt_fill_layer_desc ld{};
      ld.name = l ? "mlp.1" : "mlp.0";
      ld.kind = PFRT_LAYER_MLP;
      ld.in = 32;
      ld.hidden = 64;
      ld.out = 32;
      ld.planned_us_per_sample = 10;
      ld.planned_backward_us_per_sample = 20;
      ld.weight_bytes = 16384;
      ld.activation_bytes_per_sample = 256;
      layers.push_back(ld);
    }
    pfrt_bubble_desc b{};
    b.bubble_id = 0;
    b.kind = PFRT_BUBBLE_STEADY;
    b.planned_start_us = 3000;
    b.planned_duration_us = 2000;
    b.free_bytes = 4ull << 30;
    b.emulate_idle = 1;
    bubbles.push_back(b);
    pfrt_fill_chunk_desc c{};
    c.job = 0;
    c.bubble_id = 0;
    c.layer_begin = 0;
    c.layer_end = 4; // forward and backward of both layers: one step
    c.batch = 8;
    c.planned_us = 1000;
    c.peak_bytes = 1 << 20;
    c.weights_streamed = 1;
    chunks.push_back(c);
    // device 0: F(mb 0) send(1) record bubble(0) B(mb 0) copy alloc free; fill: wait fill
    ops.push_back({0, 0, PFRT_TABLE_COMPUTE, PFRT_COMPUTE_FORWARD, 0, 0, 1000, 0});
    ops.push_back({0, 0, PFRT_TABLE_SEND, 1, 4096, 5, 50, 1000});
    ops.push_back({0, 0, PFRT_TABLE_RECORD, 0, 0, 0, 0, 0});
    ops.push_back({0, 0, PFRT_TABLE_BUBBLE, 0, 0, 0, 0, 0});
    ops.push_back({0, 0, PFRT_TABLE_RECV, 1, 4096, 6, 50, 5000});
    ops.push_back({0, 0, PFRT_TABLE_COMPUTE, PFRT_COMPUTE_BACKWARD, 0, 0, 2000, 5050});
    ops.push_back({0, 2, PFRT_TABLE_COPY, PFRT_COPY_DEVICE_TO_HOST, 1 << 20, 0, 80, 0});
    ops.push_back({0, 0, PFRT_TABLE_ALLOC, 3, 1 << 16, 0, 0, 0});
    ops.push_back({0, 0, PFRT_TABLE_FREE, 3, 0, 0, 0, 0});
    ops.push_back({0, 1, PFRT_TABLE_WAIT, 0, 0, 0, 0, 0});
    ops.push_back({0, 1, PFRT_TABLE_FILL, 0, 0, 0, 0, 0});
    // device 1: recv F, B send
    ops.push_back({1, 0, PFRT_TABLE_RECV, 0, 4096, 5, 50, 1000});
    ops.push_back({1, 0, PFRT_TABLE_COMPUTE, PFRT_COMPUTE_FORWARD, 0, 0, 1000, 1050});
    ops.push_back({1, 0, PFRT_TABLE_COMPUTE, PFRT_COMPUTE_BACKWARD, 0, 0, 2000, 2050});
    ops.push_back({1, 0, PFRT_TABLE_SEND, 0, 4096, 6, 50, 5000});
  }

  pfrt_program_tables tables() const {
    pfrt_program_tables t{};
    t.version = PFRT_TABLES_VERSION;
    t.name = "tables";
    t.iterations = 2;
    t.seed = 99;
    t.planned_iteration_us = 9000;
    t.devices = devices.data();
    t.num_devices = static_cast<uint32_t>(devices.size());
    t.streams = streams.data();
    t.num_streams = static_cast<uint32_t>(streams.size());
    t.events = events.data();
    t.num_events = static_cast<uint32_t>(events.size());
    t.jobs = jobs.data();
    t.num_jobs = static_cast<uint32_t>(jobs.size());
    t.layers = layers.data();
    t.num_layers = static_cast<uint32_t>(layers.size());
    t.bubbles = bubbles.data();
    t.num_bubbles = static_cast<uint32_t>(bubbles.size());
    t.chunks = chunks.data();
    t.num_chunks = static_cast<uint32_t>(chunks.size());
    t.ops = ops.data();
    t.num_ops = static_cast<uint32_t>(ops.size());
    return t;
  }

  // The same program through the builder API, call by call (the reference).
  ProgramPtr built() const {
    pfrt_program *raw = nullptr;
    EXPECT_EQ(pfrt_program_create("tables", &raw), PFRT_OK);
    ProgramPtr p(raw);
    pfrt_program_set_iterations(raw, 2);
    pfrt_program_set_seed(raw, 99);
    pfrt_program_set_planned_iteration_us(raw, 9000);
    uint32_t id = 0;
    EXPECT_EQ(pfrt_program_add_fill_job(raw, &jobs[0].desc, &id), PFRT_OK);
    for (const pfrt_fill_layer_desc &l : layers)
      EXPECT_EQ(pfrt_fill_job_add_layer(raw, 0, &l), PFRT_OK) << pfrt_last_error();
    for (const pfrt_device_desc &d : devices)
      EXPECT_EQ(pfrt_program_add_device(raw, &d, &id), PFRT_OK);
    for (const pfrt_table_stream &s : streams)
      EXPECT_EQ(pfrt_program_create_stream(raw, s.device, s.role, s.priority, s.name, &id),
                PFRT_OK);
    for (const pfrt_table_event &e : events)
      EXPECT_EQ(pfrt_program_create_event(raw, e.device, e.name, &id), PFRT_OK);
    pfrt_program_enqueue_compute(raw, 0, 0, PFRT_COMPUTE_FORWARD, 0, 0, 1000, 0);
    pfrt_program_enqueue_send(raw, 0, 0, 1, 4096, 5, 50, 1000);
    pfrt_program_enqueue_record(raw, 0, 0, 0);
    pfrt_program_enqueue_bubble(raw, 0, 0, &bubbles[0]);
    pfrt_program_enqueue_recv(raw, 0, 0, 1, 4096, 6, 50, 5000);
    pfrt_program_enqueue_compute(raw, 0, 0, PFRT_COMPUTE_BACKWARD, 0, 0, 2000, 5050);
    pfrt_program_enqueue_copy(raw, 0, 2, PFRT_COPY_DEVICE_TO_HOST, 1 << 20, 80);
    pfrt_program_enqueue_alloc(raw, 0, 0, 3, 1 << 16);
    pfrt_program_enqueue_free(raw, 0, 0, 3);
    pfrt_program_enqueue_wait(raw, 0, 1, 0);
    EXPECT_EQ(pfrt_program_enqueue_fill(raw, 0, 1, &chunks[0]), PFRT_OK) << pfrt_last_error();
    pfrt_program_enqueue_recv(raw, 1, 0, 0, 4096, 5, 50, 1000);
    pfrt_program_enqueue_compute(raw, 1, 0, PFRT_COMPUTE_FORWARD, 0, 0, 1000, 1050);
    pfrt_program_enqueue_compute(raw, 1, 0, PFRT_COMPUTE_BACKWARD, 0, 0, 2000, 2050);
    pfrt_program_enqueue_send(raw, 1, 0, 0, 4096, 6, 50, 5000);
    EXPECT_EQ(pfrt_program_validate(raw), PFRT_OK) << pfrt_last_error();
    return p;
  }
};

std::string serialized(const pfrt_program *p) {
  pipefill::rt::StreamProgram proto;
  toProto(p->program, &proto);
  std::string bytes;
  EXPECT_TRUE(proto.SerializeToString(&bytes));
  return bytes;
}

std::string fromTablesError(const pfrt_program_tables &t, pfrt_status expected) {
  pfrt_program *p = reinterpret_cast<pfrt_program *>(0x1);
  EXPECT_EQ(pfrt_program_from_tables(&t, &p), expected) << pfrt_last_error();
  EXPECT_EQ(p, nullptr);
  return pfrt_last_error();
}

TEST(TablesTest, ReplayEqualsTheBuilderCalls) {
  Rows rows;
  const pfrt_program_tables t = rows.tables();
  pfrt_program *raw = nullptr;
  PFRT_ASSERT_OK(pfrt_program_from_tables(&t, &raw));
  ProgramPtr fromTables(raw);
  ProgramPtr reference = rows.built();
  ASSERT_TRUE(reference);
  EXPECT_EQ(serialized(fromTables.get()), serialized(reference.get()));
  // And it runs: the training job completes its steps.
  ReportPtr r = runOk(fromTables.get(), hostOptions(2));
  ASSERT_TRUE(r);
  EXPECT_GT(r->data.jobs[0].steps, 0u);
}

TEST(TablesTest, MalformedTablesAreErrorsNamingTheRow) {
  Rows rows;
  {
    pfrt_program_tables t = rows.tables();
    t.version = PFRT_TABLES_VERSION + 1;
    EXPECT_NE(fromTablesError(t, PFRT_ERROR_INVALID_ARGUMENT)
                  .find("program tables of version " + std::to_string(PFRT_TABLES_VERSION + 1) +
                        ", this runtime reads version " + std::to_string(PFRT_TABLES_VERSION) +
                        ": regenerate them with this pipefill-translate --to-cpp"),
              std::string::npos);
  }
  {
    Rows bad;
    bad.ops[10].a = 5; // FILL row -> chunk 5 of 1
    EXPECT_NE(fromTablesError(bad.tables(), PFRT_ERROR_INVALID_PROGRAM)
                  .find("program tables: ops[10]: chunk row 5 is beyond the 1 rows of the chunks table"),
              std::string::npos);
  }
  {
    Rows bad;
    bad.ops[3].a = 2; // BUBBLE row -> bubble 2 of 1
    EXPECT_NE(fromTablesError(bad.tables(), PFRT_ERROR_INVALID_PROGRAM).find("ops[3]: bubble row 2"),
              std::string::npos);
  }
  {
    Rows bad;
    bad.jobs[0].num_layers = 3; // layers [0, 3) of 2
    EXPECT_NE(fromTablesError(bad.tables(), PFRT_ERROR_INVALID_PROGRAM).find("jobs[0]: layers [0, 3)"),
              std::string::npos);
  }
  {
    Rows bad;
    bad.ops[0].kind = static_cast<pfrt_table_op_kind>(42);
    EXPECT_NE(fromTablesError(bad.tables(), PFRT_ERROR_INVALID_PROGRAM).find("ops[0]: unknown op kind 42"),
              std::string::npos);
  }
  {
    Rows bad;
    bad.ops[0].b = 1ull << 40; // microbatch does not fit 32 bits
    EXPECT_NE(fromTablesError(bad.tables(), PFRT_ERROR_INVALID_PROGRAM).find("ops[0]: microbatch"),
              std::string::npos);
  }
  {
    Rows bad;
    bad.streams[1].device = 9; // the builder rejects it
    EXPECT_NE(fromTablesError(bad.tables(), PFRT_ERROR_INVALID_ARGUMENT).find("program tables: streams[1]: "),
              std::string::npos);
  }
  {
    pfrt_program_tables t = rows.tables();
    t.ops = nullptr;
    EXPECT_NE(fromTablesError(t, PFRT_ERROR_INVALID_PROGRAM)
                  .find("ops: 15 rows declared but the table is NULL"),
              std::string::npos);
  }
  {
    Rows bad;
    bad.ops.pop_back(); // device 1 never sends back: device 0's receive has no sender
    fromTablesError(bad.tables(), PFRT_ERROR_INVALID_PROGRAM);
  }
  pfrt_program *p = nullptr;
  EXPECT_EQ(pfrt_program_from_tables(nullptr, &p), PFRT_ERROR_INVALID_ARGUMENT);
  const pfrt_program_tables t = rows.tables();
  EXPECT_EQ(pfrt_program_from_tables(&t, nullptr), PFRT_ERROR_INVALID_ARGUMENT);
}

} // namespace
} // namespace test
} // namespace pfrt
