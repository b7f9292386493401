#!/bin/sh
# mpirun for the GPU bundle (scripts/gpu-bundle.sh packs this as bin/pfrt-mpirun): runs the Open MPI
# that the bundle carries in openmpi/ beside bin/ (Debian's 4.1 with its PMIx, relocated by the
# environment below), else the machine's own mpirun; it says on stderr which one runs.
#   pfrt-mpirun [MPIRUN OPTIONS] PROGRAM [ARGS]      e.g. pfrt-mpirun -n 2 bin/pipefill-run plan.pb
# Open MPI and PMIx find their components, help texts and settings where they were installed
# (/usr/lib/x86_64-linux-gnu/...) unless OPAL_* and PMIX_* name other folders; the ranks that mpirun
# starts inherit these variables, and load libmpi and the rest from the bundle's lib/
# (LD_LIBRARY_PATH comes before the libraries' own RUNPATH).
root=$(cd "$(dirname "$0")/.." && pwd)
ompi=$root/openmpi
if [ -x "$ompi/bin/orterun" ]; then
  mpirun=$ompi/bin/orterun
  export OPAL_PREFIX="$ompi" OPAL_EXEC_PREFIX="$ompi" OPAL_BINDIR="$ompi/bin" \
    OPAL_LIBDIR="$root/lib" OPAL_PKGLIBDIR="$ompi/lib/openmpi3" OPAL_DATAROOTDIR="$ompi/share" \
    OPAL_DATADIR="$ompi/share" OPAL_PKGDATADIR="$ompi/share/openmpi" OPAL_SYSCONFDIR="$ompi/etc"
  # PMIx 4 (Debian's is external to Open MPI): its own variables; the component path also beats
  # the absolute one in Debian's pmix-mca-params.conf, should that file be read.
  export PMIX_PREFIX="$ompi" PMIX_EXEC_PREFIX="$ompi" PMIX_LIBDIR="$root/lib" \
    PMIX_PKGLIBDIR="$ompi/lib/pmix" PMIX_DATAROOTDIR="$ompi/share" PMIX_DATADIR="$ompi/share" \
    PMIX_PKGDATADIR="$ompi/share/pmix" PMIX_SYSCONFDIR="$ompi/etc" \
    PMIX_MCA_mca_base_component_path="$ompi/lib/pmix"
  # PMIx's shared-memory key store (ds12/ds21: files and pthread locks under /tmp) has failed in
  # some setups (open-mpi/ompi#7516, openpmix/openpmix#1114); a few ranks need only the hash store.
  export PMIX_MCA_gds="${PMIX_MCA_gds:-hash}"
  # hwloc's plugins (PCI, OpenCL) are not needed for one machine: none from another hwloc either.
  export HWLOC_PLUGINS_PATH="$ompi/lib/hwloc"
  export LD_LIBRARY_PATH="$root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$ompi/bin:$PATH"
  echo "pfrt-mpirun: the bundle's Open MPI ($mpirun, $(cat "$ompi/VERSION" 2>/dev/null))" >&2
elif mpirun=$(command -v mpirun); then
  echo "pfrt-mpirun: no bundled Open MPI in $ompi: the machine's $mpirun" >&2
else
  echo "pfrt-mpirun: no mpirun: the bundle carries no Open MPI ($ompi) and none is on PATH" >&2
  exit 127
fi
# The device machines run commands as root, which Open MPI refuses unless told.
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
exec "$mpirun" "$@"
