pipefill.forward mb 0 chunk 0 duration 1.0
