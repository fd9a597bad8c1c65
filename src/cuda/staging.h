// Scratch memory of the GPU networks: where every sub-allocation of a scratch buffer starts, and
// the staging of caller views that kernels cannot use in place through aligned scratch (one 2-D
// copy each way). Memory comes from the stream-ordered pool; copies go on the caller's stream.
#pragma once

#include <algorithm>
#include <cstddef>

#include "cuda/common.cuh"
#include "tinyfuse/buffer.h"

namespace tinyfuse::cuda {

constexpr size_t kScratchAlignment = 256;  // bytes: start of every sub-allocation

// `bytes` rounded up to a whole number of kScratchAlignment.
inline size_t scratch_bytes(size_t bytes) { return (bytes + kScratchAlignment - 1) / kScratchAlignment * kScratchAlignment; }

// Whether 16-byte copies can read and write every row of `t` (first row 16-byte aligned, row
// stride a multiple of 16 bytes). For 16-bit elements this is rows_aligned16_16bit.
inline bool rows_aligned16(const TensorView& t) {
  return aligned16(t.data) && (t.strides[0] * static_cast<int64_t>(dtype_size(t.dtype))) % 16 == 0;
}

// A matrix the kernels can use in place of a caller's view: the view itself, or aligned scratch.
struct Staged {
  Buffer scratch;
  void* data = nullptr;
  int64_t ld = 0;
};

// `v` itself where its rows are 16-byte aligned; otherwise dense scratch of its shape, holding a
// copy of `v` when `copy_in`.
inline Staged stage(const TensorView& v, bool copy_in, gpuStream_t s) {
  Staged out;
  if (rows_aligned16(v)) {
    out.data = v.data;
    out.ld = v.strides[0];
    return out;
  }
  const size_t es = dtype_size(v.dtype);
  out.scratch = Buffer::on_stream(Device::CUDA, std::max<size_t>(1, v.rows() * v.cols() * es), v.stream);
  out.data = out.scratch.data();
  out.ld = v.cols();
  if (copy_in && v.rows() > 0)
    TF_GPU_CHECK(gpuMemcpy2DAsync(out.data, v.cols() * es, v.data, v.strides[0] * es, v.cols() * es, v.rows(),
                                  gpuMemcpyDefault, s));
  return out;
}

// Copies staged results back into the caller's view (nothing when the view was used in place).
inline void unstage(const Staged& st, const TensorView& v, gpuStream_t s) {
  if (st.data == v.data || v.rows() == 0) return;
  const size_t es = dtype_size(v.dtype);
  TF_GPU_CHECK(gpuMemcpy2DAsync(v.data, v.strides[0] * es, st.data, st.ld * es, v.cols() * es, v.rows(),
                                gpuMemcpyDefault, s));
}

}  // namespace tinyfuse::cuda
