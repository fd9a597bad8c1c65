#include "cuda/blaslt_plan.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cuda/blaslt_handle.h"
#include "cuda/developer_knob.h"
#include "tinyfuse/buffer.h"
#include "tinyfuse/errors.h"

namespace tinyfuse::cuda {

namespace {

// Most workspace an algorithm may ask for (split-K reductions of the weight gradients over long
// batches are where it pays). Taken per product from the stream-ordered pool, so it is shared
// by nothing and costs no synchronisation.
constexpr uint64_t kMaxWorkspaceBytes = 32ull << 20;

// Tuning knobs for measuring cuBLASLt's choices on a device (scripts/gpu/tinyfuse-gpu
// blaslt-sweep), read once from the environment in developer builds only
// (-DTINYFUSE_DEVELOPER_KNOBS=ON); every other build runs the defaults, the library's own.
//   TINYFUSE_BLASLT_ALGO_RANK   use the heuristic's n-th ranked algorithm (0 = its first choice)
//   TINYFUSE_BLASLT_ALIGN_CAP   largest pointer alignment (bytes) the heuristic is told about
//   TINYFUSE_BLASLT_WORKSPACE_MB  most workspace an algorithm may ask for
//   TINYFUSE_BLASLT_UNFUSED     1: no fused bias epilogues (the callers' separate bias/activation pass)
struct Tuning {
  bool unfused = false;
  int algo_rank = 0;
  uint32_t align_cap = 256;
  uint64_t workspace_bytes = kMaxWorkspaceBytes;
};

const Tuning& tuning() {
#if !defined(TINYFUSE_DEVELOPER_KNOBS)
  static const Tuning defaults;
  return defaults;
#else
  static const Tuning t = [] {
    Tuning r;
    r.algo_rank = static_cast<int>(developer_knob("TINYFUSE_BLASLT_ALGO_RANK", 0, 7, 0));
    r.align_cap = static_cast<uint32_t>(developer_knob("TINYFUSE_BLASLT_ALIGN_CAP", 2, 256, 256));
    if (r.align_cap & (r.align_cap - 1))
      throw ConfigError("TINYFUSE_BLASLT_ALIGN_CAP", std::to_string(r.align_cap), "must be a power of two", "2, 4, ..., 256");
    r.unfused = developer_knob("TINYFUSE_BLASLT_UNFUSED", 0, 1, 0) == 1;
    r.workspace_bytes = static_cast<uint64_t>(developer_knob("TINYFUSE_BLASLT_WORKSPACE_MB", 0, 1024, kMaxWorkspaceBytes >> 20)) << 20;
    return r;
  }();
  return t;
#endif
}
// Fused bias epilogues are used only with a bias this aligned (bytes). The heuristic is told
// the bias pointer, but the library's bias loads are vectorised and a less aligned bias has
// been reported to fail at launch on some versions: the unfused path is always correct.
constexpr uintptr_t kBiasAlignment = 16;
// Plans kept before the cache starts over (each is a few hundred bytes of host memory; a
// workload with ever-changing batch sizes would otherwise grow it without bound).
constexpr size_t kMaxPlans = 4096;

struct PlanKey {
  gpublasLtHandle_t handle;
  DType dtype;
  bool trans_a, trans_b;
  int64_t m, n, k, lda, ldb, ldd;
  BlasLtEpilogue epilogue;
  uint32_t align_a, align_b, align_d, align_bias;

  bool operator==(const PlanKey& o) const {
    return handle == o.handle && dtype == o.dtype && trans_a == o.trans_a && trans_b == o.trans_b && m == o.m &&
           n == o.n && k == o.k && lda == o.lda && ldb == o.ldb && ldd == o.ldd && epilogue == o.epilogue &&
           align_a == o.align_a && align_b == o.align_b && align_d == o.align_d && align_bias == o.align_bias;
  }
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&](uint64_t v) {
      h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    };
    mix(reinterpret_cast<uintptr_t>(k.handle));
    mix(static_cast<uint64_t>(k.dtype) | (uint64_t(k.trans_a) << 8) | (uint64_t(k.trans_b) << 9) |
        (uint64_t(k.epilogue) << 10));
    for (int64_t v : {k.m, k.n, k.k, k.lda, k.ldb, k.ldd}) mix(static_cast<uint64_t>(v));
    mix((uint64_t(k.align_a) << 48) ^ (uint64_t(k.align_b) << 32) ^ (uint64_t(k.align_d) << 16) ^ k.align_bias);
    return static_cast<size_t>(h);
  }
};

// Everything the host needs to launch one problem. The descriptor is shared by every thread
// running the problem and its bias pointer is set per call, so launches lock `launch_mutex`
// (cublasLtMatmul reads the descriptor before it returns).
struct Plan {
  gpublasLtMatmulDesc_t desc = nullptr;
  gpublasLtMatrixLayout_t layout_a = nullptr, layout_b = nullptr, layout_d = nullptr;
  gpublasLtMatmulAlgo_t algo{};
  size_t workspace_bytes = 0;
  bool found = false;  // the heuristic returned an algorithm
  std::atomic<bool> usable{true};  // cleared if the library refuses the fused epilogue at launch
  std::mutex launch_mutex;

  ~Plan() {
    if (layout_d) (void)gpublasLtMatrixLayoutDestroy(layout_d);
    if (layout_b) (void)gpublasLtMatrixLayoutDestroy(layout_b);
    if (layout_a) (void)gpublasLtMatrixLayoutDestroy(layout_a);
    if (desc) (void)gpublasLtMatmulDescDestroy(desc);
  }
};

gpuDataType_t data_type(DType t) {
  switch (t) {
    case DType::F32: return GPU_R_32F;
    case DType::F16: return GPU_R_16F;
    default: break;
  }
  throw UnsupportedError("BLAS-Lt matmul: operands must be f32 or f16, got " + to_string(t));
}

gpublasLtEpilogue_t epilogue_of(BlasLtEpilogue e) {
  switch (e) {
    case BlasLtEpilogue::None: return GPUBLASLT_EPILOGUE_DEFAULT;
    case BlasLtEpilogue::Bias: return GPUBLASLT_EPILOGUE_BIAS;
    case BlasLtEpilogue::ReluBias: return GPUBLASLT_EPILOGUE_RELU_BIAS;
  }
  return GPUBLASLT_EPILOGUE_DEFAULT;
}

uint32_t pointer_alignment(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p) | 256u;
  return static_cast<uint32_t>(a & (~a + 1));
}

// Layouts must name a leading dimension of at least the stored rows, even for a single column
// (where the library never steps by it).
int64_t valid_ld(int64_t ld, int64_t rows, int64_t cols) { return cols <= 1 ? std::max(ld, std::max<int64_t>(rows, 1)) : ld; }

// Builds the descriptors and asks the heuristic. `bias` is only read for its alignment.
void build_plan(Plan& plan, const PlanKey& key, const void* bias) {
  const gpuDataType_t type = data_type(key.dtype);
  TF_BLASLT_CHECK(gpublasLtMatmulDescCreate(&plan.desc, GPUBLAS_COMPUTE_32F, GPU_R_32F));
  const int32_t op_a = key.trans_a ? GPUBLAS_OP_T : GPUBLAS_OP_N;
  const int32_t op_b = key.trans_b ? GPUBLAS_OP_T : GPUBLAS_OP_N;
  TF_BLASLT_CHECK(gpublasLtMatmulDescSetAttribute(plan.desc, GPUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  TF_BLASLT_CHECK(gpublasLtMatmulDescSetAttribute(plan.desc, GPUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  const uint32_t epilogue = static_cast<uint32_t>(epilogue_of(key.epilogue));
  TF_BLASLT_CHECK(gpublasLtMatmulDescSetAttribute(plan.desc, GPUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
  if (key.epilogue != BlasLtEpilogue::None) {
    const int32_t bias_type = static_cast<int32_t>(type);
    TF_BLASLT_CHECK(gpublasLtMatmulDescSetAttribute(plan.desc, GPUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
    TF_BLASLT_CHECK(gpublasLtMatmulDescSetAttribute(plan.desc, GPUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  // Stored shapes: op(A) is m x k, so A is stored k x m when transposed; likewise B.
  const int64_t a_rows = key.trans_a ? key.k : key.m, a_cols = key.trans_a ? key.m : key.k;
  const int64_t b_rows = key.trans_b ? key.n : key.k, b_cols = key.trans_b ? key.k : key.n;
  TF_BLASLT_CHECK(gpublasLtMatrixLayoutCreate(&plan.layout_a, type, a_rows, a_cols, valid_ld(key.lda, a_rows, a_cols)));
  TF_BLASLT_CHECK(gpublasLtMatrixLayoutCreate(&plan.layout_b, type, b_rows, b_cols, valid_ld(key.ldb, b_rows, b_cols)));
  TF_BLASLT_CHECK(gpublasLtMatrixLayoutCreate(&plan.layout_d, type, key.m, key.n, valid_ld(key.ldd, key.m, key.n)));

  gpublasLtMatmulPreference_t pref = nullptr;
  TF_BLASLT_CHECK(gpublasLtMatmulPreferenceCreate(&pref));
  struct PrefGuard {
    gpublasLtMatmulPreference_t p;
    ~PrefGuard() { (void)gpublasLtMatmulPreferenceDestroy(p); }
  } guard{pref};
  const uint64_t workspace = tuning().workspace_bytes;
  TF_BLASLT_CHECK(gpublasLtMatmulPreferenceSetAttribute(pref, GPUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
#if TF_GPUBLASLT_HAS_ALIGNMENT_PREFS
  TF_BLASLT_CHECK(gpublasLtMatmulPreferenceSetAttribute(pref, GPUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &key.align_a, sizeof(uint32_t)));
  TF_BLASLT_CHECK(gpublasLtMatmulPreferenceSetAttribute(pref, GPUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &key.align_b, sizeof(uint32_t)));
  TF_BLASLT_CHECK(gpublasLtMatmulPreferenceSetAttribute(pref, GPUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &key.align_d, sizeof(uint32_t)));
  TF_BLASLT_CHECK(gpublasLtMatmulPreferenceSetAttribute(pref, GPUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &key.align_d, sizeof(uint32_t)));
#endif
  gpublasLtMatmulHeuristicResult_t results[8]{};
  int count = 0;
  const gpublasStatus_t status = gpublasLtMatmulAlgoGetHeuristic(key.handle, plan.desc, plan.layout_a, plan.layout_b,
                                                                 plan.layout_d, plan.layout_d, pref, tuning().algo_rank + 1,
                                                                 results, &count);
  const gpublasLtMatmulHeuristicResult_t& result = results[std::max(0, std::min(count, tuning().algo_rank + 1) - 1)];
  // NOT_SUPPORTED: no heuristic for this configuration at all, the same as no algorithm.
  if (status != GPUBLAS_STATUS_SUCCESS && status != GPUBLAS_STATUS_NOT_SUPPORTED)
    gpu::throw_blaslt_error(status, "gpublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
  if (status == GPUBLAS_STATUS_SUCCESS && count > 0 && result.state == GPUBLAS_STATUS_SUCCESS) {
    plan.algo = result.algo;
    plan.workspace_bytes = result.workspaceSize;
    plan.found = true;
  }
}

struct PlanCache {
  std::mutex mutex;
  std::unordered_map<PlanKey, std::shared_ptr<Plan>, PlanKeyHash> plans;
};

PlanCache& plan_cache() {
  static PlanCache* cache = new PlanCache();  // never destroyed: see blaslt_handle.h
  return *cache;
}

std::shared_ptr<Plan> get_plan(const PlanKey& key, const void* bias) {
  PlanCache& cache = plan_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  auto it = cache.plans.find(key);
  if (it != cache.plans.end()) return it->second;
  auto plan = std::make_shared<Plan>();
  build_plan(*plan, key, bias);
  if (cache.plans.size() >= kMaxPlans) cache.plans.clear();  // plans in use stay alive via shared_ptr
  cache.plans.emplace(key, plan);
  return plan;
}

const char* epilogue_name(BlasLtEpilogue e) {
  switch (e) {
    case BlasLtEpilogue::None: return "none";
    case BlasLtEpilogue::Bias: return "bias";
    case BlasLtEpilogue::ReluBias: return "relu+bias";
  }
  return "?";
}

std::string describe(const PlanKey& k) {
  return std::string("D(") + std::to_string(k.m) + "x" + std::to_string(k.n) + ") = " + (k.trans_a ? "A^T" : "A") +
         (k.trans_b ? " B^T" : " B") + ", k " + std::to_string(k.k) + ", " + to_string(k.dtype) + ", ld A/B/D " +
         std::to_string(k.lda) + "/" + std::to_string(k.ldb) + "/" + std::to_string(k.ldd) + ", alignment A/B/D " +
         std::to_string(k.align_a) + "/" + std::to_string(k.align_b) + "/" + std::to_string(k.align_d) +
         " bytes, epilogue " + epilogue_name(k.epilogue);
}

[[noreturn]] void throw_no_algorithm(const PlanKey& key) {
  const size_t es = dtype_size(key.dtype);
  throw UnsupportedError("cuBLASLt has no algorithm on this device for the matrix product " + describe(key) +
                         "; widths and row strides that are multiples of " + std::to_string(16 / es) + " " +
                         to_string(key.dtype) + " elements (16 bytes), on 16-byte aligned pointers, always work");
}

}  // namespace

uint32_t blaslt_alignment(const void* p, int64_t ld, DType dtype) {
  const uint64_t ld_bytes = static_cast<uint64_t>(std::max<int64_t>(ld, 0)) * dtype_size(dtype);
  const uint64_t a = reinterpret_cast<uintptr_t>(p) | ld_bytes | tuning().align_cap;
  return static_cast<uint32_t>(a & (~a + 1));
}

bool run_blaslt_matmul(const BlasLtMatmul& mm, gpuStream_t stream) {
  if (mm.m <= 0 || mm.n <= 0) return true;  // nothing to write
  const bool fused = mm.epilogue != BlasLtEpilogue::None;
  if (fused && ((reinterpret_cast<uintptr_t>(mm.bias) % kBiasAlignment) != 0 || tuning().unfused)) return false;
  if (mm.k <= 0) {
    // An empty sum: the library's behaviour is not documented for k = 0, and no layer has it.
    throw UnsupportedError("BLAS-Lt matmul with an empty inner dimension (k = 0)");
  }
  const PlanKey key{blaslt_handle(),
                    mm.dtype,
                    mm.trans_a,
                    mm.trans_b,
                    mm.m,
                    mm.n,
                    mm.k,
                    mm.lda,
                    mm.ldb,
                    mm.ldd,
                    mm.epilogue,
                    blaslt_alignment(mm.a, mm.lda, mm.dtype),
                    blaslt_alignment(mm.b, mm.ldb, mm.dtype),
                    blaslt_alignment(mm.d, mm.ldd, mm.dtype),
                    fused ? pointer_alignment(mm.bias) : 0u};
  std::shared_ptr<Plan> plan = get_plan(key, mm.bias);
  if (!plan->found || !plan->usable) {
    if (fused) return false;
    throw_no_algorithm(key);
  }
  Buffer workspace;
  if (plan->workspace_bytes > 0) workspace = Buffer::on_stream(Device::CUDA, plan->workspace_bytes, stream);
  const float alpha = 1.0f, beta = mm.beta;
  std::lock_guard<std::mutex> lock(plan->launch_mutex);
  if (fused)
    TF_BLASLT_CHECK(gpublasLtMatmulDescSetAttribute(plan->desc, GPUBLASLT_MATMUL_DESC_BIAS_POINTER, &mm.bias, sizeof(mm.bias)));
  const gpublasStatus_t status =
      gpublasLtMatmul(key.handle, plan->desc, &alpha, mm.a, plan->layout_a, mm.b, plan->layout_b, &beta, mm.d,
                      plan->layout_d, mm.d, plan->layout_d, &plan->algo, workspace.data(), plan->workspace_bytes, stream);
  if (status == GPUBLAS_STATUS_NOT_SUPPORTED) {
    // Refused on the host before anything was queued.
    if (fused) {
      plan->usable = false;
      return false;
    }
    throw_no_algorithm(key);
  }
  if (status != GPUBLAS_STATUS_SUCCESS) gpu::throw_blaslt_error(status, "gpublasLtMatmul", __FILE__, __LINE__);
  return true;
}

bool blaslt_matmul_supported(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, int64_t lda,
                             int64_t ldb, int64_t ldd) {
  const void* aligned = reinterpret_cast<const void*>(uintptr_t(256));
  const PlanKey key{blaslt_handle(),
                    dtype,
                    trans_a,
                    trans_b,
                    m,
                    n,
                    k,
                    lda,
                    ldb,
                    ldd,
                    BlasLtEpilogue::None,
                    blaslt_alignment(aligned, lda, dtype),
                    blaslt_alignment(aligned, ldb, dtype),
                    blaslt_alignment(aligned, ldd, dtype),
                    0u};
  return get_plan(key, nullptr)->found;
}

}  // namespace tinyfuse::cuda
