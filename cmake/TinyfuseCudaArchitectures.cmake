# Chooses CMAKE_CUDA_ARCHITECTURES for the CUDA backend, before enable_language(CUDA).
#
# TINYFUSE_CUDA_ARCHITECTURES (cache):
#   auto    (default) the compute capabilities of the GPUs visible here (nvidia-smi); where none
#           is visible, every supported architecture ("all").
#   all     every supported architecture: sm_75, sm_80 and sm_90 code plus compute_90 PTX, which
#           the driver compiles for newer cards (what packagers, wheels and CI build).
#   native  as auto, but an error where no GPU is visible.
#   a list  e.g. "86;90": exactly these.
# An explicit -DCMAKE_CUDA_ARCHITECTURES=... wins over all of it.
# sm_75..sm_89 run the portable and mma.sync paths; an architecture of 90 adds Hopper's (wgmma,
# compiled for sm_90a); docs/PLATFORMS.md lists what runs where.
set(TINYFUSE_CUDA_ARCHITECTURES "auto" CACHE STRING
    "GPUs to compile the CUDA backend for: auto (the GPUs visible here, else all), all, native, or a list such as 86;90")
set(TINYFUSE_CUDA_ARCHITECTURES_ALL 75-real 80-real 90)

function(_tinyfuse_visible_cuda_architectures out)
  set(archs "")
  find_program(_tf_nvidia_smi nvidia-smi)
  if(_tf_nvidia_smi)
    execute_process(COMMAND ${_tf_nvidia_smi} --query-gpu=compute_cap --format=csv,noheader
                    OUTPUT_VARIABLE caps RESULT_VARIABLE rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(rc EQUAL 0)
      string(REPLACE "\n" ";" caps "${caps}")
      foreach(cap IN LISTS caps)
        string(STRIP "${cap}" cap)
        if(cap MATCHES "^([0-9]+)\\.([0-9]+)$")
          list(APPEND archs "${CMAKE_MATCH_1}${CMAKE_MATCH_2}")
        endif()
      endforeach()
      list(REMOVE_DUPLICATES archs)
    endif()
  endif()
  set(${out} "${archs}" PARENT_SCOPE)
endfunction()

if(DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(_tf_how "CMAKE_CUDA_ARCHITECTURES given")
else()
  set(_tf_choice "${TINYFUSE_CUDA_ARCHITECTURES}")
  if(_tf_choice STREQUAL "auto" OR _tf_choice STREQUAL "native")
    _tinyfuse_visible_cuda_architectures(_tf_visible)
    if(_tf_visible)
      set(CMAKE_CUDA_ARCHITECTURES ${_tf_visible})
      set(_tf_how "the GPUs visible here")
    elseif(_tf_choice STREQUAL "native")
      message(FATAL_ERROR "TINYFUSE_CUDA_ARCHITECTURES=native: no GPU is visible here (nvidia-smi lists none). "
                          "Name the architectures instead, e.g. -DTINYFUSE_CUDA_ARCHITECTURES=86 or =all.")
    else()
      set(CMAKE_CUDA_ARCHITECTURES ${TINYFUSE_CUDA_ARCHITECTURES_ALL})
      set(_tf_how "no GPU visible here, so every supported one")
    endif()
  elseif(_tf_choice STREQUAL "all")
    set(CMAKE_CUDA_ARCHITECTURES ${TINYFUSE_CUDA_ARCHITECTURES_ALL})
    set(_tf_how "all")
  else()
    set(CMAKE_CUDA_ARCHITECTURES ${_tf_choice})
    set(_tf_how "as listed")
  endif()
endif()
foreach(_tf_arch IN LISTS CMAKE_CUDA_ARCHITECTURES)
  string(REGEX REPLACE "-(real|virtual)$" "" _tf_num "${_tf_arch}")
  string(REGEX REPLACE "[af]$" "" _tf_num "${_tf_num}")
  if(NOT _tf_num MATCHES "^[0-9]+$" OR _tf_num LESS 75)
    message(FATAL_ERROR "CUDA architecture '${_tf_arch}': tinyfuse's CUDA backend needs sm_75 or newer "
                        "(set -DTINYFUSE_CUDA_ARCHITECTURES=all, native, or a list such as 86;90)")
  endif()
endforeach()
message(STATUS "tinyfuse: CUDA backend for architectures ${CMAKE_CUDA_ARCHITECTURES} (${_tf_how}); "
               "change with -DTINYFUSE_CUDA_ARCHITECTURES=all|native|<list>, or -DTINYFUSE_CUDA=OFF for the CPU only")
