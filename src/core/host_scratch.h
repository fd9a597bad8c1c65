// Host scratch memory kept for reuse between calls. A training step asks for the same activation
// and gradient buffers every time; taken from the C library each step, every large block goes
// back to the kernel on free and the next step pays a page fault per 4 KiB touched (a quarter
// of a CPU training step before this cache). Blocks of kMinCachedBytes and more are kept after
// release and handed to the next request they fit (at most twice its size); smaller ones go to
// the C library directly. What is kept is bounded (host_scratch.cpp) and given back by
// free_temporary_memory().
#pragma once

#include <cstddef>

namespace tinyfuse {

// 64-byte aligned memory of at least `bytes` (0 gives nullptr); throws OutOfMemoryError naming
// `what` when it cannot be had. Contents are undefined.
void* host_scratch_alloc(size_t bytes, const char* what);
// Returns a block from host_scratch_alloc (nullptr is ignored).
void host_scratch_free(void* p);
// Frees every kept block; blocks in use stay.
void host_scratch_trim();
// Bytes kept for reuse now (for tests).
size_t host_scratch_cached_bytes();

}  // namespace tinyfuse
