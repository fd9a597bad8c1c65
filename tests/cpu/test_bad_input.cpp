// The bad-input matrix (docs/ERRORS.md): every public entry point that takes tensors (networks of
// each CPU otype, encodings, NetworkWithInputEncoding, losses, the Trainer) against each kind of
// bad input. Each case expects one error type whose message names the argument, and checks that
// nothing was written: the output buffers keep their sentinel, the parameters, gradients and
// optimizer state are bitwise unchanged, and the object still computes what it did before.
// Config-key and checkpoint-file errors have their own suites (test_config.cpp,
// test_checkpoint.cpp); this file adds only the entry points and inputs they do not reach.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "core/host_memory.h"
#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;

namespace {

constexpr int64_t kBatch = 8;
constexpr float kSentinel = -12345.0f;
constexpr int64_t kHugeBatch = int64_t(1) << 40;     // scratch memory of terabytes: more than any machine here
constexpr int64_t kOverflowBatch = int64_t(1) << 61;  // rows x width x bytes overflows 64 bits

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// ---- subjects: one object per public kind, each with its own Trainer (parameters, optimizer) ----

struct Subject {
  std::string name;
  std::function<Model()> make;
  bool scratch_per_batch;  // allocates memory proportional to the batch (so a huge batch is refused)
  bool keeps_forward_state = true;  // backward() reads what forward() kept (else it cannot tell a foreign context)
};

void PrintTo(const Subject& s, std::ostream* os) { *os << s.name; }

Model with_trainer(std::shared_ptr<DifferentiableObject> object, const BuildOptions& options = {}) {
  Model m;
  m.network = std::move(object);
  m.loss = create_loss({{"otype", "L2"}}, options);
  m.optimizer = create_optimizer({{"otype", "Adam"}, {"learning_rate", 1e-2}}, options);
  m.trainer = std::make_shared<Trainer>(m.network, m.optimizer, m.loss, 1337);
  return m;
}

Subject network(const std::string& otype, uint32_t n_in, DType precision = DType::F32) {
  const std::string name = otype + "_" + std::to_string(n_in) + "in" + (precision == DType::F64 ? "_f64" : "");
  return {name,
          [=] {
            json net = {{"otype", otype}, {"n_neurons", 16}, {"n_hidden_layers", 2}, {"activation", "Tanh"}};
            return create_from_config(n_in, 3, {{"loss", {{"otype", "L2"}}}, {"network", net}}, {Device::CPU, precision});
          },
          true};
}

Subject network_with_encoding(const std::string& name, json encoding, uint32_t n_in, const std::string& otype) {
  return {name,
          [=] {
            json net = {{"otype", otype}, {"n_neurons", 16}, {"n_hidden_layers", 1}, {"activation", "SiLU"}};
            return create_from_config(n_in, 2, {{"loss", {{"otype", "L2"}}}, {"encoding", encoding}, {"network", net}});
          },
          true};
}

Subject encoding(const std::string& name, json config, uint32_t n_in, bool scratch_per_batch = false,
                 bool keeps_forward_state = true) {
  return {name, [=] { return with_trainer(create_encoding(config, n_in)); }, scratch_per_batch, keeps_forward_state};
}
// Encodings computed row by row from the input alone: backward needs nothing from forward.
Subject stateless_encoding(const std::string& name, json config, uint32_t n_in) {
  return encoding(name, std::move(config), n_in, false, false);
}

std::vector<Subject> subjects() {
  return {
      network("PortableMLP", 2),
      network("PortableMLP", 2, DType::F64),
      network("FullyFusedMLP", 16),
      network("CutlassMLP", 16),
      network_with_encoding("HashGrid_PortableMLP", {{"otype", "HashGrid"}, {"n_levels", 4}, {"log2_hashmap_size", 8}}, 2, "PortableMLP"),
      network_with_encoding("Identity_FullyFusedMLP", {{"otype", "Identity"}}, 3, "FullyFusedMLP"),
      encoding("HashGrid", {{"otype", "HashGrid"}, {"n_levels", 4}, {"log2_hashmap_size", 8}, {"base_resolution", 4}}, 3),
      encoding("DenseGrid", {{"otype", "DenseGrid"}, {"n_levels", 2}, {"base_resolution", 4}}, 2),
      encoding("TiledGrid", {{"otype", "TiledGrid"}, {"n_levels", 2}, {"base_resolution", 4}, {"n_features_per_level", 4}}, 2),
      stateless_encoding("Frequency", {{"otype", "Frequency"}, {"n_frequencies", 3}}, 2),
      stateless_encoding("TriangleWave", {{"otype", "TriangleWave"}, {"n_frequencies", 3}}, 2),
      stateless_encoding("OneBlob", {{"otype", "OneBlob"}, {"n_bins", 8}}, 2),
      stateless_encoding("SphericalHarmonics", {{"otype", "SphericalHarmonics"}, {"degree", 3}}, 3),
      stateless_encoding("Identity", {{"otype", "Identity"}, {"scale", 2.0}}, 2),
      encoding("Composite",
               {{"otype", "Composite"},
                {"nested", {{{"otype", "OneBlob"}, {"n_bins", 4}, {"n_dims_to_encode", 1}}, {{"otype", "HashGrid"}, {"n_levels", 2}}}}},
               3, /*scratch_per_batch=*/true),
  };
}

// ---- what must not change when a call fails ----

struct State {
  std::vector<float> params, gradients, optimizer_state;
  uint32_t steps;
  float loss_scale, learning_rate;
  bool operator==(const State& o) const {
    auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
      return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
    };
    return same(params, o.params) && same(gradients, o.gradients) && same(optimizer_state, o.optimizer_state) &&
           steps == o.steps && loss_scale == o.loss_scale && learning_rate == o.learning_rate;
  }
};

std::vector<float> gradients_as_f32(const Trainer& t) {
  const TensorView g = t.gradients();
  std::vector<float> out(static_cast<size_t>(g.numel()));
  if (!out.empty()) copy_tensor(TensorView::matrix(out.data(), 1, g.numel()), TensorView::matrix(g.data, g.dtype, g.device, 1, g.numel()));
  return out;
}

State state_of(const Model& m) {
  return {m.trainer->params_host(), gradients_as_f32(*m.trainer), m.trainer->optimizer().state_data(),
          m.trainer->optimizer().step_count(), m.trainer->loss_scale(), m.trainer->optimizer().learning_rate()};
}

// ---- host buffers in the object's dtype ----

struct Host {
  DType dtype;
  std::vector<double> f64;
  std::vector<float> f32;
  Host(DType t, size_t n, double fill) : dtype(t) {
    if (t == DType::F64) f64.assign(n, fill);
    else f32.assign(n, static_cast<float>(fill));
  }
  void* data() { return dtype == DType::F64 ? static_cast<void*>(f64.data()) : static_cast<void*>(f32.data()); }
  const char* bytes() const {
    return dtype == DType::F64 ? reinterpret_cast<const char*>(f64.data()) : reinterpret_cast<const char*>(f32.data());
  }
  double get(size_t i) const { return dtype == DType::F64 ? f64[i] : f32[i]; }
  void set(size_t i, double v) {
    if (dtype == DType::F64) f64[i] = v;
    else f32[i] = static_cast<float>(v);
  }
  size_t size() const { return dtype == DType::F64 ? f64.size() : f32.size(); }
  TensorView matrix(int64_t rows, int64_t cols) { return TensorView::matrix(data(), dtype, Device::CPU, rows, cols); }
  // Bitwise comparison (NaN == NaN).
  bool same(const Host& o) const {
    return dtype == o.dtype && size() == o.size() && std::memcmp(bytes(), o.bytes(), size() * dtype_size(dtype)) == 0;
  }
  bool all_sentinel() const {
    for (size_t i = 0; i < size(); ++i)
      if (get(i) != kSentinel) return false;
    return true;
  }
};

DType other_dtype(DType t) { return t == DType::F64 ? DType::F32 : DType::F64; }

// One object under test with valid inputs and outputs of kBatch rows.
struct Bench {
  Model m;
  DifferentiableObject& obj;
  DType dt;
  int64_t n_in, padded;
  Host x, out, dout, dx;

  explicit Bench(Model model)
      : m(std::move(model)),
        obj(*m.network),
        dt(obj.input_dtype()),
        n_in(obj.input_width()),
        padded(obj.padded_output_width()),
        x(dt, kBatch * n_in, 0),
        out(dt, kBatch * padded, kSentinel),
        dout(dt, kBatch * padded, 0),
        dx(dt, kBatch * n_in, kSentinel) {
    Pcg32 rng(5);
    for (size_t i = 0; i < x.size(); ++i) x.set(i, rng.next_float());
    for (size_t i = 0; i < dout.size(); ++i) dout.set(i, rng.next_float() - 0.5);
  }
  TensorView in() { return x.matrix(kBatch, n_in); }
  TensorView output() { return out.matrix(kBatch, padded); }
  TensorView d_output() { return dout.matrix(kBatch, padded); }
  TensorView d_input() { return dx.matrix(kBatch, n_in); }
  void reset_outputs() {
    for (size_t i = 0; i < out.size(); ++i) out.set(i, kSentinel);
    for (size_t i = 0; i < dx.size(); ++i) dx.set(i, kSentinel);
  }
  Host inference_of(TensorView input) {
    Host o(dt, static_cast<size_t>(input.rows() * padded), kSentinel);
    obj.inference(input, o.matrix(input.rows(), padded));
    return o;
  }
};

// ---- the cases ----

enum class Expect { Shape, OutOfMemory, Error };

struct Case {
  std::string name;
  Expect expect;
  std::string needle;  // a word the message must contain (names the argument or the rule)
  std::function<void(Bench&)> call;
  bool needs_scratch_per_batch = false;
  bool needs_forward_state = false;
  bool gradients_may_change = false;  // a refused non-finite step leaves its gradients (docs/ERRORS.md)
};

TensorView on_cuda(TensorView t) {
  t.device = Device::CUDA;
  return t;
}
TensorView with_dtype(TensorView t, DType d) {
  t.dtype = d;
  return t;
}
TensorView rows(TensorView t, int64_t r) {
  t.shape[0] = r;
  return t;
}

// The three calls every differentiable object has, each given views made by `make`.
using ViewsFn = std::function<void(Bench&, TensorView& in, TensorView& out)>;
std::vector<Case> on_every_call(const std::string& what, Expect expect, const std::string& needle, ViewsFn views,
                                bool needs_scratch = false) {
  std::vector<Case> cases = {
      {what + " -> inference", expect, needle,
       [views](Bench& b) {
         TensorView in = b.in(), out = b.output();
         views(b, in, out);
         b.obj.inference(in, out);
       },
       needs_scratch},
      {what + " -> forward", expect, needle,
       [views](Bench& b) {
         TensorView in = b.in(), out = b.output();
         views(b, in, out);
         b.obj.forward(in, &out);
       },
       needs_scratch},
      {what + " -> backward", expect, needle,
       [views](Bench& b) {
         Host forward_out(b.dt, kBatch * b.padded, 0);
         TensorView out = forward_out.matrix(kBatch, b.padded);
         auto ctx = b.obj.forward(b.in(), &out);
         TensorView in = b.in(), unused = b.output();
         views(b, in, unused);
         TensorView dx = b.d_input();
         b.obj.backward(*ctx, in, out, b.d_output(), &dx);
       },
       needs_scratch},
  };
  // backward's `output` is the one forward() wrote; objects that do not need it do not read it.
  if (contains(what, "output")) cases.pop_back();
  // backward's batch is forward's, and forward refuses a batch that cannot fit: for backward a
  // larger batch is first of all one other than forward's (a case of its own below).
  if (expect == Expect::OutOfMemory) cases.pop_back();
  return cases;
}

std::vector<Case> object_cases() {
  std::vector<Case> cases;
  auto add = [&](std::vector<Case> more) { cases.insert(cases.end(), more.begin(), more.end()); };
  static std::vector<double> spare(4096 * 16);  // memory for views of the wrong dtype or width

  add(on_every_call("input with one column too many", Expect::Shape, "input", [](Bench& b, TensorView& in, TensorView&) {
    in = TensorView::matrix(spare.data(), b.dt, Device::CPU, kBatch, b.n_in + 1);
  }));
  add(on_every_call("input of the other dtype", Expect::Shape, "dtype", [](Bench& b, TensorView& in, TensorView&) {
    in = TensorView::matrix(spare.data(), other_dtype(b.dt), Device::CPU, kBatch, b.n_in);
  }));
  add(on_every_call("input on another device", Expect::Shape, "must be on cpu",
                    [](Bench&, TensorView& in, TensorView&) { in = on_cuda(in); }));
  add(on_every_call("1-D input", Expect::Shape, "2-D", [](Bench& b, TensorView& in, TensorView&) {
    in = TensorView::vector(in.data, b.dt, Device::CPU, kBatch * b.n_in);
  }));
  add(on_every_call("input with a null pointer", Expect::Shape, "null", [](Bench&, TensorView& in, TensorView&) { in.data = nullptr; }));
  add(on_every_call("input with negative rows", Expect::Shape, "input", [](Bench&, TensorView& in, TensorView&) { in.shape[0] = -3; }));
  add(on_every_call("input with overlapping rows", Expect::Shape, "overlap", [](Bench& b, TensorView& in, TensorView&) {
    if (b.n_in < 2) in.shape[1] = 2;  // (never: every subject has >= 2 inputs)
    in.strides[0] = 1;
  }));
  add(on_every_call("output with one row too few", Expect::Shape, "output", [](Bench&, TensorView&, TensorView& out) { out = rows(out, kBatch - 1); }));
  add(on_every_call("output with one column too many", Expect::Shape, "output", [](Bench& b, TensorView&, TensorView& out) {
    out = TensorView::matrix(spare.data(), b.dt, Device::CPU, kBatch, b.padded + 1);
  }));
  add(on_every_call("output of the other dtype", Expect::Shape, "dtype", [](Bench& b, TensorView&, TensorView& out) {
    out = TensorView::matrix(spare.data(), other_dtype(b.dt), Device::CPU, kBatch, b.padded);
  }));
  add(on_every_call("output on another device", Expect::Shape, "must be on cpu",
                    [](Bench&, TensorView&, TensorView& out) { out = on_cuda(out); }));
  // Memory: the batch's scratch cannot fit, or its size does not even fit in 64 bits.
  add(on_every_call("a batch whose scratch exceeds the machine's memory", Expect::OutOfMemory, "out of memory: needed",
                    [](Bench&, TensorView& in, TensorView& out) { in = rows(in, kHugeBatch), out = rows(out, kHugeBatch); },
                    true));
  add(on_every_call("a batch whose scratch size overflows", Expect::OutOfMemory, "overflows",
                    [](Bench&, TensorView& in, TensorView& out) { in = rows(in, kOverflowBatch), out = rows(out, kOverflowBatch); },
                    true));

  // backward's own arguments.
  auto backward_case = [&](const std::string& what, Expect expect, const std::string& needle,
                           std::function<void(Bench&, TensorView& dout, TensorView& dx, TensorView& in)> views) {
    cases.push_back({what + " -> backward", expect, needle, [views](Bench& b) {
                       Host forward_out(b.dt, kBatch * b.padded, 0);
                       TensorView out = forward_out.matrix(kBatch, b.padded);
                       auto ctx = b.obj.forward(b.in(), &out);
                       TensorView dout = b.d_output(), dx = b.d_input(), in = b.in();
                       views(b, dout, dx, in);
                       b.obj.backward(*ctx, in, out, dout, &dx);
                     }});
  };
  backward_case("dL_doutput with one column too many", Expect::Shape, "dL_doutput", [](Bench& b, TensorView& dout, TensorView&, TensorView&) {
    dout = TensorView::matrix(spare.data(), b.dt, Device::CPU, kBatch, b.padded + 1);
  });
  backward_case("dL_doutput of the other dtype", Expect::Shape, "dL_doutput", [](Bench& b, TensorView& dout, TensorView&, TensorView&) {
    dout = TensorView::matrix(spare.data(), other_dtype(b.dt), Device::CPU, kBatch, b.padded);
  });
  backward_case("dL_dinput with one row too few", Expect::Shape, "dL_dinput",
                [](Bench&, TensorView&, TensorView& dx, TensorView&) { dx = rows(dx, kBatch - 1); });
  backward_case("dL_dinput of the other dtype", Expect::Shape, "dL_dinput", [](Bench& b, TensorView&, TensorView& dx, TensorView&) {
    dx = TensorView::matrix(spare.data(), other_dtype(b.dt), Device::CPU, kBatch, b.n_in);
  });
  backward_case("a batch other than forward()'s", Expect::Shape, "", [](Bench&, TensorView& dout, TensorView& dx, TensorView& in) {
    in = rows(in, kBatch / 2), dout = rows(dout, kBatch / 2), dx = rows(dx, kBatch / 2);
  });
  cases.back().needs_forward_state = true;
  cases.push_back({"a context from another object -> backward", Expect::Error, "context", [](Bench& b) {
                     Context foreign;
                     Host forward_out(b.dt, kBatch * b.padded, 0);
                     TensorView out = forward_out.matrix(kBatch, b.padded), dx = b.d_input();
                     b.obj.backward(foreign, b.in(), out, b.d_output(), &dx);
                   }});
  cases.back().needs_forward_state = true;
  return cases;
}

// Trainer entry points with bad arguments.
std::vector<Case> trainer_cases() {
  static std::vector<double> spare(4096 * 16);
  auto step = [](std::function<void(Bench&, TensorView& in, TensorView& target)> views) {
    return [views](Bench& b) {
      Host y(b.dt, kBatch * b.obj.output_width(), 0.25);
      TensorView in = b.in(), target = y.matrix(kBatch, b.obj.output_width());
      views(b, in, target);
      b.m.trainer->training_step(in, target);
    };
  };
  return {
      {"training_step: input with one column too many", Expect::Shape, "input", step([](Bench& b, TensorView& in, TensorView&) {
         in = TensorView::matrix(spare.data(), b.dt, Device::CPU, kBatch, b.n_in + 1);
       })},
      {"training_step: target with one column too many", Expect::Shape, "target", step([](Bench& b, TensorView&, TensorView& t) {
         t = TensorView::matrix(spare.data(), b.dt, Device::CPU, kBatch, b.obj.output_width() + 1);
       })},
      {"training_step: target with one row too few", Expect::Shape, "target",
       step([](Bench&, TensorView&, TensorView& t) { t = rows(t, kBatch - 1); })},
      {"training_step: target of the other dtype", Expect::Shape, "dtype", step([](Bench& b, TensorView&, TensorView& t) {
         t = TensorView::matrix(spare.data(), other_dtype(b.dt), Device::CPU, kBatch, b.obj.output_width());
       })},
      {"training_step: target on another device", Expect::Shape, "target", step([](Bench&, TensorView&, TensorView& t) { t = on_cuda(t); })},
      {"training_step: input of the other dtype", Expect::Shape, "dtype", step([](Bench& b, TensorView& in, TensorView&) {
         in = TensorView::matrix(spare.data(), other_dtype(b.dt), Device::CPU, kBatch, b.n_in);
       })},
      {"training_step: batch 0", Expect::Shape, "at least one sample",
       step([](Bench&, TensorView& in, TensorView& t) { in = rows(in, 0), t = rows(t, 0); })},
      {"training_step: NaN in one input", Expect::Error, "loss is", step([](Bench& b, TensorView& in, TensorView&) {
         static Host copy(DType::F32, 0, 0);
         copy = b.x;
         copy.set(3 * b.n_in, NAN);
         in = copy.matrix(kBatch, b.n_in);
       }), false, false, true},
      {"training_step: +Inf in one target", Expect::Error, "loss is", step([](Bench& b, TensorView&, TensorView& t) {
         if (b.dt == DType::F64) static_cast<double*>(t.data)[5] = INFINITY;
         else static_cast<float*>(t.data)[5] = INFINITY;
       }), false, false, true},
      {"training_step: a batch whose buffers exceed the machine's memory", Expect::OutOfMemory, "out of memory: needed",
       step([](Bench&, TensorView& in, TensorView& t) { in = rows(in, kHugeBatch), t = rows(t, kHugeBatch); })},
      {"training_step: a batch whose buffer sizes overflow", Expect::OutOfMemory, "overflows",
       step([](Bench&, TensorView& in, TensorView& t) { in = rows(in, kOverflowBatch), t = rows(t, kOverflowBatch); })},
      {"set_params_host: NaN", Expect::Error, "not finite", [](Bench& b) {
         auto p = b.m.trainer->params_host();
         if (p.empty()) throw Error("(no parameters: not finite does not apply)");
         p[p.size() / 2] = NAN;
         b.m.trainer->set_params_host(p);
       }},
      {"set_params_host: -Inf", Expect::Error, "not finite", [](Bench& b) {
         auto p = b.m.trainer->params_host();
         if (p.empty()) throw Error("(no parameters: not finite does not apply)");
         p.back() = -INFINITY;
         b.m.trainer->set_params_host(p);
       }},
      {"set_params_host: one value too many", Expect::Shape, "expected",
       [](Bench& b) {
         auto p = b.m.trainer->params_host();
         p.push_back(0.0f);
         b.m.trainer->set_params_host(p);
       }},
      {"set_loss_scale: NaN", Expect::Error, "loss scale", [](Bench& b) { b.m.trainer->set_loss_scale(NAN); }},
      {"set_loss_scale: 0", Expect::Error, "loss scale", [](Bench& b) { b.m.trainer->set_loss_scale(0.0f); }},
      {"set_loss_scale: -Inf", Expect::Error, "loss scale", [](Bench& b) { b.m.trainer->set_loss_scale(-INFINITY); }},
      {"set_learning_rate: NaN", Expect::Error, "learning rate", [](Bench& b) { b.m.trainer->optimizer().set_learning_rate(NAN); }},
      {"set_learning_rate: -1", Expect::Error, "learning rate", [](Bench& b) { b.m.trainer->optimizer().set_learning_rate(-1.0f); }},
  };
}

const char* expect_name(Expect e) {
  switch (e) {
    case Expect::Shape: return "ShapeError";
    case Expect::OutOfMemory: return "OutOfMemoryError";
    case Expect::Error: return "Error";
  }
  return "?";
}

// Runs `c` and checks the error type, the message and that nothing changed.
void check_case(Bench& b, const Case& c, const Host& reference) {
  SCOPED_TRACE(c.name);
  b.reset_outputs();
  const State before = state_of(b.m);
  std::string message;
  bool right_type = false;
  try {
    c.call(b);
    ADD_FAILURE() << "no error; expected " << expect_name(c.expect);
    return;
  } catch (const OutOfMemoryError& e) {
    right_type = c.expect == Expect::OutOfMemory;
    message = e.what();
  } catch (const ShapeError& e) {
    right_type = c.expect == Expect::Shape;
    message = e.what();
  } catch (const Error& e) {
    right_type = c.expect == Expect::Error;
    message = e.what();
  }
  // Anything that is not a tinyfuse::Error escapes and fails the test.
  EXPECT_TRUE(right_type) << "expected " << expect_name(c.expect) << ", got: " << message;
  if (contains(message, "(no parameters")) return;  // the case does not apply to a parameter-free object
  EXPECT_TRUE(contains(message, c.needle)) << "message does not mention \"" << c.needle << "\": " << message;
  EXPECT_TRUE(b.out.all_sentinel()) << "the output buffer was written";
  EXPECT_TRUE(b.dx.all_sentinel()) << "dL_dinput was written";
  State after = state_of(b.m);
  if (c.gradients_may_change) after.gradients = before.gradients;
  EXPECT_TRUE(after == before) << "parameters, gradients or optimizer state changed";
  EXPECT_TRUE(b.inference_of(b.in()).same(reference)) << "the object computes something else afterwards";
}

class BadInput : public ::testing::TestWithParam<Subject> {};

TEST_P(BadInput, EveryCaseIsAClearErrorAndChangesNothing) {
  const Subject& s = GetParam();
  Bench b(s.make());
  const Host reference = b.inference_of(b.in());
  for (const Case& c : object_cases())
    if ((!c.needs_scratch_per_batch || s.scratch_per_batch) && (!c.needs_forward_state || s.keeps_forward_state))
      check_case(b, c, reference);
  for (const Case& c : trainer_cases()) check_case(b, c, reference);
}

// Views whose features are not adjacent, or whose rows have gaps: either refused with a
// ShapeError that says so, or computed exactly as from a dense copy.
TEST_P(BadInput, StridedViewsAreRefusedOrComputedExactly) {
  Bench b(GetParam().make());
  const Host reference = b.inference_of(b.in());
  for (const int64_t col_stride : {1, 2}) {
    const int64_t row_stride = b.n_in * col_stride + 3;
    SCOPED_TRACE("strides (" + std::to_string(row_stride) + ", " + std::to_string(col_stride) + ")");
    Host wide(b.dt, kBatch * row_stride, NAN);  // NaN between the elements: any stray read shows
    for (int64_t r = 0; r < kBatch; ++r)
      for (int64_t c = 0; c < b.n_in; ++c) wide.set(r * row_stride + c * col_stride, b.x.get(r * b.n_in + c));
    TensorView in = wide.matrix(kBatch, b.n_in);
    in.strides[0] = row_stride, in.strides[1] = col_stride;
    try {
      EXPECT_TRUE(b.inference_of(in).same(reference)) << "strided input computed differently";
    } catch (const ShapeError& e) {
      EXPECT_TRUE(contains(e.what(), "stride")) << e.what();
    }
  }
}

// Batch 0 is a no-op; batch 1 computes what the same row computes in a larger batch.
TEST_P(BadInput, BatchZeroAndOne) {
  Bench b(GetParam().make());
  const Host reference = b.inference_of(b.in());
  const State before = state_of(b.m);
  Host nothing(b.dt, 1, kSentinel);
  b.obj.inference(nothing.matrix(0, b.n_in), nothing.matrix(0, b.padded));
  auto ctx = b.obj.forward(nothing.matrix(0, b.n_in), nullptr);
  EXPECT_EQ(nothing.get(0), kSentinel);
  EXPECT_TRUE(state_of(b.m) == before);

  for (int64_t row : {0, 5}) {
    Host one(b.dt, static_cast<size_t>(b.n_in), 0);
    for (int64_t c = 0; c < b.n_in; ++c) one.set(c, b.x.get(row * b.n_in + c));
    const Host out = b.inference_of(one.matrix(1, b.n_in));
    for (int64_t c = 0; c < b.padded; ++c) {
      const double want = reference.get(row * b.padded + c), got = out.get(c);
      // A one-row GEMM may take OpenBLAS's matrix-vector path (another summation order), so the
      // last bits may differ from the batched product: a few ulps of the dtype, not more.
      const double ulps = b.dt == DType::F64 ? 1e-15 : 1e-6;
      EXPECT_NEAR(got, want, 8 * ulps * std::max(1.0, std::abs(want))) << "row " << row << " column " << c;
    }
  }
}

// Non-finite inputs are not checked (that would cost a pass over the data): the rows that hold
// them get whatever the arithmetic gives, every other row is bitwise what it is without them,
// and nothing outside the output is written (docs/ERRORS.md).
TEST_P(BadInput, NonFiniteInputsStayInTheirRows) {
  Bench b(GetParam().make());
  const Host reference = b.inference_of(b.in());
  for (const double bad : {double(NAN), double(INFINITY), -double(INFINITY)}) {
    SCOPED_TRACE(bad);
    Host x = b.x;
    x.set(2 * b.n_in, bad);
    x.set(6 * b.n_in + b.n_in - 1, bad);
    const Host out = b.inference_of(x.matrix(kBatch, b.n_in));
    for (int64_t r = 0; r < kBatch; ++r) {
      if (r == 2 || r == 6) continue;
      const size_t row_bytes = b.padded * dtype_size(b.dt);
      EXPECT_EQ(std::memcmp(out.bytes() + r * row_bytes, reference.bytes() + r * row_bytes, row_bytes), 0)
          << "row " << r << " changed by a non-finite value in another row";
    }
  }
}

// A refused step leaves the model exactly where it was: the next good steps give bitwise the
// parameters of a model that never saw the bad batch.
TEST_P(BadInput, RefusedStepsDoNotPoisonTraining) {
  Bench poisoned(GetParam().make()), clean(GetParam().make());
  Host y(poisoned.dt, kBatch * poisoned.obj.output_width(), 0.25);
  const TensorView target = y.matrix(kBatch, poisoned.obj.output_width());
  Host bad_x = poisoned.x;
  bad_x.set(3, NAN);
  EXPECT_THROW(poisoned.m.trainer->training_step(bad_x.matrix(kBatch, poisoned.n_in), target), Error);
  EXPECT_THROW(poisoned.m.trainer->training_step(rows(poisoned.in(), kHugeBatch), rows(target, kHugeBatch)), Error);
  for (int i = 0; i < 3; ++i) {
    poisoned.m.trainer->training_step(poisoned.in(), target);
    clean.m.trainer->training_step(clean.in(), target);
  }
  EXPECT_TRUE(state_of(poisoned.m) == state_of(clean.m));
}

INSTANTIATE_TEST_SUITE_P(Objects, BadInput, ::testing::ValuesIn(subjects()),
                         [](const auto& info) { return info.param.name; });

// ---- losses ----

class BadLossInput : public ::testing::TestWithParam<std::string> {};

TEST_P(BadLossInput, EveryCaseIsAClearShapeErrorAndWritesNothing) {
  auto loss = create_loss({{"otype", GetParam()}});
  const int64_t width = 4, dims = 3;
  std::vector<float> pred(kBatch * width), target(kBatch * dims), pdf(kBatch * dims, 1.0f);
  Pcg32 rng(3);
  for (auto& v : pred) v = rng.next_float() + 0.1f;
  for (auto& v : target) v = rng.next_float() + 0.1f;
  std::vector<float> values(kBatch * width, kSentinel), grads(kBatch * width, kSentinel);
  std::vector<double> spare(kBatch * (width + 2));
  auto P = [&] { return TensorView::matrix(pred.data(), kBatch, width); };
  auto T = [&] { return TensorView::matrix(target.data(), kBatch, dims); };
  auto V = [&] { return TensorView::matrix(values.data(), kBatch, width); };
  auto G = [&] { return TensorView::matrix(grads.data(), kBatch, width); };
  auto PDF = [&] { return TensorView::matrix(pdf.data(), kBatch, dims); };
  struct LossCase {
    std::string name, needle;
    std::function<void()> call;
  };
  const std::vector<LossCase> cases = {
      {"prediction of the other dtype", "prediction", [&] { loss->evaluate(1, with_dtype(P(), DType::F64), T(), V(), G()); }},
      {"prediction on another device", "prediction", [&] { loss->evaluate(1, on_cuda(P()), T(), V(), G()); }},
      {"target wider than the prediction", "target",
       [&] { loss->evaluate(1, P(), TensorView::matrix(spare.data(), DType::F32, Device::CPU, kBatch, width + 1), V(), G()); }},
      {"target with one row too few", "target", [&] { loss->evaluate(1, P(), rows(T(), kBatch - 1), V(), G()); }},
      {"values with one row too few", "values", [&] { loss->evaluate(1, P(), T(), rows(V(), kBatch - 1), G()); }},
      {"gradients of the other dtype", "gradients",
       [&] { loss->evaluate(1, P(), T(), V(), TensorView::matrix(spare.data(), DType::F64, Device::CPU, kBatch, width)); }},
      {"data_pdf with one row too few", "data_pdf", [&] {
         TensorView pdf_view = rows(PDF(), kBatch - 1);
         loss->evaluate(1, P(), T(), V(), G(), &pdf_view);
       }},
      {"1-D prediction", "prediction",
       [&] { loss->evaluate(1, TensorView::vector(pred.data(), kBatch * width), T(), V(), G()); }},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    try {
      c.call();
      ADD_FAILURE() << "no error";
    } catch (const ShapeError& e) {
      EXPECT_TRUE(contains(e.what(), c.needle)) << e.what();
    }
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_EQ(values[i], kSentinel) << "values written at " << i;
      ASSERT_EQ(grads[i], kSentinel) << "gradients written at " << i;
    }
  }

  // A non-finite prediction changes its own row only.
  loss->evaluate(1, P(), T(), V(), G());
  const std::vector<float> clean_values = values, clean_grads = grads;
  pred[2 * width + 1] = NAN;
  pred[5 * width] = INFINITY;
  loss->evaluate(1, P(), T(), V(), G());
  for (int64_t r = 0; r < kBatch; ++r) {
    if (r == 2 || r == 5) continue;
    EXPECT_EQ(std::memcmp(&values[r * width], &clean_values[r * width], width * 4), 0) << "row " << r;
    EXPECT_EQ(std::memcmp(&grads[r * width], &clean_grads[r * width], width * 4), 0) << "row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Losses, BadLossInput, ::testing::ValuesIn(loss_otypes()));

// ---- memory arithmetic at the edge ----

TEST(OutOfMemory, ErrorNamesTheBytesAndTheProcessKeepsWorking) {
  Model m = network("PortableMLP", 2).make();
  std::vector<float> x(2 * kBatch, 0.5f), out(3 * kBatch);
  try {
    m.network->inference(rows(TensorView::matrix(x.data(), kBatch, 2), kHugeBatch), rows(TensorView::matrix(out.data(), kBatch, 3), kHugeBatch));
    FAIL() << "no error";
  } catch (const OutOfMemoryError& e) {
    EXPECT_GT(e.bytes(), size_t(kHugeBatch));
    EXPECT_TRUE(contains(e.what(), std::to_string(e.bytes()) + " bytes")) << e.what();
    EXPECT_TRUE(contains(e.what(), "this machine has")) << e.what();
  }
  try {
    m.network->inference(rows(TensorView::matrix(x.data(), kBatch, 2), kOverflowBatch), rows(TensorView::matrix(out.data(), kBatch, 3), kOverflowBatch));
    FAIL() << "no error";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.bytes(), SIZE_MAX);
  }
  // Host buffers themselves: a size beyond the machine is refused before it is asked for.
  EXPECT_THROW(Buffer(Device::CPU, size_t(1) << 62), OutOfMemoryError);
  Buffer ok(Device::CPU, 1024);
  fill_tensor(ok.vector(DType::F32, 256), 2.0);
  EXPECT_EQ(sum_tensor(ok.vector(DType::F32, 256)), 512.0);
}

TEST(OutOfMemory, ModelsTooLargeForTheMachineAreRefusedBeforeAllocating) {
  // The largest MLP a config allows: 64 hidden layers of 8192, 4.3e9 parameters, 68 GB for the
  // parameters, gradients and master copy alone.
  const json cfg = {{"network", {{"otype", "PortableMLP"}, {"n_neurons", 8192}, {"n_hidden_layers", 64}}}};
  if (host_memory_bytes() > (uint64_t(48) << 30)) GTEST_SKIP() << "this machine could hold the largest model a config allows";
  try {
    create_from_config(3, 1, cfg);
    FAIL() << "no error";
  } catch (const OutOfMemoryError& e) {
    EXPECT_TRUE(contains(e.what(), "parameters")) << e.what();
  }
  EXPECT_NO_THROW(network("PortableMLP", 2).make());
}

// ReLU gives a NaN input row a finite output (z > 0 ? z : 0), so the loss stays finite while the
// first layer's weight gradient takes the NaN (0 * NaN): the step must still be refused, nothing
// changed, and the next good step must be what it would have been.
TEST(NonFiniteTraining, ReluNetworkWithANanInputIsRefusedByItsGradients) {
  for (const std::string otype : {"PortableMLP", "FullyFusedMLP", "CutlassMLP"}) {
    SCOPED_TRACE(otype);
    const json net = {{"otype", otype}, {"n_neurons", 16}, {"n_hidden_layers", 2}, {"activation", "ReLU"}};
    const json cfg = {{"loss", {{"otype", "L2"}}}, {"optimizer", {{"otype", "Adam"}, {"learning_rate", 1e-2}}}, {"network", net}};
    Model m = create_from_config(16, 2, cfg, {Device::CPU}), twin = create_from_config(16, 2, cfg, {Device::CPU});
    const int64_t rows = 64;
    std::vector<float> x(rows * 16), y(rows * 2, 0.25f);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 101) / 101.0f;
    std::vector<float> bad = x;
    bad[5 * 16 + 1] = std::numeric_limits<float>::quiet_NaN();
    const TensorView xv = TensorView::matrix(x.data(), rows, 16), bv = TensorView::matrix(bad.data(), rows, 16),
                     yv = TensorView::matrix(y.data(), rows, 2);
    const std::vector<float> before = m.trainer->params_host();
    try {
      m.trainer->training_step(bv, yv);
      ADD_FAILURE() << "a batch with a NaN input was trained on";
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.what(), "parameter gradients hold NaN")) << e.what();
      EXPECT_TRUE(std::isfinite(m.trainer->last_loss())) << "the loss itself was finite: ReLU hid the NaN";
    }
    const std::vector<float> after = m.trainer->params_host();
    EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size() * 4), 0) << "the refused step changed the parameters";
    EXPECT_EQ(m.optimizer->step_count(), 0u);
    EXPECT_EQ(m.trainer->training_step(xv, yv), twin.trainer->training_step(xv, yv));
  }
}

// ---- fuzz findings (fuzz/, scripts/fuzz.sh): each crash found becomes a test here ----

// fuzz_config: a grid whose per_level_scale < 1 drives a level's scale to -1 converted
// ceil(-1) to uint32 (undefined behaviour). Now a ConfigError naming the level.
TEST(FuzzFindings, GridLevelWithANegativeScaleIsAConfigError) {
  for (double pls : {0.05, 1e-10}) {
    const json enc = {{"otype", "HashGrid"}, {"n_levels", 16}, {"n_features_per_level", 1}, {"base_resolution", 16},
                      {"per_level_scale", pls}};
    try {
      create_encoding(enc, 2);
      ADD_FAILURE() << "no error for per_level_scale " << pls;
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), "encoding.per_level_scale");
      EXPECT_TRUE(contains(e.rule(), "negative scale")) << e.what();
    }
  }
  // Below 1 is fine while every level keeps a scale >= 0.
  EXPECT_NO_THROW(create_encoding({{"otype", "HashGrid"}, {"n_levels", 2}, {"base_resolution", 16}, {"per_level_scale", 0.5}}, 2));
}

}  // namespace
