# TINYFUSE_HIP: enables CMake's HIP language for the GPU backend's HIP build (src/cuda/hip.cmake).
#
# ROCm installs itself under /opt/rocm and CMake finds it there. Debian's packages (hipcc,
# libamdhip64-dev, rocm-device-libs; HIP 5.2 with clang 15) use a multiarch layout that CMake 3.25
# does not look in, so for that layout this file points CMake at clang++-15, tells clang where the
# HIP headers and device libraries are, and gives CMake a ROCm root of links to Debian's packages.

if(NOT DEFINED CMAKE_HIP_ARCHITECTURES)
  # One wave32 target (RDNA2) and one wave64 target (CDNA2), both supported by Debian's toolchain.
  set(CMAKE_HIP_ARCHITECTURES gfx1030 gfx90a)
endif()

set(_tf_multiarch_cmake "/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/cmake")
if(NOT DEFINED CMAKE_HIP_COMPILER_ROCM_ROOT AND NOT EXISTS /opt/rocm AND NOT EXISTS /usr/lib/cmake/hip-lang
   AND EXISTS "${_tf_multiarch_cmake}/hip-lang")
  message(STATUS "HIP: Debian's multiarch ROCm layout")
  if(NOT DEFINED CMAKE_HIP_COMPILER AND NOT DEFINED ENV{HIPCXX})
    find_program(TINYFUSE_HIP_CLANG NAMES clang++-15 REQUIRED)  # what Debian's hipcc runs
    set(CMAKE_HIP_COMPILER "${TINYFUSE_HIP_CLANG}")
  endif()
  execute_process(COMMAND hipconfig --version OUTPUT_VARIABLE _tf_hip_version OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE _tf_hip_version_rc ERROR_QUIET)
  string(REGEX REPLACE "-.*" "" _tf_hip_version "${_tf_hip_version}")
  set(_tf_bitcode "/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/amdgcn/bitcode")
  # Without --hip-version clang assumes HIP 3.5 and skips its HIP wrapper headers (__host__ etc.).
  set(_tf_flags "--rocm-path=/usr --rocm-device-lib-path=${_tf_bitcode}")
  if(_tf_hip_version_rc EQUAL 0 AND _tf_hip_version)
    string(APPEND _tf_flags " --hip-version=${_tf_hip_version}")
  endif()
  if(NOT CMAKE_HIP_FLAGS MATCHES "--rocm-path")
    set(CMAKE_HIP_FLAGS "${_tf_flags} ${CMAKE_HIP_FLAGS}")
  endif()
  # CMake expects <root>/lib/cmake/hip-lang; its dependencies are found through the same root.
  set(_tf_root "${CMAKE_BINARY_DIR}/debian-rocm-root")
  file(MAKE_DIRECTORY "${_tf_root}/lib/cmake/hip-lang")
  foreach(pkg hip amd_comgr AMDDeviceLibs hsa-runtime64)
    if(EXISTS "${_tf_multiarch_cmake}/${pkg}" AND NOT EXISTS "${_tf_root}/lib/cmake/${pkg}")
      file(CREATE_LINK "${_tf_multiarch_cmake}/${pkg}" "${_tf_root}/lib/cmake/${pkg}" SYMBOLIC)
    endif()
  endforeach()
  # hip-lang itself through a wrapper: Debian's package adds /usr/include as -isystem to every HIP
  # compile, ahead of libstdc++'s headers, which breaks their #include_next <math.h>. /usr/include
  # is the compiler's own search directory anyway.
  file(WRITE "${_tf_root}/lib/cmake/hip-lang/hip-lang-config.cmake"
    "include(\"${_tf_multiarch_cmake}/hip-lang/hip-lang-config.cmake\")\n"
    "foreach(t hip-lang::device hip-lang::amdhip64)\n"
    "  foreach(p INTERFACE_INCLUDE_DIRECTORIES INTERFACE_SYSTEM_INCLUDE_DIRECTORIES)\n"
    "    get_target_property(v \${t} \${p})\n"
    "    if(v)\n"
    "      string(REPLACE \":/usr/include;\" \":\" v \"\${v}\")\n"
    "      string(REPLACE \";/usr/include>\" \">\" v \"\${v}\")\n"
    "      string(REPLACE \":/usr/include>\" \":>\" v \"\${v}\")\n"
    "      set_target_properties(\${t} PROPERTIES \${p} \"\${v}\")\n"
    "    endif()\n"
    "  endforeach()\n"
    "endforeach()\n")
  configure_file("${_tf_multiarch_cmake}/hip-lang/hip-lang-config-version.cmake"
                 "${_tf_root}/lib/cmake/hip-lang/hip-lang-config-version.cmake" COPYONLY)
  set(CMAKE_HIP_COMPILER_ROCM_ROOT "${_tf_root}")
  set(ENV{CMAKE_PREFIX_PATH} "${_tf_root}")  # seen by the compiler checks' try_compile projects too
  list(APPEND CMAKE_PREFIX_PATH "${_tf_root}")
endif()

enable_language(HIP)
set(CMAKE_HIP_STANDARD 17)
set(CMAKE_HIP_STANDARD_REQUIRED ON)
set(CMAKE_HIP_EXTENSIONS OFF)
