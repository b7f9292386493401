// expected-error @+1 {{contains no pfstream.program; run pipefill-opt --pipefill-lower-to-stream first}}
module {
}
