// tinyfuse-bench's workload suite (benchmarks/workloads): the workload files, the NeRF field W3
// composes from library objects (against the same parts composed by hand), the targets, the cost
// model, the host's losses the rows are checked with, and W4e's eikonal step (its parameter
// gradients against finite differences of its loss).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "jobs/test_pattern.h"
#include "tinyfuse/buffer.h"
#include "tinyfuse/tinyfuse.h"
#include "workloads/checks.h"
#include "workloads/comparison.h"
#include "workloads/eikonal_step.h"
#ifdef TINYFUSE_BENCH_CUDA
#include <cuda_runtime.h>

#include "core/half.h"
#include "workloads/eikonal_loss_gpu.h"
#endif
#include "workloads/model.h"
#include "workloads/nerf_field.h"
#include "workloads/spec.h"
#include "workloads/targets.h"

using namespace tinyfuse;
using namespace tinyfuse::bench;

namespace {

const WorkloadSpec& workload(const std::string& id) {
  static const std::vector<WorkloadSpec> all = load_workloads(default_workload_dir(), {"all"});
  for (const WorkloadSpec& w : all)
    if (w.id == id) return w;
  throw std::runtime_error("no workload " + id);
}

BuildOptions f64() {
  BuildOptions o;
  o.device = Device::CPU;
  o.cpu_precision = DType::F64;
  return o;
}

std::vector<double> uniform(size_t n, double lo, double hi, uint64_t seed) {
  Pcg32 rng(seed);
  std::vector<double> v(n);
  for (double& x : v) x = lo + (hi - lo) * rng.next_float();
  return v;
}

TensorView mat(std::vector<double>& v, int64_t rows, int64_t cols) { return TensorView::matrix(v.data(), rows, cols); }

}  // namespace

TEST(BenchWorkloads, TheSuiteHasFiveWorkloadsInIdOrder) {
  const auto all = load_workloads(default_workload_dir(), {"all"});
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all[0].id, "W1");
  EXPECT_EQ(all[3].id, "W4");
  EXPECT_EQ(all[4].id, "W4e");
  // W4e: W4's model with Softplus, trained with the eikonal step; the others with the Trainer's.
  EXPECT_EQ(workload("W4e").step.kind, StepSpec::Kind::Eikonal);
  EXPECT_EQ(workload("W4e").step.eikonal_weight, 0.1);
  EXPECT_EQ(workload("W4").step.kind, StepSpec::Kind::Supervised);
  EXPECT_EQ(workload("W4e").config.at("encoding"), workload("W4").config.at("encoding"));
  EXPECT_EQ(workload("W4e").config.at("network").at("activation"), "Softplus");
  EXPECT_EQ(workload("W1").config.at("encoding").at("log2_hashmap_size"), 15);
  EXPECT_EQ(workload("W2").config.at("network").at("n_neurons"), 128);
  EXPECT_TRUE(workload("W3").is_nerf_field());
  EXPECT_EQ(workload("W4").config.at("loss").at("otype"), "L1");
  const auto two = load_workloads(default_workload_dir(), {"W3", "W1"});
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].id, "W3");
}

TEST(BenchWorkloads, AnUnknownIdNamesTheKnownOnes) {
  try {
    load_workloads(default_workload_dir(), {"W9"});
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("known: W1, W2, W3, W4, W4e"), std::string::npos) << e.what();
  }
}

TEST(BenchWorkloads, AFileWithoutAFieldNamesFileAndField) {
  json doc = json::parse(R"({"id": "W9", "name": "x", "description": "", "upstream": "", "n_input_dims": 2,
                             "n_output_dims": 3, "config": {}, "batches": {"cpu": {"training": [8], "inference": [8]},
                             "cuda": {"training": [8], "inference": [8]}}})");
  try {
    parse_workload(doc, "my.json");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'my.json': no \"target\" field"), std::string::npos) << e.what();
  }
  doc["target"] = "sdf";
  EXPECT_THROW(parse_workload(doc, "my.json"), std::runtime_error);  // an SDF maps 3 dims to 1
  doc["target"] = "image";
  doc["batches"]["cpu"]["training"] = json::array({30});
  EXPECT_THROW(parse_workload(doc, "my.json"), std::runtime_error);  // log2 batch past 24
}

TEST(BenchWorkloads, AStepFieldIsChecked) {
  json doc = json::parse(R"({"id": "W9", "name": "x", "description": "", "upstream": "", "n_input_dims": 3,
                             "n_output_dims": 1, "target": "sdf", "config": {},
                             "batches": {"cpu": {"training": [8], "inference": [8]},
                                         "cuda": {"training": [8], "inference": [8]}}})");
  auto message = [&](const json& step) {
    doc["step"] = step;
    try {
      parse_workload(doc, "my.json");
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({{"otype", "Hessian"}}).find("known: Supervised, Eikonal"), std::string::npos);
  EXPECT_NE(message({{"otype", "Eikonal"}}).find("no \"eikonal_weight\" field"), std::string::npos);
  EXPECT_NE(message({{"otype", "Eikonal"}, {"eikonal_weight", -1}}).find("finite number >= 0"), std::string::npos);
  EXPECT_NE(message({{"otype", "Eikonal"}, {"eikonal_weight", 1}, {"weight", 1}}).find("not a step field"),
            std::string::npos);
  EXPECT_EQ(message({{"otype", "Eikonal"}, {"eikonal_weight", 0.5}}), "no error");
  doc["n_input_dims"] = 2u;
  doc["n_output_dims"] = 3u;
  doc["target"] = "image";
  const std::string image = message({{"otype", "Eikonal"}, {"eikonal_weight", 0.5}});
  EXPECT_NE(image.find("needs an sdf target"), std::string::npos) << image;
}

// W3's field writes the density network's outputs and the harmonics into column views of one
// buffer; the same parts run on contiguous buffers, concatenated and split by hand, must agree.
TEST(BenchWorkloads, TheNerfFieldEqualsItsPartsComposedByHand) {
  json cfg = workload("W3").config;
  cfg["density"]["encoding"]["log2_hashmap_size"] = 12;  // small: the layout, not the size, is tested
  auto field = make_nerf_field(cfg, 3, f64());
  auto density = create_network_with_input_encoding(3, 16, cfg["density"]["encoding"], cfg["density"]["network"], f64());
  auto dirs = create_encoding(cfg["direction_encoding"], 3, f64());
  auto color = create_network(cfg["color_network"], 32, 3, f64());
  ASSERT_EQ(field->n_params(), density->n_params() + color->n_params());
  ASSERT_EQ(dirs->padded_output_width(), 16u);

  const int64_t n = 37;
  const size_t P = field->n_params(), Pd = density->n_params();
  std::vector<double> params = uniform(P, -0.2, 0.2, 1), grads_f(P), grads_m(P);
  std::vector<double> input = uniform(n * 6, 0.0, 1.0, 2);
  field->set_params(TensorView::vector(params.data(), P), TensorView::vector(params.data(), P),
                    TensorView::vector(grads_f.data(), P));
  density->set_params(TensorView::vector(params.data(), Pd), TensorView::vector(params.data(), Pd),
                      TensorView::vector(grads_m.data(), Pd));
  color->set_params(TensorView::vector(params.data() + Pd, P - Pd), TensorView::vector(params.data() + Pd, P - Pd),
                    TensorView::vector(grads_m.data() + Pd, P - Pd));

  // The field.
  std::vector<double> out_f(n * 16), dout = uniform(n * 16, -1.0, 1.0, 3), din_f(n * 6);
  const TensorView of = mat(out_f, n, 16);
  TensorView dif = mat(din_f, n, 6);
  auto ctx = field->forward(mat(input, n, 6), &of, false, true);
  field->backward(*ctx, mat(input, n, 6), of, mat(dout, n, 16), &dif, false, GradientMode::Overwrite);

  // By hand: contiguous position and direction, features concatenated, their gradient split.
  std::vector<double> pos(n * 3), dir(n * 3), d(n * 16), e(n * 16), cat(n * 32), out_m(n * 16), dcat(n * 32);
  for (int64_t i = 0; i < n; ++i)
    for (int k = 0; k < 3; ++k) pos[i * 3 + k] = input[i * 6 + k], dir[i * 3 + k] = input[i * 6 + 3 + k];
  const TensorView dv = mat(d, n, 16), ev = mat(e, n, 16), om = mat(out_m, n, 16);
  auto dctx = density->forward(mat(pos, n, 3), &dv, false, true);
  auto ectx = dirs->forward(mat(dir, n, 3), &ev, false, true);
  for (int64_t i = 0; i < n; ++i)
    for (int k = 0; k < 16; ++k) cat[i * 32 + k] = d[i * 16 + k], cat[i * 32 + 16 + k] = e[i * 16 + k];
  auto cctx = color->forward(mat(cat, n, 32), &om, false, true);
  TensorView dcv = mat(dcat, n, 32);
  color->backward(*cctx, mat(cat, n, 32), om, mat(dout, n, 16), &dcv, false, GradientMode::Overwrite);
  std::vector<double> dd(n * 16), de(n * 16), dpos(n * 3), ddir(n * 3);
  for (int64_t i = 0; i < n; ++i)
    for (int k = 0; k < 16; ++k) dd[i * 16 + k] = dcat[i * 32 + k], de[i * 16 + k] = dcat[i * 32 + 16 + k];
  TensorView dpv = mat(dpos, n, 3), ddv = mat(ddir, n, 3);
  density->backward(*dctx, mat(pos, n, 3), dv, mat(dd, n, 16), &dpv, false, GradientMode::Overwrite);
  dirs->backward(*ectx, mat(dir, n, 3), ev, mat(de, n, 16), &ddv, false, GradientMode::Overwrite);

  double grid_grad = 0;
  for (size_t i = 0; i < out_f.size(); ++i) ASSERT_NEAR(out_f[i], out_m[i], 1e-12) << "output " << i;
  for (size_t i = 0; i < P; ++i) ASSERT_NEAR(grads_f[i], grads_m[i], 1e-12) << "parameter gradient " << i;
  for (size_t i = 32 * 64 + 64 * 16; i < Pd; ++i) grid_grad += std::fabs(grads_m[i]);  // the grid's: after its network's
  for (int64_t i = 0; i < n; ++i)
    for (int k = 0; k < 3; ++k) {
      ASSERT_NEAR(din_f[i * 6 + k], dpos[i * 3 + k], 1e-12);
      ASSERT_NEAR(din_f[i * 6 + 3 + k], ddir[i * 3 + k], 1e-12);
    }
  // The comparison saw real signal: outputs, grid gradients and direction gradients are not zero.
  double out_sum = 0, dir_sum = 0;
  for (double v : out_f) out_sum += std::fabs(v);
  for (double v : ddir) dir_sum += std::fabs(v);
  EXPECT_GT(out_sum, 1.0);
  EXPECT_GT(grid_grad, 1e-3);
  EXPECT_GT(dir_sum, 1e-3);
}

// The field's training pass (its colour network's forward_backward_with_loss, then the density
// network and the harmonics back from dL/dfeatures) equals forward, the loss and backward in turn.
TEST(BenchWorkloads, TheNerfFieldTrainingPassEqualsForwardLossBackward) {
  json cfg = workload("W3").config;
  cfg["density"]["encoding"]["log2_hashmap_size"] = 12;
  auto field = make_nerf_field(cfg, 3, f64());
  auto loss = create_loss({{"otype", "L2"}}, f64());
  const int64_t n = 37;
  const size_t P = field->n_params();
  std::vector<double> params = uniform(P, -0.2, 0.2, 1), input = uniform(n * 6, 0.0, 1.0, 2);
  std::vector<double> target = uniform(n * 3, 0.0, 1.0, 3);
  const TensorView in = mat(input, n, 6), tv = mat(target, n, 3), pv = TensorView::vector(params.data(), P);
  struct Pass {
    std::vector<double> grads, values, din;
  };
  auto run = [&](bool one_call) {
    Pass r{std::vector<double>(P, NAN), std::vector<double>(n, NAN), std::vector<double>(n * 6, NAN)};
    std::vector<double> out(n * 16), loss_grads(n * 16);
    field->set_params(pv, pv, TensorView::vector(r.grads.data(), P));
    const TensorView o = mat(out, n, 16), values = mat(r.values, n, 1), lg = mat(loss_grads, n, 16);
    TensorView din = mat(r.din, n, 6);
    if (one_call) {
      field->forward_backward_with_loss(in, o, *loss, 1.0f, tv, values, lg, nullptr, GradientMode::Overwrite, &din);
    } else {
      auto ctx = field->forward(in, &o, false, true);
      loss->evaluate(1.0f, o, tv, values, lg);
      field->backward(*ctx, in, o, lg, &din, false, GradientMode::Overwrite);
    }
    return r;
  };
  const Pass a = run(true), b = run(false);
  double grad_sum = 0, din_sum = 0;
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(a.values[i], b.values[i], 1e-12) << "loss value " << i;
  for (size_t i = 0; i < P; ++i) {
    ASSERT_NEAR(a.grads[i], b.grads[i], 1e-12) << "parameter gradient " << i;
    grad_sum += std::fabs(a.grads[i]);
  }
  for (size_t i = 0; i < a.din.size(); ++i) {
    ASSERT_NEAR(a.din[i], b.din[i], 1e-12) << "dL/dinput " << i;
    din_sum += std::fabs(a.din[i]);
  }
  EXPECT_GT(grad_sum, 1e-3);
  EXPECT_GT(din_sum, 1e-6);
}

TEST(BenchWorkloads, TargetsAreTheDocumentedFields) {
  // Image: at a pixel centre, that pixel of the 256 x 256 test pattern.
  const auto image = jobs::make_test_pattern(256);
  const float xy[2] = {(10 + 0.5f) / 256, (200 + 0.5f) / 256};
  float rgb[3];
  target_values(TargetKind::Image, xy, 1, rgb);
  for (int c = 0; c < 3; ++c) EXPECT_FLOAT_EQ(rgb[c], image.pixel(10, 200)[c]);
  // SDF: the sphere's centre is 0.25 inside, a point on the torus's core circle 0.06 inside, a
  // corner outside.
  const float p[9] = {0.4f, 0.5f, 0.5f, 0.85f, 0.5f, 0.5f, 0.0f, 0.0f, 0.0f};
  float sdf[3];
  target_values(TargetKind::Sdf, p, 3, sdf);
  EXPECT_NEAR(sdf[0], -0.25f, 1e-6);
  EXPECT_NEAR(sdf[1], -0.06f, 1e-6);
  EXPECT_GT(sdf[2], 0.3f);
  // Radiance: inside [0.05, 0.95] (the Sigmoid's range), from positions in the cube and unit
  // directions given as (d + 1) / 2.
  Pcg32 rng(5);
  std::vector<float> in(6000), out(3000);
  make_target_field(TargetKind::Radiance)->sample(rng, 1000, in.data(), out.data());
  for (int i = 0; i < 1000; ++i) {
    double norm = 0;
    for (int k = 0; k < 3; ++k) norm += std::pow(2.0 * in[i * 6 + 3 + k] - 1.0, 2);
    ASSERT_NEAR(norm, 1.0, 1e-5);
    for (int c = 0; c < 3; ++c) ASSERT_TRUE(out[i * 3 + c] >= 0.05f && out[i * 3 + c] <= 0.95f) << out[i * 3 + c];
  }
}

TEST(BenchWorkloads, TheCostCountsEveryLayerAtItsComputedWidth) {
  // W1: 32 grid features -> 64 -> 64 -> 16 (3 outputs padded to 16).
  const WorkloadCost w1 = workload_cost(workload("W1"));
  EXPECT_EQ(w1.forward_flop, 2.0 * (32 * 64 + 64 * 64 + 64 * 16));
  ASSERT_EQ(w1.grids.size(), 1u);
  EXPECT_EQ(w1.grids[0].dims, 2u);
  EXPECT_EQ(w1.grid_bytes_per_sample(2, false), 16.0 * 4 * 2 * 2);
  EXPECT_EQ(w1.grid_bytes_per_sample(2, true), 16.0 * 4 * 2 * (2 + 4));
  // W2: OneBlob 2 x 64 = 128 -> 128 x 5 -> 16; no grid.
  const WorkloadCost w2 = workload_cost(workload("W2"));
  EXPECT_EQ(w2.forward_flop, 2.0 * (128 * 128 * 5 + 128 * 16));
  EXPECT_TRUE(w2.grids.empty());
  // W3: density 32 -> 64 -> 16, colour (16 + 16) -> 64 -> 64 -> 16.
  const WorkloadCost w3 = workload_cost(workload("W3"));
  EXPECT_EQ(w3.forward_flop, 2.0 * (32 * 64 + 64 * 16) + 2.0 * (32 * 64 + 64 * 64 + 64 * 16));
  ASSERT_EQ(w3.grids.size(), 1u);
  EXPECT_EQ(w3.grids[0].dims, 3u);
  EXPECT_EQ(w3.flop_per_sample(true), 3 * w3.forward_flop);
  // W4e: W4's forward; the eikonal step's halves 3 and 5 sweeps, 4 per sample.
  const WorkloadCost w4 = workload_cost(workload("W4")), w4e = workload_cost(workload("W4e"));
  EXPECT_EQ(w4e.forward_flop, w4.forward_flop);
  EXPECT_EQ(w4e.flop_per_sample(true), 4 * w4.forward_flop);
}

// The host's loss (the first training step's check, the inference rows' error) is the library's.
TEST(BenchWorkloads, TheHostLossIsTheLibrarysLoss) {
  const int64_t n = 9, width = 16, n_out = 3;
  std::vector<double> pred = uniform(n * width, -1.0, 1.0, 7), values(n * width), grads(n * width);
  std::vector<float> target(n * n_out), pred_f(pred.begin(), pred.end());
  for (size_t i = 0; i < target.size(); ++i) target[i] = static_cast<float>(0.1 * i - 0.5);
  std::vector<double> target_d(target.begin(), target.end());
  for (const char* otype : {"L2", "L1", "RelativeL2"}) {
    auto loss = create_loss({{"otype", otype}}, f64());
    loss->evaluate(1.0f, mat(pred, n, width), mat(target_d, n, n_out), mat(values, n, width), mat(grads, n, width));
    double sum = 0;
    for (double v : values) sum += v;
    const auto host = host_loss(otype, pred_f.data(), width, target.data(), n, n_out);
    ASSERT_TRUE(host.has_value()) << otype;
    EXPECT_NEAR(*host, sum, 1e-6 * std::fabs(sum)) << otype;
  }
  EXPECT_FALSE(host_loss("Variance", pred_f.data(), width, target.data(), n, n_out).has_value());
}

// The eikonal loss on rows worked by hand: an L1 row and an eikonal row.
TEST(BenchWorkloads, TheEikonalLossIsL1PlusTheWeightedEikonalTerm) {
  const float f[4] = {0.3f, 9.0f, 0.0f, -1.0f};  // stride 2: rows' values 0.3 and 0.0
  const float grad[6] = {5, 5, 5, 0, 0.6f, 0.8f * 2};
  const float target[2] = {0.1f, 123.0f};  // the eikonal row's target is unused
  float dL_df[4] = {7, 7, 7, 7}, dL_dgrad[6];
  const double loss = eikonal_workload_loss(2, f, 2, grad, target, 0.1, 2.0, dL_df, dL_dgrad);
  const double norm = std::sqrt(0.36 + 2.56);
  EXPECT_NEAR(loss, 0.2 + 0.1 * (norm - 1) * (norm - 1), 1e-7);
  EXPECT_EQ(dL_df[0], 2.0f);  // scale * sign(0.3 - 0.1) / 1 row
  EXPECT_EQ(dL_df[2], 0.0f);
  EXPECT_EQ(dL_df[1], 7.0f);  // the padding column is not written
  for (int k = 0; k < 3; ++k) EXPECT_EQ(dL_dgrad[k], 0.0f);
  EXPECT_NEAR(dL_dgrad[4], 2.0 * 0.1 * 2 * (norm - 1) * 0.6 / norm, 1e-6);
  EXPECT_NEAR(dL_dgrad[5], 2.0 * 0.1 * 2 * (norm - 1) * 1.6 / norm, 1e-6);
}

#ifdef TINYFUSE_BENCH_CUDA
// The GPU kernel of the same loss (what W4e's step runs on a GPU) against the host's, on fresh
// random rows with FP16 values (the fused network's output) and FP32 input gradients, a few of
// them zero (no eikonal gradient) and exact ties (L1 sign 0); outputs poisoned with NaN first.
TEST(BenchWorkloads, TheGpuEikonalLossMatchesTheHosts) {
  if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  const int64_t n_l1 = 1018, n_eik = 1019, width = 16;  // the host's split: n / 2 L1 rows
  auto to_half = [](float v) { return half_bits_to_float(float_to_half_bits(v)); };
  Pcg32 rng(17);
  std::vector<float> f(size_t((n_l1 + n_eik) * width)), grad(size_t((n_l1 + n_eik) * 3), 0.0f), target(size_t(n_l1 + n_eik));
  for (auto& v : f) v = to_half(2 * rng.next_float() - 1);  // values FP16 can hold
  for (auto& v : target) v = 2 * rng.next_float() - 1;
  for (int64_t r = n_l1; r < n_l1 + n_eik; ++r)
    for (int k = 0; k < 3; ++k) grad[size_t(3 * r + k)] = r % 97 == 0 ? 0.0f : 3 * rng.next_float() - 1.5f;
  target[5] = f[5 * width];  // a tie: dL/df is 0 there
  std::vector<float> want_df(f.size(), 0.0f), want_dg(grad.size(), 0.0f);
  const double scale = 128, weight = 0.1;
  static_assert((1018 + 1019) / 2 == 1018);
  const double want = eikonal_workload_loss(n_l1 + n_eik, f.data(), width, grad.data(), target.data(), weight, scale,
                                            want_df.data(), want_dg.data());
  // On the GPU: f (FP16, all rows), grad (FP32, the eikonal rows), dL_df (FP16, the L1 rows).
  Buffer fd(Device::CUDA, f.size() * 2), gd(Device::CUDA, size_t(n_eik) * 3 * 4), td(Device::CUDA, target.size() * 4),
      dfd(Device::CUDA, size_t(n_l1 * width) * 2), dgd(Device::CUDA, size_t(n_eik) * 3 * 4), sums(Device::CUDA, 16);
  const auto fv = fd.matrix(DType::F16, n_l1 + n_eik, width), gv = gd.matrix(DType::F32, n_eik, 3);
  const auto dfv = dfd.matrix(DType::F16, n_l1, width), dgv = dgd.matrix(DType::F32, n_eik, 3);
  copy_tensor(fv, TensorView::matrix(f.data(), n_l1 + n_eik, width));
  copy_tensor(gv, TensorView::matrix(grad.data() + 3 * n_l1, n_eik, 3));
  copy_tensor(td.matrix(DType::F32, n_l1 + n_eik, 1), TensorView::matrix(target.data(), n_l1 + n_eik, 1));
  std::vector<float> poison_df(size_t(n_l1 * width), NAN), poison_dg(size_t(n_eik) * 3, NAN);
  for (int64_t r = 0; r < n_l1; ++r)
    for (int64_t c = 1; c < width; ++c) poison_df[size_t(r * width + c)] = 0.0f;  // the step zeroes them once
  copy_tensor(dfv, TensorView::matrix(poison_df.data(), n_l1, width));
  copy_tensor(dgv, TensorView::matrix(poison_dg.data(), n_eik, 3));
  ASSERT_EQ(cudaMemset(sums.data(), 0, 16), cudaSuccess);
  ASSERT_EQ(queue_eikonal_workload_loss(n_l1, n_eik, GpuMatrix{fd.data(), width, true}, static_cast<float*>(td.data()), 1,
                                        GpuMatrix{gd.data(), 3, false}, weight, scale, GpuMatrix{dfd.data(), width, true},
                                        GpuMatrix{dgd.data(), 3, false}, static_cast<double*>(sums.data()), nullptr),
            cudaSuccess);
  double got_sums[2];
  ASSERT_EQ(cudaMemcpy(got_sums, sums.data(), 16, cudaMemcpyDeviceToHost), cudaSuccess);
  const double got = got_sums[0] / n_l1 + weight * got_sums[1] / n_eik;
  EXPECT_NEAR(got, want, 1e-12 * want);
  std::vector<float> got_df(size_t(n_l1 * width)), got_dg(size_t(n_eik) * 3);
  copy_tensor(TensorView::matrix(got_df.data(), n_l1, width), dfv);
  copy_tensor(TensorView::matrix(got_dg.data(), n_eik, 3), dgv);
  for (int64_t r = 0; r < n_l1; ++r)  // the FP16 rounding of the host's FP32 value
    for (int64_t c = 0; c < width; ++c)
      ASSERT_EQ(got_df[size_t(r * width + c)], to_half(want_df[size_t(r * width + c)])) << r << "," << c;
  EXPECT_EQ(got_df[size_t(5 * width)], 0.0f);
  for (size_t i = 0; i < got_dg.size(); ++i)
    ASSERT_NEAR(got_dg[i], want_dg[size_t(3 * n_l1) + i], 1e-6 * std::fabs(want_dg[size_t(3 * n_l1) + i]) + 1e-12) << i;
}
#endif

// W4e's step (forward, input gradient, backward, backward_backward_input) writes the gradient of
// its loss: against central differences of the loss computed from the FP64 model's values and
// analytic input gradients, for MLP weights and the grid entries with the largest gradients.
TEST(BenchWorkloads, TheEikonalStepsGradientIsItsLossesDerivative) {
  WorkloadSpec w = workload("W4e");
  w.config["encoding"]["log2_hashmap_size"] = 12;  // small: the step, not the size, is tested
  w.config["encoding"]["n_levels"] = 6;
  WorkloadModel m = build_workload_model(w, f64(), 3);
  // Grid entries away from their tiny initial values: the input gradient is then far from 0,
  // where |grad_x f| has its kink (differences across it would average the two sides).
  {
    std::vector<float> p = m.trainer->params_host();
    Pcg32 jitter(4);
    for (size_t i = p.size() - workload_cost(w).grids.at(0).n_params; i < p.size(); ++i)
      p[i] += 0.1f * (2 * jitter.next_float() - 1);
    m.trainer->set_params_host(p);
  }
  const int64_t n = 32;
  Pcg32 rng(11);
  std::vector<float> x(n * 3), t(n);
  make_target_field(TargetKind::Sdf)->sample(rng, n, x.data(), t.data());
  EikonalStep step(m, n, w.step.eikonal_weight, nullptr);
  std::vector<double> x64(x.begin(), x.end());  // the FP64 model's input dtype
  step.gradients(TensorView::matrix(x64.data(), n, 3), TensorView::matrix(t.data(), n, 1));
  const double loss = step.last_loss();

  const std::vector<float> params = m.trainer->params_host();
  std::vector<float> grads(params.size());
  copy_tensor(TensorView::matrix(grads.data(), 1, static_cast<int64_t>(grads.size())),
              TensorView::matrix(m.trainer->gradients().data, m.trainer->gradients().dtype, Device::CPU, 1,
                                 m.trainer->gradients().numel()));
  auto host_loss_at = [&](const std::vector<float>& p) {
    uint32_t width = 0;
    const std::vector<double> f = cpu_reference_outputs(w, p, x.data(), n, &width);
    const std::vector<double> g = cpu_reference_input_gradients(w, p, x.data(), n);
    return eikonal_workload_loss(n, f.data(), width, g.data(), t.data(), w.step.eikonal_weight, 1.0, nullptr, nullptr);
  };
  EXPECT_NEAR(loss, host_loss_at(params), 1e-6 * loss);

  // The MLP's weights come first (16 -> 64 -> 64 -> 16 without biases), then the grid's.
  const size_t mlp = params.size() - workload_cost(w).grids.at(0).n_params;
  ASSERT_EQ(mlp, 16u * 64 + 64 * 64 + 64 * 16);
  std::vector<size_t> picks = {0, 5, 16 * 64 + 7, 16 * 64 + 64 * 64 + 3, mlp - 16};
  std::vector<size_t> grid(params.size() - mlp);
  for (size_t i = 0; i < grid.size(); ++i) grid[i] = mlp + i;
  std::partial_sort(grid.begin(), grid.begin() + 4, grid.end(),
                    [&](size_t a, size_t b) { return std::fabs(grads[a]) > std::fabs(grads[b]); });
  picks.insert(picks.end(), grid.begin(), grid.begin() + 4);
  double largest = 0;
  for (size_t i : picks) {
    std::vector<float> plus = params, minus = params;
    plus[i] += 1e-3f;
    minus[i] -= 1e-3f;
    const double fd = (host_loss_at(plus) - host_loss_at(minus)) / (double(plus[i]) - double(minus[i]));
    largest = std::max(largest, std::fabs(fd));
    EXPECT_NEAR(grads[i], fd, 1e-3 * (std::fabs(fd) + 1e-3)) << "parameter " << i;
  }
  EXPECT_GT(largest, 1e-3);  // the comparison saw real gradients
}

// Upstream has no second derivatives: an eikonal row takes tinycudann's finite-difference
// workaround (tcnn_workloads.py --eikonal-gradient fd) only where no direct figure exists.
TEST(BenchWorkloads, UpstreamsEikonalFigureFallsBackToItsFiniteDifferenceWorkaround) {
  WorkloadRow row;
  row.id = "W4e", row.device = "cuda", row.mode = Mode::Training, row.batch = 1 << 18;
  auto figure = [&](const std::string& variant, std::optional<double> samples_per_s) {
    WorkloadFigure f;
    f.variant = variant, f.workload = "W4e", f.mode = "training", f.device = "cuda", f.batch = row.batch;
    f.samples_per_s = samples_per_s;
    if (!samples_per_s) f.error = "no backward_backward_input";
    return f;
  };
  WorkloadFigures figures;
  figures.figures = {figure("tinycudann-jit", std::nullopt), figure("tinycudann-jit-fd", 5e6), figure("tinycudann-fd", 4e6)};
  ASSERT_NE(figures.upstream(row, true), nullptr);
  EXPECT_EQ(figures.upstream(row, true)->variant, "tinycudann-jit-fd");
  EXPECT_EQ(figures.upstream(row, false)->variant, "tinycudann-fd");
  figures.figures.push_back(figure("tinycudann-jit", 9e6));  // a direct figure wins
  figures.figures.erase(figures.figures.begin());
  EXPECT_EQ(figures.upstream(row, true)->variant, "tinycudann-jit");
}
