// Accessors that let the shared encoding math (core/encodings/*_math.h), written against
// pointers, read and write features of either output dtype: computed in float, stored as T.
#pragma once

#include "cuda/common.cuh"

namespace tinyfuse::cuda {

template <typename T>
struct FeatureRef {
  T* p;
  __device__ __forceinline__ void operator=(float v) const { *p = from_float<T>(v); }
};

// out[i] = value stores `value` rounded to T.
template <typename T>
struct FeatureWriter {
  T* p;
  __device__ __forceinline__ FeatureRef<T> operator[](uint32_t i) const { return {p + i}; }
};

// in[i] is element i widened to float.
template <typename T>
struct FeatureReader {
  const T* p;
  __device__ __forceinline__ float operator[](uint32_t i) const { return to_float(p[i]); }
};

}  // namespace tinyfuse::cuda
