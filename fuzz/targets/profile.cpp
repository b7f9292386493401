// libFuzzer target: a measured profile (text or binary) through the shared reader and limits.
#include "proto/profile.pb.h"
#include "support/Limits.h"
#include "support/ProtoText.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  pipefill::rt::MeasuredProfile profile;
  pipefill::Diagnostics diags;
  google::protobuf::TextFormat::ParseInfoTree tree;
  if (pipefill::parseTextProto("fuzz.pbtxt", bytes, profile, &tree, diags))
    pipefill::checkLimits(profile, &tree, "fuzz.pbtxt", diags);
  profile.Clear();
  if (pipefill::parseBinaryProto("fuzz.pb", bytes, profile, diags))
    pipefill::checkLimits(profile, nullptr, "fuzz.pb", diags);
  return 0;
}
