#include "encoding_bench.h"

#include <exception>
#include <stdexcept>

#include "limits.h"
#include "tinyfuse/buffer.h"
#include "tinyfuse/factory.h"
#include "tinyfuse/random.h"

namespace tinyfuse::bench {

namespace {

json hash_grid_config() {
  return {{"otype", "HashGrid"}, {"n_levels", 16}, {"n_features_per_level", 2}, {"log2_hashmap_size", 19},
          {"base_resolution", 16}, {"per_level_scale", 2.0}};
}

// What a forward+backward row's backward computes: parameter gradients (Overwrite) or the input
// gradient alone; None: the row times inference.
enum class Backward { None, Params, Input };

// The timed runs of one encoding row: fresh positions in [0, 1) before every run (untimed), a
// fixed random output gradient.
Stats time_encoding(Device device, Encoding& enc, uint32_t dims, int64_t batch, const TimingPlan& plan, Pcg32& rng,
                    Backward backward) {
  const uint32_t w = enc.padded_output_width();
  const DType it = enc.input_dtype(), ot = enc.output_dtype();
  Buffer in(device, batch * dims * dtype_size(it)), out(device, batch * w * dtype_size(ot));
  Buffer dout(device, batch * w * dtype_size(ot)), din(device, batch * dims * dtype_size(it));
  const TensorView iv = in.matrix(it, batch, dims), ov = out.matrix(ot, batch, w), dv = dout.matrix(ot, batch, w);
  const TensorView div = din.matrix(it, batch, dims);
  std::vector<float> x(batch * dims), g(batch * w);
  for (auto& v : g) v = rng.next_float() - 0.5f;
  copy_tensor(dv, TensorView::matrix(g.data(), batch, w));
  return time_runs(
      plan,
      [&] {
        for (auto& v : x) v = rng.next_float();
        copy_tensor(iv, TensorView::matrix(x.data(), batch, dims));
      },
      [&] {
        if (backward == Backward::Params) {
          auto ctx = enc.forward(iv, &ov);
          enc.backward(*ctx, iv, ov, dv, nullptr, false, GradientMode::Overwrite);
        } else if (backward == Backward::Input) {
          auto ctx = enc.forward(iv, &ov, false, true);
          enc.backward(*ctx, iv, ov, dv, &div, false, GradientMode::Ignore);
        } else {
          enc.inference(iv, ov);
        }
        synchronize(device, iv.stream);
      });
}

EncodingResult run_case(Device device, uint32_t dims, bool backward, int64_t batch, const TimingPlan& plan) {
  EncodingResult r;
  r.name = "HashGrid " + std::to_string(dims) + "D";
  r.mode = backward ? "forward+backward" : "forward";
  r.batch = batch;
  try {
    auto enc = create_encoding(hash_grid_config(), dims, {device});
    r.n_params = enc->n_params();
    const DType pt = enc->param_dtype();
    Buffer params(device, r.n_params * dtype_size(pt)), grads(device, r.n_params * dtype_size(pt));
    std::vector<float> host(r.n_params);
    Pcg32 rng(1337);
    enc->initialize_params(rng, host.data(), 1.0f);
    copy_tensor(params.vector(pt, r.n_params), TensorView::vector(host.data(), r.n_params));
    enc->set_params(params.vector(pt, r.n_params), params.vector(pt, r.n_params), grads.vector(pt, r.n_params));
    r.seconds = time_encoding(device, *enc, dims, batch, plan, rng, backward ? Backward::Params : Backward::None);
    r.ok = true;
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

// The parameter-free encodings of tiny-cuda-nn's models, on 3-D inputs.
struct BasicEncoding {
  const char* name;
  json config;
};

const std::vector<BasicEncoding>& basic_encodings() {
  static const std::vector<BasicEncoding> list = {
      {"Frequency 3D", {{"otype", "Frequency"}, {"n_frequencies", 12}}},
      {"TriangleWave 3D", {{"otype", "TriangleWave"}, {"n_frequencies", 12}}},
      {"OneBlob 3D", {{"otype", "OneBlob"}, {"n_bins", 32}}},
      {"SphericalHarmonics 3D", {{"otype", "SphericalHarmonics"}, {"degree", 4}}},
  };
  return list;
}

// forward: inference; forward+backward: a forward that prepares input gradients, then the
// backward's dL/dinput (these encodings have no parameters).
EncodingResult run_basic_case(Device device, const BasicEncoding& e, bool backward, int64_t batch,
                              const TimingPlan& plan) {
  EncodingResult r;
  r.name = e.name;
  r.mode = backward ? "forward+backward" : "forward";
  r.batch = batch;
  try {
    constexpr uint32_t dims = 3;
    auto enc = create_encoding(e.config, dims, {device});
    Pcg32 rng(1337);
    r.seconds = time_encoding(device, *enc, dims, batch, plan, rng, backward ? Backward::Input : Backward::None);
    r.ok = true;
  } catch (const std::exception& ex) {
    r.error = ex.what();
  }
  return r;
}

}  // namespace

std::vector<EncodingResult> run_encoding_benchmarks(Device device, const TimingPlan& plan,
                                                    const std::vector<int64_t>& batches) {
  std::vector<EncodingResult> out;
  for (uint32_t dims : {2u, 3u})
    for (bool backward : {false, true})
      for (int64_t batch : batches) out.push_back(run_case(device, dims, backward, batch, plan));
  for (const BasicEncoding& e : basic_encodings())
    for (bool backward : {false, true})
      for (int64_t batch : batches) out.push_back(run_basic_case(device, e, backward, batch, plan));
  return out;
}

TorchGridRun load_torch_grid_run(const std::string& path) {
  json doc = read_json_file(path, "--grid-compare");
  if (!doc.is_object() || !doc.contains("results") || !doc["results"].is_array())
    throw std::runtime_error("--grid-compare file '" + path + "' has no \"results\" array (torch_hashgrid.py writes one)");
  TorchGridRun run;
  run.source = path;
  run.device = doc.value("device", "");
  if (doc.contains("ceilings") && doc["ceilings"].is_object() && doc["ceilings"].contains("copy_bytes_per_s") &&
      doc["ceilings"]["copy_bytes_per_s"].is_number())
    run.copy_bytes_per_s = doc["ceilings"]["copy_bytes_per_s"].get<double>();
  for (const json& r : doc["results"]) {
    if (!r.is_object()) continue;
    TorchGridRun::Figure f;
    f.variant = r.value("variant", "");
    f.encoding = r.value("encoding", "");
    f.mode = r.value("mode", "");
    f.batch = r.value("batch", int64_t(0));
    f.samples_per_s = r.contains("samples_per_s") && r["samples_per_s"].is_number() ? r["samples_per_s"].get<double>() : 0;
    run.results.push_back(f);
  }
  return run;
}

GridComparison compare_grid(const EncodingResult& r, const TorchGridRun* torch, double copy_bytes_per_s) {
  GridComparison c;
  if (!r.ok) return c;
  const double sps = r.samples_per_second();
  if (copy_bytes_per_s > 0 && r.bytes_per_sample > 0)
    c.percent_of_copy_limit = 100.0 * sps / (copy_bytes_per_s / r.bytes_per_sample);
  if (!torch) return c;
  for (const auto& f : torch->results) {
    if (f.encoding != r.name || f.mode != r.mode || f.batch != r.batch || f.samples_per_s <= 0) continue;
    if (f.variant == "eager") c.eager = f.samples_per_s, c.x_eager = sps / f.samples_per_s;
    if (f.variant == "compile") c.compile = f.samples_per_s, c.x_compile = sps / f.samples_per_s;
  }
  return c;
}

}  // namespace tinyfuse::bench
