// Every export reads a builtin.module: with --no-implicit-module another top-level op is an
// error at that op (it was cast to a module and the exports crashed reading it).
// RUN: pipefill-translate --to-summary --no-implicit-module --allow-unregistered-dialect %s --verify-diagnostics
// RUN: pipefill-translate --to-report --no-implicit-module --allow-unregistered-dialect %s --verify-diagnostics
// RUN: pipefill-translate --to-stream-program --no-implicit-module --allow-unregistered-dialect %s --verify-diagnostics
// RUN: pipefill-translate --to-torch-schedule --no-implicit-module --allow-unregistered-dialect %s --verify-diagnostics

// expected-error @+1 {{expected a 'builtin.module' op, got 'test.op'}}
"test.op"() : () -> ()
