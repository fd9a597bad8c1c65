// Audit fixture: a kernel that must use local memory. The array is indexed with a value known only
// at run time, so it cannot live in registers and goes to the stack (STL / LDL).
__global__ void spill_kernel(float* out, const int* index) {
  float buf[256];
  for (int i = 0; i < 256; ++i) buf[i] = out[i * blockDim.x + threadIdx.x];
  out[threadIdx.x] = buf[index[threadIdx.x] & 255];
}
