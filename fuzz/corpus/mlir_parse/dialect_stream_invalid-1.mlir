pfstream.program @p iterations 1 planned 1.0 {
  builtin.module {
  }
}
