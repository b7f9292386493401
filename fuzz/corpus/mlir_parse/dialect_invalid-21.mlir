pipefill.fill_job @j inference samples 1 {
}
