//===- Trace.cpp - Fill-job queue traces: CSV reader and generator --------===//

#include "algo/cluster/Trace.h"
#include "support/Limits.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace pipefill::cluster {
namespace {

constexpr int kMaxErrors = 20;
const char *kHeader = "arrival_s,model,samples,priority";

std::string trim(const std::string &s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b])))
    ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1])))
    --e;
  return s.substr(b, e - b);
}

std::string lower(std::string s) {
  for (char &c : s)
    c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> split(const std::string &line) {
  std::vector<std::string> fields;
  std::string cur;
  for (char c : line) {
    if (c == ',') {
      fields.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  fields.push_back(trim(cur));
  return fields;
}

/// The JobSpec's range of a FillJob field (support/Limits.cpp): a trace's job
/// becomes one, so the same limits hold.
double fillJobMax(const char *field) {
  const FieldLimit *limit = findFieldLimit(std::string("pipefill.FillJob.") + field);
  return limit ? limit->max : 0;
}

/// Decimal notation only: strtod also reads "0x10", "inf" and "nan".
bool parseDouble(const std::string &text, double &out) {
  if (text.empty() || !std::all_of(text.begin(), text.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' ||
               c == 'E' || c == '+' || c == '-';
      }))
    return false;
  const char *begin = text.c_str();
  char *end = nullptr;
  errno = 0;
  double v = std::strtod(begin, &end);
  if (end != begin + text.size() || errno == ERANGE || !std::isfinite(v))
    return false;
  out = v;
  return true;
}

bool parseInt(const std::string &text, int64_t &out) {
  if (text.empty())
    return false;
  const char *begin = text.c_str();
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(begin, &end, 10);
  if (end != begin + text.size() || errno == ERANGE)
    return false;
  out = v;
  return true;
}

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

/// splitmix64: a fixed, portable 64-bit generator.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in (0, 1).
  double uniform() { return (double(next() >> 11) + 0.5) * 0x1.0p-53; }
  double exponential(double rate) { return -std::log(uniform()) / rate; }
  double normal() {
    double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

} // namespace

bool parseTrace(const std::string &text, const std::string &file,
                const ModelResolver &models, std::vector<TraceJob> &out,
                std::string &error) {
  out.clear();
  error.clear();
  int errors = 0;
  auto report = [&](int line, const std::string &message) {
    if (errors < kMaxErrors)
      error += file + ":" + std::to_string(line) + ": error: " + message + "\n";
    else if (errors == kMaxErrors)
      error += file + ": error: too many errors, giving up\n";
    ++errors;
  };

  std::istringstream in(text);
  std::string raw;
  int lineNo = 0;
  bool sawHeader = false;
  double lastArrival = 0;
  int lastArrivalLine = 0;
  while (std::getline(in, raw)) {
    ++lineNo;
    if (!raw.empty() && raw.back() == '\r')
      raw.pop_back();
    // A UTF-8 byte-order mark (spreadsheet exports) before the header: an invisible
    // character the header comparison would show as "got 'arrival_s,...'".
    if (lineNo == 1 && raw.compare(0, 3, "\xEF\xBB\xBF") == 0)
      raw.erase(0, 3);
    std::string line = trim(raw);
    if (line.empty() || line[0] == '#')
      continue;
    if (!sawHeader) {
      std::string header;
      for (const std::string &f : split(line))
        header += (header.empty() ? "" : ",") + lower(f);
      if (header != kHeader) {
        report(lineNo, "expected the header '" + std::string(kHeader) +
                           "', got '" + line + "'");
        break;
      }
      sawHeader = true;
      continue;
    }
    std::vector<std::string> f = split(line);
    if (f.size() != 4) {
      report(lineNo, "expected 4 comma-separated fields (" +
                         std::string(kHeader) + "), got " +
                         std::to_string(f.size()));
      continue;
    }
    TraceJob job;
    job.line = lineNo;
    bool ok = true;
    if (!parseDouble(f[0], job.arrivalS)) {
      report(lineNo, "arrival_s '" + f[0] + "' is not a number");
      ok = false;
    } else if (job.arrivalS < 0) {
      report(lineNo, "arrival_s must be non-negative (got " + f[0] + ")");
      ok = false;
    } else if (job.arrivalS > fillJobMax("arrival_us") / 1e6) {
      report(lineNo, "arrival_s must be at most " + num(fillJobMax("arrival_us") / 1e6) +
                         " (a JobSpec's arrival_us limit; got " + f[0] + ")");
      ok = false;
    } else if (lastArrivalLine && job.arrivalS < lastArrival) {
      report(lineNo, "arrival_s " + f[0] +
                         " is earlier than the previous job's (" +
                         num(lastArrival) + " at line " +
                         std::to_string(lastArrivalLine) +
                         "); the trace must be sorted by arrival time");
      ok = false;
    }
    if (ok) {
      lastArrival = job.arrivalS;
      lastArrivalLine = lineNo;
    }
    std::string canonical = f[1].empty() ? "" : models.resolve(f[1]);
    if (f[1].empty()) {
      report(lineNo, "the model name is empty");
      ok = false;
    } else if (canonical.empty()) {
      report(lineNo, "unknown model '" + f[1] + "'; known models: " +
                         models.known);
      ok = false;
    }
    job.model = canonical;
    if (!parseInt(f[2], job.samples)) {
      report(lineNo, "samples '" + f[2] + "' is not an integer");
      ok = false;
    } else if (job.samples < 1) {
      report(lineNo, "samples must be a positive integer (got " + f[2] + ")");
      ok = false;
    } else if (double(job.samples) > fillJobMax("samples")) {
      report(lineNo, "samples must be at most " + num(fillJobMax("samples")) +
                         " (a JobSpec's limit; got " + f[2] + ")");
      ok = false;
    }
    if (!f[3].empty()) {
      if (!parseDouble(f[3], job.priority)) {
        report(lineNo, "priority '" + f[3] + "' is not a number");
        ok = false;
      } else if (!(job.priority > 0)) {
        report(lineNo, "priority must be positive (got " + f[3] + ")");
        ok = false;
      } else if (job.priority > fillJobMax("priority")) {
        report(lineNo, "priority must be at most " + num(fillJobMax("priority")) +
                           " (a JobSpec's limit; got " + f[3] + ")");
        ok = false;
      }
    }
    if (ok)
      out.push_back(job);
  }
  if (!sawHeader && errors == 0)
    report(lineNo ? lineNo : 1, "the trace is empty; expected the header '" +
                                    std::string(kHeader) + "'");
  if (errors) {
    if (!error.empty() && error.back() == '\n')
      error.pop_back();
    return false;
  }
  return true;
}

bool readTraceFile(const std::string &path, const ModelResolver &models,
                   std::vector<TraceJob> &out, std::string &error) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    error = path + ": error: is a directory, not a trace file";
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = path + ": error: cannot open the trace file";
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return parseTrace(ss.str(), path, models, out, error);
}

std::string formatTrace(const std::vector<TraceJob> &jobs) {
  std::string out = std::string(kHeader) + "\n";
  std::vector<char> buf(256);
  for (const TraceJob &j : jobs) {
    // Sized to the line: a long model name or a huge arrival used to be cut
    // at 256 bytes into a line the reader refuses.
    auto format = [&] {
      return std::snprintf(buf.data(), buf.size(), "%.3f,%s,%lld,%g\n", j.arrivalS,
                           j.model.c_str(), static_cast<long long>(j.samples), j.priority);
    };
    int n = format();
    if (n >= 0 && size_t(n) >= buf.size()) {
      buf.resize(size_t(n) + 1);
      n = format();
    }
    if (n > 0)
      out.append(buf.data(), size_t(n));
  }
  return out;
}

bool generateTrace(const TraceGenOptions &opts,
                   const std::vector<std::string> &models,
                   const std::vector<double> &usefulSPerSample,
                   std::vector<TraceJob> &out, std::string &error) {
  out.clear();
  if (models.empty() || models.size() != usefulSPerSample.size()) {
    error = "the trace generator needs at least one model with its "
            "per-sample cost";
    return false;
  }
  if (opts.jobs < 0 || opts.jobs > kMaxGeneratedJobs || !(opts.jobsPerHour > 0) ||
      !(opts.medianGpuSeconds > 0) || !(opts.sigma >= 0) ||
      !(opts.highPriorityFraction >= 0 && opts.highPriorityFraction <= 1) ||
      !(opts.highPriority > 0)) {
    error = "trace generator options out of range: jobs in [0, 10^8], rate > 0, "
            "median > 0, sigma >= 0, high-priority fraction in [0, 1], "
            "high priority > 0";
    return false;
  }
  std::vector<double> w = opts.weights;
  if (w.empty())
    w.assign(models.size(), 1.0);
  if (w.size() != models.size()) {
    error = "the trace generator got " + std::to_string(w.size()) +
            " weights for " + std::to_string(models.size()) + " models";
    return false;
  }
  double total = 0;
  for (double x : w) {
    if (!(x >= 0)) {
      error = "model weights must be non-negative";
      return false;
    }
    total += x;
  }
  if (!(total > 0)) {
    error = "model weights must not all be zero";
    return false;
  }
  for (double u : usefulSPerSample)
    if (!(u > 0)) {
      error = "every model needs a positive per-sample cost";
      return false;
    }
  Rng rng{opts.seed};
  double t = 0;
  out.reserve(size_t(opts.jobs));
  for (int i = 0; i < opts.jobs; ++i) {
    if (i > 0)
      t += rng.exponential(opts.jobsPerHour / 3600.0);
    // Round to the CSV's millisecond resolution so a written and re-read
    // trace is the same trace.
    double arrival = std::round(t * 1000.0) / 1000.0;
    double pick = rng.uniform() * total;
    size_t m = 0;
    while (m + 1 < models.size() && pick >= w[m]) {
      pick -= w[m];
      ++m;
    }
    double work = opts.medianGpuSeconds * std::exp(opts.sigma * rng.normal());
    // What the reader accepts (the JobSpec's limits); llround of a larger
    // count is undefined, and such a trace could not be read back.
    double samples = std::max(1.0, std::round(work / usefulSPerSample[m]));
    if (!(samples <= fillJobMax("samples")) || !(arrival <= fillJobMax("arrival_us") / 1e6)) {
      error = "the trace generator drew job " + std::to_string(i) + " with " + num(samples) +
              " samples arriving at " + num(arrival) + " s, past the limits of " +
              num(fillJobMax("samples")) + " samples and " +
              num(fillJobMax("arrival_us") / 1e6) +
              " s; lower --median-gpu-s or --sigma, or raise --rate";
      out.clear();
      return false;
    }
    TraceJob job;
    job.arrivalS = arrival;
    job.model = models[m];
    job.samples = int64_t(samples);
    job.priority =
        rng.uniform() < opts.highPriorityFraction ? opts.highPriority : 1.0;
    out.push_back(job);
  }
  return true;
}

} // namespace pipefill::cluster
