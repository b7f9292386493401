pipefill.fill_job @j inference samples 1 {
  builtin.module {
  }
}
