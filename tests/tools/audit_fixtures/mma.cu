// Audit fixture: one kernel on the tensor cores (mma.sync -> HMMA, plus shared memory and a
// barrier) and one plain kernel without them, both in a namespace like the library's.
namespace fixture::fused {

__global__ void mma_kernel(float* d, const unsigned* a, const unsigned* b) {
  float c[4] = {0.f, 0.f, 0.f, 0.f};
  const unsigned a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3], b0 = b[0], b1 = b[1];
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  __shared__ float staged[128];
  staged[threadIdx.x] = c[0] + c[1] + c[2] + c[3];
  __syncthreads();
  d[threadIdx.x] = staged[127 - threadIdx.x];
}

template <typename T>
__global__ void plain_kernel(T* x) { x[threadIdx.x] += T(1); }
template __global__ void plain_kernel<float>(float*);

}  // namespace fixture::fused
