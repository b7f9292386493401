//===- ExportCpp.cpp - pfstream -> C++ tables for a standalone binary -----===//
//
// `pipefill-translate --to-cpp` writes the module's stream program as
// constant tables of the runtime's row structs (runtime/pfrt_tables.h) and a
// main() that hands them to pfrt_tables_main(). The replay loop and the
// command line live in the runtime, so a generated file is data only and
// compiles in seconds even for thousands of ops; the tables come from the same
// StreamProgram message as --to-stream-program, so a generated binary and the
// interpreter build the same program.
//
//===----------------------------------------------------------------------===//
#include "codegen/StreamProgramBuilder.h"
#include "codegen/Translate.h"
#include "support/Xml.h"

#include "llvm/Support/FormatVariadic.h"

#include <cstdio>
#include <string>

using namespace mlir;

namespace pipefill {
namespace {

/// A C string literal (control and non-ASCII bytes as octal escapes).
std::string cstr(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\%03o", static_cast<unsigned>(c));
      out += esc;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

/// A double that reads back exactly.
std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".eEni") == std::string::npos)
    s += ".0"; // a double literal, not an integer
  return s;
}

/// Emits `const T name[] = {rows};` (one placeholder row when empty, since C++
/// has no empty arrays) and returns the row count.
template <class F>
unsigned table(llvm::raw_ostream &os, const char *type, const char *name, F rows) {
  std::string body;
  llvm::raw_string_ostream bs(body);
  unsigned n = rows(bs);
  os << "const " << type << " " << name << "[] = {\n" << (n ? body : "  {},\n") << "};\n";
  return n;
}

void emitDevices(llvm::raw_ostream &os, const rt::StreamProgram &p) {
  table(os, "pfrt_device_desc", "kDevices", [&](llvm::raw_ostream &o) {
    for (const rt::DeviceProgram &d : p.devices()) {
      const rt::StageCalibration &c = d.calibration();
      o << llvm::formatv("  {{{0}u, {1}ull, {2}ull, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, "
                         "{11}, {12}, {13}u},\n",
                         d.stage(), d.memory_bytes(), d.static_bytes(),
                         num(d.planned_iteration_us()), num(d.p2p_latency_us()),
                         num(d.p2p_bandwidth_gbps()), num(d.pcie_bandwidth_gbps()),
                         num(c.forward_us()), num(c.backward_us()), num(c.backward_input_us()),
                         num(c.backward_weight_us()), num(c.allreduce_us()),
                         num(c.optimizer_us()), c.gemm_dim());
    }
    return static_cast<unsigned>(p.devices_size());
  });
  table(os, "pfrt_table_stream", "kStreams", [&](llvm::raw_ostream &o) {
    unsigned n = 0;
    for (int d = 0; d < p.devices_size(); ++d)
      for (const rt::ProgramStream &st : p.devices(d).streams()) {
        o << llvm::formatv("  {{{0}u, (pfrt_stream_role){1}, (pfrt_priority){2}, {3}},\n", d,
                           (int)st.role(), (int)st.priority(), cstr(st.name()));
        ++n;
      }
    return n;
  });
  table(os, "pfrt_table_event", "kEvents", [&](llvm::raw_ostream &o) {
    unsigned n = 0;
    for (int d = 0; d < p.devices_size(); ++d)
      for (const rt::ProgramEvent &e : p.devices(d).events()) {
        o << llvm::formatv("  {{{0}u, {1}},\n", d, cstr(e.name()));
        ++n;
      }
    return n;
  });
}

void emitJobs(llvm::raw_ostream &os, const rt::StreamProgram &p) {
  table(os, "pfrt_fill_layer_desc", "kLayers", [&](llvm::raw_ostream &o) {
    unsigned n = 0;
    for (const rt::FillWorkload &job : p.fill_jobs())
      for (const rt::FillWorkloadLayer &l : job.layers()) {
        const char *kind = l.has_encoder() ? "PFRT_LAYER_ENCODER"
                           : l.has_mlp()   ? "PFRT_LAYER_MLP"
                                           : "PFRT_LAYER_GEMM_CHAIN";
        o << llvm::formatv("  {{{0}, {1}, {2}u, {3}u, {4}u, {5}u, {6}u, {7}u, {8}u, {9}u, "
                           "{10}, {11}, {12}ull, {13}ull},\n",
                           cstr(l.name()), kind,
                           l.has_encoder() ? l.encoder().hidden() : l.mlp().hidden(),
                           l.encoder().heads(), l.encoder().seq(), l.encoder().ffn(),
                           l.mlp().in(), l.mlp().out(), l.gemm_chain().dim(),
                           l.gemm_chain().width(), num(l.planned_us_per_sample()),
                           num(l.planned_backward_us_per_sample()), l.weight_bytes(),
                           l.activation_bytes_per_sample());
        ++n;
      }
    return n;
  });
  table(os, "pfrt_table_job", "kJobs", [&](llvm::raw_ostream &o) {
    unsigned first = 0;
    for (const rt::FillWorkload &job : p.fill_jobs()) {
      o << llvm::formatv("  {{{{{0}, {1}, {2}ull, {3}ull, {4}ull, {5}f}, {6}u, {7}u},\n",
                         cstr(job.name()),
                         job.kind() == rt::FillWorkload::TRAINING ? "PFRT_FILL_TRAINING"
                                                                  : "PFRT_FILL_INFERENCE",
                         job.samples(), job.samples_per_iteration(), job.seed(),
                         num(job.learning_rate()), first, job.layers_size());
      first += static_cast<unsigned>(job.layers_size());
    }
    return static_cast<unsigned>(p.fill_jobs_size());
  });
}

/// Ops in stream order, with the bubbles and fill chunks they point at.
LogicalResult emitOps(llvm::raw_ostream &os, const rt::StreamProgram &p, ModuleOp module) {
  std::string bubbles, chunks, ops;
  llvm::raw_string_ostream bo(bubbles), co(chunks), oo(ops);
  unsigned nb = 0, nc = 0, no = 0;
  for (int d = 0; d < p.devices_size(); ++d) {
    const rt::DeviceProgram &dev = p.devices(d);
    for (int s = 0; s < dev.streams_size(); ++s)
      for (const rt::StreamOp &o : dev.streams(s).ops()) {
        auto row = [&](const char *kind, uint64_t a, uint64_t b, uint64_t c, double x,
                       double y) {
          oo << llvm::formatv("  {{{0}u, {1}u, {2}, {3}ull, {4}ull, {5}ull, {6}, {7}},\n", d,
                              s, kind, a, b, c, num(x), num(y));
          ++no;
        };
        switch (o.op_case()) {
        case rt::StreamOp::kCompute:
          row("PFRT_TABLE_COMPUTE", o.compute().kind(), o.compute().microbatch(),
              o.compute().chunk(), o.compute().planned_us(), o.compute().planned_start_us());
          break;
        case rt::StreamOp::kSend:
          row("PFRT_TABLE_SEND", o.send().peer(), o.send().bytes(), o.send().tag(),
              o.send().planned_us(), o.send().planned_start_us());
          break;
        case rt::StreamOp::kRecv:
          row("PFRT_TABLE_RECV", o.recv().peer(), o.recv().bytes(), o.recv().tag(),
              o.recv().planned_us(), o.recv().planned_start_us());
          break;
        case rt::StreamOp::kRecord:
          row("PFRT_TABLE_RECORD", o.record().event(), 0, 0, 0, 0);
          break;
        case rt::StreamOp::kWait:
          row("PFRT_TABLE_WAIT", o.wait().event(), 0, 0, 0, 0);
          break;
        case rt::StreamOp::kBubble: {
          const rt::BubbleOp &b = o.bubble();
          bo << llvm::formatv("  {{{0}u, (pfrt_bubble_kind){1}, {2}, {3}, {4}ull, {5}},\n",
                              b.bubble_id(), (int)b.kind(), num(b.planned_start_us()),
                              num(b.planned_duration_us()), b.free_bytes(),
                              b.emulate_idle() ? 1 : 0);
          row("PFRT_TABLE_BUBBLE", nb++, 0, 0, 0, 0);
          break;
        }
        case rt::StreamOp::kFill: {
          const rt::FillChunkOp &f = o.fill();
          co << llvm::formatv("  {{{0}u, {1}u, {2}u, {3}u, {4}u, {5}ull, {6}, {7}, {8}, {9}, "
                              "{10}ull, {11}u, {12}u},\n",
                              f.job(), f.bubble_id(), f.layer_begin(), f.layer_end(), f.batch(),
                              f.sample_begin(), f.iteration_offset(),
                              (int)(f.weights() == rt::FillChunkOp::WEIGHTS_STREAMED),
                              (int)(f.activations() == rt::FillChunkOp::ACTIVATIONS_HOST),
                              num(f.planned_us()), f.peak_bytes(), f.period(), f.phase());
          row("PFRT_TABLE_FILL", nc++, 0, 0, 0, 0);
          break;
        }
        case rt::StreamOp::kCopy:
          row("PFRT_TABLE_COPY", o.copy().direction(), o.copy().bytes(), 0,
              o.copy().planned_us(), 0);
          break;
        case rt::StreamOp::kAlloc:
          row("PFRT_TABLE_ALLOC", o.alloc().buffer(), o.alloc().bytes(), 0, 0, 0);
          break;
        case rt::StreamOp::kFree:
          row("PFRT_TABLE_FREE", o.free().buffer(), 0, 0, 0, 0);
          break;
        case rt::StreamOp::OP_NOT_SET:
          return module.emitError() << "device " << d << " stream " << s
                                    << " has an op with no instruction";
        }
      }
  }
  table(os, "pfrt_bubble_desc", "kBubbles", [&](llvm::raw_ostream &o) {
    o << bubbles;
    return nb;
  });
  table(os, "pfrt_fill_chunk_desc", "kChunks", [&](llvm::raw_ostream &o) {
    o << chunks;
    return nc;
  });
  table(os, "pfrt_table_op", "kOps", [&](llvm::raw_ostream &o) {
    o << ops;
    return no;
  });
  return success();
}

} // namespace

LogicalResult exportCpp(ModuleOp module, llvm::raw_ostream &os) {
  rt::StreamProgram p;
  if (failed(buildStreamProgram(module, p)))
    return failure();
  // The name is the JobSpec's: a newline in it would end the comment (support/Xml.h).
  os << "// Generated by pipefill-translate --to-cpp from the stream program '"
     << pipefill::commentSafe(p.name()) << "'.\n// Do not edit: regenerate it from the JobSpec. The runtime replays these tables\n"
     << "// (runtime/pfrt_tables.h); `--help` lists the binary's options.\n"
     << "#include \"runtime/pfrt_tables.h\"\n\nnamespace {\n";
  emitDevices(os, p);
  emitJobs(os, p);
  if (failed(emitOps(os, p, module)))
    return failure();
  auto count = [](const char *name) {
    return llvm::formatv("{0}, sizeof({0}) / sizeof({0}[0])", name).str();
  };
  os << llvm::formatv("\nconst pfrt_program_tables kTables = {{\n"
                      "    PFRT_TABLES_VERSION, {0}, {1}u, {2}ull, {3},\n",
                      cstr(p.name()), p.iterations(), p.seed(), num(p.planned_iteration_us()));
  // Empty tables hold one placeholder row: their counts come from the program.
  auto sized = [&](const char *name, int n) {
    return n ? count(name) : llvm::formatv("{0}, 0", name).str();
  };
  int streams = 0, events = 0, layers = 0, bubbles = 0, chunks = 0, ops = 0;
  for (const rt::DeviceProgram &d : p.devices()) {
    streams += d.streams_size();
    events += d.events_size();
    for (const rt::ProgramStream &st : d.streams())
      for (const rt::StreamOp &o : st.ops()) {
        bubbles += o.has_bubble();
        chunks += o.has_fill();
        ++ops;
      }
  }
  for (const rt::FillWorkload &job : p.fill_jobs())
    layers += job.layers_size();
  os << "    " << sized("kDevices", p.devices_size()) << ",\n"
     << "    " << sized("kStreams", streams) << ",\n"
     << "    " << sized("kEvents", events) << ",\n"
     << "    " << sized("kJobs", p.fill_jobs_size()) << ",\n"
     << "    " << sized("kLayers", layers) << ",\n"
     << "    " << sized("kBubbles", bubbles) << ",\n"
     << "    " << sized("kChunks", chunks) << ",\n"
     << "    " << sized("kOps", ops) << "};\n} // namespace\n\n"
     << "int main(int argc, char **argv) { return pfrt_tables_main(&kTables, argc, argv); }\n";
  return success();
}

} // namespace pipefill
