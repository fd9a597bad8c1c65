# TINYFUSE_HIP: the GPU backend's units compiled for AMD GPUs from the same sources, as the object
# library tinyfuse_hip_units (a compile check: it is not linked into tinyfuse, whose GPU device stays
# unavailable in a HIP build; docs/PLATFORMS.md). Included from CMakeLists.txt beside this file,
# which lists the units; every unit there is compiled here unless it needs what this build lacks:
#  - TINYFUSE_GPU_UNITS_NEED_BLASLT: hipBLASLt (find_package(hipblaslt));
#  - TINYFUSE_GPU_UNITS_CUDA_ONLY: kernels with no HIP path (FullyFusedMLP's
#    PTX pipelined forward units; forward.cu's kernel serves HIP).
set(_tf_units ${TINYFUSE_GPU_UNITS})
set(_tf_skipped "")

find_package(hipblaslt CONFIG QUIET)
if(hipblaslt_FOUND)
  set(_tf_blaslt_note "hipBLASLt ${hipblaslt_VERSION}")
else()
  list(REMOVE_ITEM _tf_units ${TINYFUSE_GPU_UNITS_NEED_BLASLT})
  foreach(u ${TINYFUSE_GPU_UNITS_NEED_BLASLT})
    list(APPEND _tf_skipped "${u}: needs hipBLASLt (not found)")
  endforeach()
endif()

# Width64FusedMLP is not in TINYFUSE_GPU_UNITS (the CUDA build adds it when enabled). The fused
# kernels need no library beyond the HIP headers (matrix-core builtins: primitives/amd_matrix_ops.cuh).
if(TINYFUSE_WIDTH64_FUSED)
  list(APPEND _tf_units width64/width64_fused_mlp.cu)
endif()
if(TINYFUSE_GPU_UNITS_CUDA_ONLY)
  list(REMOVE_ITEM _tf_units ${TINYFUSE_GPU_UNITS_CUDA_ONLY})
  foreach(u ${TINYFUSE_GPU_UNITS_CUDA_ONLY})
    list(APPEND _tf_skipped "${u}: CUDA only, HIP path not written")
  endforeach()
endif()

add_library(tinyfuse_hip_units OBJECT ${_tf_units})
set_source_files_properties(${_tf_units} PROPERTIES LANGUAGE HIP)
target_include_directories(tinyfuse_hip_units PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(tinyfuse_hip_units PRIVATE nlohmann_json::nlohmann_json)
target_compile_definitions(tinyfuse_hip_units PRIVATE TINYFUSE_WITH_HIP)
if(hipblaslt_FOUND)
  target_compile_definitions(tinyfuse_hip_units PRIVATE TINYFUSE_WITH_HIPBLASLT)
  target_link_libraries(tinyfuse_hip_units PRIVATE roc::hipblaslt)
endif()
target_compile_options(tinyfuse_hip_units PRIVATE -Wall)
# The library's otype table knows the build is for AMD: the seed's AMD otype names are accepted as
# aliases, and the BLAS-Lt otypes say that hipBLASLt is missing when it is (core/otypes.cpp).
target_compile_definitions(tinyfuse PRIVATE TINYFUSE_WITH_HIP $<$<BOOL:${hipblaslt_FOUND}>:TINYFUSE_WITH_HIPBLASLT>)
# As --fmad=false in the CUDA build: the optimizers round as the CPU reference.
set(_tf_no_fma ${TINYFUSE_GPU_UNITS_NO_FMA})
list(FILTER _tf_no_fma INCLUDE REGEX ".")
set_source_files_properties(${_tf_no_fma} TARGET_DIRECTORY tinyfuse_hip_units PROPERTIES COMPILE_OPTIONS "-ffp-contract=off")

# What was and was not compiled, for scripts/hip-compile-check.sh and docs/PLATFORMS.md.
list(LENGTH _tf_units _tf_n)
string(REPLACE ";" "\n  " _tf_units_text "${_tf_units}")
string(REPLACE ";" "\n  " _tf_skipped_text "${_tf_skipped}")
file(WRITE "${PROJECT_BINARY_DIR}/hip_units.txt"
  "targets: ${CMAKE_HIP_ARCHITECTURES}\ncompiler: ${CMAKE_HIP_COMPILER} (${CMAKE_HIP_COMPILER_ID} ${CMAKE_HIP_COMPILER_VERSION})\n"
  "compiled (${_tf_n}):\n  ${_tf_units_text}\nnot compiled:\n  ${_tf_skipped_text}\n")
message(STATUS "HIP: ${_tf_n} units for ${CMAKE_HIP_ARCHITECTURES} (target tinyfuse_hip_units); not compiled: ${_tf_skipped}")
