# The Python package's build pieces that both builds share: python/CMakeLists.txt (the whole
# project: pipefill._core and pipefill._rt) and runtime/standalone/CMakeLists.txt (the runtime
# alone: pipefill._rt, for the GPU machines, scripts/gpu-bundle.sh). Include it after
# find_package(Python ...) and find_package(nanobind ...), with the pfrt target defined.

set(PIPEFILL_PY_DIR ${CMAKE_CURRENT_LIST_DIR})
# The runtime half of the binding (Runtime.h): in both modules.
set(PIPEFILL_PY_RUNTIME_SOURCES ${PIPEFILL_PY_DIR}/src/Runtime.cpp ${PIPEFILL_PY_DIR}/src/Tasks.cpp)

# pipefill_python_module(NAME SOURCES...): a nanobind module `pipefill.NAME` over the static
# nanobind library.
function(pipefill_python_module name)
  nanobind_add_module(${name} NB_STATIC ${ARGN})
  # LLVM's global warning flags (-Wcast-qual, ...) are for this project's code, not
  # nanobind's: its headers are system headers here and its library builds quietly.
  get_target_property(includes nanobind-static INTERFACE_INCLUDE_DIRECTORIES)
  set_target_properties(nanobind-static PROPERTIES INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${includes}")
  target_compile_options(nanobind-static PRIVATE -w)
endfunction()

# pipefill_runtime_module(PKG_DIR): pipefill._rt, the runtime half alone over pfrt (no LLVM,
# MLIR or z3 is linked), written into PKG_DIR.
function(pipefill_runtime_module pkg)
  pipefill_python_module(_rt ${PIPEFILL_PY_DIR}/src/RuntimeModule.cpp ${PIPEFILL_PY_RUNTIME_SOURCES})
  target_link_libraries(_rt PRIVATE pfrt)
  set_target_properties(_rt PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${pkg})
endfunction()

# pipefill_stage_python_package(TARGET PKG_DIR): a target in ALL that copies the package's
# Python files (python/pipefill/*.py, py.typed) into PKG_DIR, next to a module, so that PKG_DIR's
# parent is importable as is. Sets ${TARGET}_FILES to the staged paths.
function(pipefill_stage_python_package target pkg)
  file(GLOB sources CONFIGURE_DEPENDS ${PIPEFILL_PY_DIR}/pipefill/*.py
       ${PIPEFILL_PY_DIR}/pipefill/py.typed)
  set(staged)
  foreach(src ${sources})
    get_filename_component(fname ${src} NAME)
    add_custom_command(OUTPUT ${pkg}/${fname}
      COMMAND ${CMAKE_COMMAND} -E copy_if_different ${src} ${pkg}/${fname}
      DEPENDS ${src} VERBATIM)
    list(APPEND staged ${pkg}/${fname})
  endforeach()
  add_custom_target(${target} ALL DEPENDS ${staged})
  set(${target}_FILES ${staged} PARENT_SCOPE)
endfunction()
