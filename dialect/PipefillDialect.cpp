//===- PipefillDialect.cpp - the pipefill dialect -------------------------===//
#include "dialect/PipefillDialect.h"
#include "dialect/PipefillOps.h"

using namespace mlir;
using namespace pipefill;

#include "dialect/PipefillDialect.cpp.inc"

void PipefillDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialect/PipefillOps.cpp.inc"
      >();
}
