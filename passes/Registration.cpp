//===- Registration.cpp - pass and pipeline registration ------------------===//
#include "passes/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

namespace pipefill {
namespace {
#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"
} // namespace

void buildCompilePipeline(mlir::OpPassManager &pm, const CompileOptions &options) {
  pm.addPass(createExpandSchedule());
  if (!options.profile.empty())
    pm.addPass(createApplyProfile(ApplyProfileOptions{options.profile}));
  pm.addPass(createSimulate());
  pm.addPass(createInsertBubbles());
  pm.addPass(createPlanFill());
  if (options.verifyPlan)
    pm.addPass(createVerifyPlan());
}

namespace {
ProgressHook &progressHookStorage() {
  static ProgressHook hook;
  return hook;
}
} // namespace

void setProgressHook(ProgressHook hook) { progressHookStorage() = std::move(hook); }
const ProgressHook &progressHook() { return progressHookStorage(); }

void registerPasses() {
  registerPipefillPasses();
  mlir::PassPipelineRegistration<CompileOptions>(
      "pipefill-compile",
      "The whole pipefill pipeline: expand the schedule, simulate it, "
      "materialize bubbles, plan fill work into them and verify the plan",
      buildCompilePipeline);
}

} // namespace pipefill
