//===- pipefill-translate.cpp - import and export -------------------------===//
#include "codegen/Translate.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  pipefill::registerTranslations();
  return mlir::failed(mlir::mlirTranslateMain(
      argc, argv, "pipefill import (JobSpec) and export (report, trace, SVG, "
                  "stream programs)\n"));
}
