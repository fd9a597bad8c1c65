// Functions compiled for several instruction sets, the best one the CPU has chosen when the
// library loads (GCC and Clang on x86-64 ELF; elsewhere the baseline alone). A file using them is
// compiled with floating-point contraction off (src/CMakeLists.txt): an AVX-512 clone would
// otherwise fuse multiplies and adds the baseline rounds separately, and results would depend on
// the CPU.
#pragma once

#if defined(__x86_64__) && defined(__ELF__) && (defined(__GNUC__) || defined(__clang__))
#define TINYFUSE_ISA_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#define TINYFUSE_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define TINYFUSE_ISA_CLONES
#define TINYFUSE_ALWAYS_INLINE inline
#endif
