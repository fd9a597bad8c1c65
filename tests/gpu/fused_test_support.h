// What the fused-network qualification suite and its fresh-process determinism program share:
// the network config, building it (or saying why this build cannot), seeded parameters and
// inputs, and raw (bit-exact) transfers of 16-bit tensors.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "testing/sha256.h"
#include "tinyfuse/tinyfuse.h"

namespace tinyfuse::testing {

// 64 -> 64 x 2 -> 64, ReLU, no output activation: the one network both fused otypes run here.
inline json fused_network_config(const std::string& otype) {
  return {{"otype", otype}, {"n_neurons", 64}, {"n_hidden_layers", 2}, {"activation", "ReLU"}, {"output_activation", "None"}};
}
constexpr uint32_t kFusedWidth = 64;

// The otype on CUDA, or nullptr with `why_not` set when this build has no CUDA implementation
// of it (FullyFusedMLP before the fused branch is merged; Width64FusedMLP without its option).
// Any other error propagates.
inline std::unique_ptr<Network> create_fused_network(const std::string& otype, std::string& why_not) {
  try {
    return create_network(fused_network_config(otype), kFusedWidth, kFusedWidth, {Device::CUDA});
  } catch (const ConfigError& e) {
    const std::string rule = e.rule();
    if (e.key() == "network.otype" &&
        (rule.find("no CUDA implementation") != std::string::npos || rule.find("not built") != std::string::npos)) {
      why_not = otype + " has no CUDA implementation in this build: " + e.what();
      return nullptr;
    }
    throw;
  } catch (const UnsupportedError& e) {
    if (std::string(e.what()).find("not a CUDA network") != std::string::npos) {
      why_not = otype + " has no CUDA implementation in this build: " + e.what();
      return nullptr;
    }
    throw;
  }
}

// Seeded parameters: the network's own initialisation (as a Trainer would do it), with random
// biases in [-0.5, 0.5) where it has biases (initialisation zeroes them).
inline std::vector<float> fused_test_params(Network& net, uint64_t seed) {
  Pcg32 rng(seed);
  std::vector<float> p(net.n_params());
  net.initialize_params(rng, p.data(), 1.0f);
  for (const ParamSegment& s : net.param_segments())
    if (s.kind == ParamSegment::Kind::Vector)
      for (size_t i = 0; i < s.count; ++i) p[s.offset + i] = rng.next_float() - 0.5f;
  return p;
}

// Seeded inputs, uniform in [-1, 1).
inline std::vector<float> fused_test_inputs(int64_t rows, uint64_t seed) {
  Pcg32 rng(seed);
  std::vector<float> x(static_cast<size_t>(rows) * kFusedWidth);
  for (float& v : x) v = rng.uniform(-1.0f, 1.0f);
  return x;
}

// The element bytes of a device matrix (rows x cols, any strides), row-major, dense: bit-exact
// for every value but NaNs, whose payload the host conversion may change.
inline std::vector<unsigned char> download_bytes(const TensorView& t) {
  std::vector<unsigned char> out(static_cast<size_t>(t.numel()) * dtype_size(t.dtype));
  copy_tensor(TensorView::matrix(out.data(), t.dtype, Device::CPU, t.rows(), t.cols()), t);
  return out;
}

// Values as stored, read back as double.
inline std::vector<double> download_values(const TensorView& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  copy_tensor(TensorView::matrix(out.data(), t.rows(), t.cols()), t);
  return out;
}

// The fresh-process determinism record (tests/gpu/fused_determinism_main.cpp): fixed seeds and
// batches (1 row, a padded tile, many tiles per warp), per batch the SHA-256 of the output bytes
// and the first and last rows in hex.
constexpr uint64_t kDeterminismParamSeed = 2026, kDeterminismInputSeed = 1202;
inline const std::vector<int64_t>& determinism_batches() {
  static const std::vector<int64_t> b = {1, 257, 65537, 524295};
  return b;
}

inline std::string hex_of(const unsigned char* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

// `net` (parameters already set) on the seeded inputs of `batch` rows, on `stream`.
inline json determinism_record(Network& net, int64_t batch, Stream stream = nullptr) {
  const std::vector<float> x = fused_test_inputs(batch, kDeterminismInputSeed + static_cast<uint64_t>(batch));
  Buffer in(Device::CUDA, x.size() * dtype_size(net.input_dtype()));
  Buffer out(Device::CUDA, static_cast<size_t>(batch) * net.padded_output_width() * dtype_size(net.output_dtype()));
  const TensorView xv = in.matrix(net.input_dtype(), batch, net.input_width(), stream);
  const TensorView yv = out.matrix(net.output_dtype(), batch, net.padded_output_width(), stream);
  copy_tensor(xv, TensorView::matrix(const_cast<float*>(x.data()), batch, net.input_width()));
  fill_tensor(yv, 0.0);
  net.inference(xv, yv);
  const std::vector<unsigned char> bytes = download_bytes(yv);
  const size_t row = bytes.size() / static_cast<size_t>(batch);
  return {{"batch", batch},
          {"sha256", sha256_hex(bytes.data(), bytes.size())},
          {"first_row", hex_of(bytes.data(), row)},
          {"last_row", hex_of(bytes.data() + bytes.size() - row, row)}};
}

// Device parameters for `net` from host values (converted to its parameter dtype), set as both
// its params and inference params.
struct DeviceParams {
  Buffer params, grads;
  DeviceParams(Network& net, const std::vector<float>& host) {
    const DType t = net.param_dtype();
    params = Buffer(Device::CUDA, host.size() * dtype_size(t));
    grads = Buffer(Device::CUDA, host.size() * dtype_size(t));
    upload(host, t);
    net.set_params(view(t), view(t), grads.vector(t, static_cast<int64_t>(host.size())));
  }
  TensorView view(DType t) const { return params.vector(t, static_cast<int64_t>(params.bytes() / dtype_size(t))); }
  // Overwrites the values in place (the network keeps pointing at the same buffer).
  void upload(const std::vector<float>& host, DType t) {
    copy_tensor(params.vector(t, static_cast<int64_t>(host.size())),
                TensorView::vector(const_cast<float*>(host.data()), static_cast<int64_t>(host.size())));
  }
};

}  // namespace tinyfuse::testing
