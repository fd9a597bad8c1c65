// tinyfuse._native: the compiled half of the Python package. It knows nothing of PyTorch: objects
// are built from JSON text and called with addresses, row counts, dtype codes and a stream handle
// (see native_object.h); tinyfuse/tcnn.py does the rest in Python.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "core/host_memory.h"
#include "core/memory_plan.h"
#include "jobs/default_config.h"
#include "jobs/loss_plot.h"
#include "jobs/test_pattern.h"
#include "native_object.h"
#include "native_trainer.h"
#include "tinyfuse/buffer.h"
#include "tinyfuse/factory.h"

namespace nb = nanobind;
using namespace tinyfuse;
using tinyfuse::python::Address;
using tinyfuse::python::NativeContext;
using tinyfuse::python::NativeObject;
using tinyfuse::python::NativeTrainer;

namespace {

// dtype codes as Python passes them: the values of tinyfuse::DType.
DType dtype_code(int code) {
  if (code < static_cast<int>(DType::F32) || code > static_cast<int>(DType::F64))
    throw ShapeError("unknown dtype code " + std::to_string(code));
  return static_cast<DType>(code);
}

Device device_named(const std::string& name) {
  if (name == "cpu") return Device::CPU;
  if (name == "cuda") return Device::CUDA;
  throw ConfigError("device", "\"" + name + "\"", "tinyfuse runs on the CPU or CUDA devices", "cpu, cuda");
}

BuildOptions options(const std::string& device, int cpu_precision) {
  BuildOptions o;
  o.device = device_named(device);
  o.cpu_precision = dtype_code(cpu_precision);
  return o;
}

// Config text from Python (json.dumps of the caller's dict), read as every front end reads it.
json config_arg(const std::string& text, const char* what) { return parse_config(text, std::string(what) + " config"); }

// Widths arrive as Python ints: a negative or oversized one is a ConfigError naming the key (the
// library checks the rest), not nanobind's "incompatible function arguments" TypeError.
uint32_t width_arg(int64_t value, const char* key) {
  if (value < 0 || value > int64_t{UINT32_MAX})
    throw ConfigError(key, std::to_string(value), "a width must be a non-negative 32-bit integer", "an integer >= 1");
  return static_cast<uint32_t>(value);
}

std::unique_ptr<NativeObject> wrap(std::shared_ptr<DifferentiableObject> o) {
  return std::make_unique<NativeObject>(std::move(o));
}

// Builds with `options` and returns (object, ignored keys). `strict`: unknown keys are ConfigErrors,
// as in C++; otherwise they are skipped and each comes back as (key, value, rule, accepted), which
// tinyfuse.tcnn turns into warnings.
template <typename Build>
nb::tuple build(BuildOptions options, bool strict, Build&& make) {
  std::vector<ConfigError> ignored;
  if (!strict) options.ignored_keys = &ignored;
  std::unique_ptr<NativeObject> object = wrap(make(options));
  nb::list keys;
  for (const ConfigError& e : ignored) keys.append(nb::make_tuple(e.key(), e.value(), e.rule(), e.accepted()));
  return nb::make_tuple(std::move(object), keys);
}

}  // namespace

NB_MODULE(_native, m) {
  m.doc() = "tinyfuse's compiled core, driven by tinyfuse.tcnn (no PyTorch types cross into it)";

  // Base class first: nanobind tries the most recently registered translator first.
  static nb::exception<Error> error(m, "Error", PyExc_RuntimeError);
  nb::object value_bases = nb::make_tuple(error, nb::handle(PyExc_ValueError));
  static nb::exception<ConfigError> config_error(m, "ConfigError", value_bases);
  static nb::exception<ShapeError> shape_error(m, "ShapeError", value_bases);
  static nb::exception<UnsupportedError> unsupported_error(m, "UnsupportedError",
                                                           nb::make_tuple(error, nb::handle(PyExc_NotImplementedError)));
  static nb::exception<OutOfMemoryError> out_of_memory_error(m, "OutOfMemoryError",
                                                             nb::make_tuple(error, nb::handle(PyExc_MemoryError)));
  // Modules held in globals or autograd graphs may still be alive when the interpreter exits;
  // that is not a leak of ours, so nanobind's exit report would only alarm.
  nb::set_leak_warnings(false);

  m.attr("DTYPE_F32") = static_cast<int>(DType::F32);
  m.attr("DTYPE_F16") = static_cast<int>(DType::F16);
  m.attr("DTYPE_BF16") = static_cast<int>(DType::BF16);
  m.attr("DTYPE_F64") = static_cast<int>(DType::F64);
#ifdef TINYFUSE_PYTHON_WITH_CUDA
  m.attr("built_with_cuda") = true;
#else
  m.attr("built_with_cuda") = false;
#endif
  m.def("gpu_count", &gpu_count, "GPUs this build can use here (0 without CUDA backend, driver or device)");
  m.def("network_otypes", &network_otypes);
  // The host memory the Python layer is about to ask torch for (rows x bytes per row), checked as
  // the library checks its own scratch: OutOfMemoryError before anything is allocated.
  m.def("check_host_bytes", [](int64_t rows, int64_t bytes_per_row, const std::string& what) {
    checked_bytes({rows, bytes_per_row}, what);
  });
  // What a tinyfuse.tcnn module will hold, checked before torch is asked for any of it: the FP32
  // parameters (module.params) and their gradients (params.grad, which backward fills), and when
  // the object computes in another dtype the compute copy and its gradients of each call.
  m.def("check_module_memory", [](const NativeObject& o, const std::string& what) {
    const DifferentiableObject& object = o.object();
    const uint64_t n = object.n_params();
    MemoryPlan plan(what + " (" + std::to_string(n) + " parameters)");
    plan.add("FP32 parameters", n, 4, true);
    plan.add("their gradients", n, 4, true);
    if (object.param_dtype() != DType::F32)
      plan.add(to_string(object.param_dtype()) + " compute copy and its gradients", n, 2 * dtype_size(object.param_dtype()), true);
    plan.check();
  });
  m.def("encoding_otypes", &encoding_otypes);

  nb::class_<NativeContext>(m, "Context");

  auto object_class = nb::class_<NativeObject>(m, "Object");
  object_class
      .def_prop_ro("name", [](const NativeObject& o) { return o.object().name(); })
      .def_prop_ro("hyperparams", [](const NativeObject& o) { return o.object().hyperparams().dump(); })
      .def_prop_ro("device", [](const NativeObject& o) { return to_string(o.object().device()); })
      .def_prop_ro("n_params", [](const NativeObject& o) { return o.object().n_params(); })
      // (offset, count, kind) of each run of parameters, as the C++ optimizers see them: kind
      // "matrix", "vector" or "grid" (Adam's l2_reg acts on the matrices only).
      .def_prop_ro("param_segments",
                   [](const NativeObject& o) {
                     nb::list out;
                     for (const ParamSegment& s : o.object().param_segments()) {
                       const char* kind = s.kind == ParamSegment::Kind::Matrix   ? "matrix"
                                          : s.kind == ParamSegment::Kind::Vector ? "vector"
                                                                                 : "grid";
                       out.append(nb::make_tuple(s.offset, s.count, kind));
                     }
                     return out;
                   })
      .def_prop_ro("input_width", [](const NativeObject& o) { return o.object().input_width(); })
      .def_prop_ro("output_width", [](const NativeObject& o) { return o.object().output_width(); })
      .def_prop_ro("padded_output_width", [](const NativeObject& o) { return o.object().padded_output_width(); })
      .def_prop_ro("batch_granularity", [](const NativeObject& o) { return o.object().batch_granularity(); })
      .def_prop_ro("param_dtype", [](const NativeObject& o) { return static_cast<int>(o.object().param_dtype()); })
      .def_prop_ro("input_dtype", [](const NativeObject& o) { return static_cast<int>(o.object().input_dtype()); })
      .def_prop_ro("output_dtype", [](const NativeObject& o) { return static_cast<int>(o.object().output_dtype()); })
      .def("initial_params", &NativeObject::initial_params, nb::arg("seed"), nb::arg("host_f32"), nb::arg("scale") = 1.0f)
      .def(
          "inference",
          [](NativeObject& o, Address params, int params_dtype, Address input, int input_dtype, int64_t rows,
             Address output, int output_dtype, Address stream) {
            o.inference(params, dtype_code(params_dtype), input, dtype_code(input_dtype), rows, output,
                        dtype_code(output_dtype), stream);
          },
          nb::call_guard<nb::gil_scoped_release>())
      .def(
          "forward",
          [](NativeObject& o, Address params, int params_dtype, Address input, int input_dtype, int64_t rows,
             Address output, int output_dtype, Address stream, bool prepare_input_gradients) {
            return o.forward(params, dtype_code(params_dtype), input, dtype_code(input_dtype), rows, output,
                             dtype_code(output_dtype), stream, prepare_input_gradients);
          },
          nb::call_guard<nb::gil_scoped_release>())
      .def(
          "backward",
          [](NativeObject& o, const NativeContext& ctx, Address params, int params_dtype, Address gradients,
             Address input, int input_dtype, Address output, int output_dtype, Address doutput, Address dinput,
             Address stream) {
            o.backward(ctx, params, dtype_code(params_dtype), gradients, input, dtype_code(input_dtype), output,
                       dtype_code(output_dtype), doutput, dinput, stream);
          },
          nb::call_guard<nb::gil_scoped_release>())
      .def(
          "backward_backward_input",
          [](NativeObject& o, const NativeContext& ctx, Address params, int params_dtype, Address gradients,
             Address input, int input_dtype, Address dL_ddLdinput, Address doutput, int output_dtype,
             Address dL_ddLdoutput, Address dL_dinput, Address stream) {
            o.backward_backward_input(ctx, params, dtype_code(params_dtype), gradients, input, dtype_code(input_dtype),
                                      dL_ddLdinput, doutput, dtype_code(output_dtype), dL_ddLdoutput, dL_dinput, stream);
          },
          nb::call_guard<nb::gil_scoped_release>());
#ifdef TINYFUSE_PYTHON_TIMING
  // benchmarks/python/binding_overhead.py's reference loops (developer builds, -DTINYFUSE_PYTHON_TIMING=ON).
  object_class.def("time_inference", &NativeObject::time_inference, nb::call_guard<nb::gil_scoped_release>())
      .def("time_training", &NativeObject::time_training, nb::call_guard<nb::gil_scoped_release>());
#endif

  // tinyfuse.tcnn.FusedTrainer's half: the C++ Trainer on an object of its own (native_trainer.h).
  nb::class_<NativeTrainer>(m, "Trainer")
      .def(
          "__init__",
          [](NativeTrainer* t, const NativeObject& model, const std::string& loss, const std::string& optimizer,
             float loss_scale, const std::string& config) {
            new (t) NativeTrainer(model, config_arg(loss, "loss"), config_arg(optimizer, "optimizer"), loss_scale,
                                  config_arg(config, "trainer"));
          },
          nb::arg("model"), nb::arg("loss"), nb::arg("optimizer"), nb::arg("loss_scale"), nb::arg("config"))
      .def_prop_ro("n_params", &NativeTrainer::n_params)
      .def_prop_ro("loss_scale", &NativeTrainer::loss_scale)
      .def("set_params_host", &NativeTrainer::set_params_host, nb::call_guard<nb::gil_scoped_release>())
      .def(
          "step",
          [](NativeTrainer& t, Address input, int input_dtype, Address target, int64_t rows, Address stream,
             Address params_out, bool checked) {
            return t.step(input, dtype_code(input_dtype), target, rows, stream, params_out, checked);
          },
          nb::call_guard<nb::gil_scoped_release>())
      .def("last_loss", &NativeTrainer::last_loss, nb::call_guard<nb::gil_scoped_release>())
      .def("copy_params", &NativeTrainer::copy_params, nb::call_guard<nb::gil_scoped_release>())
      .def("save", &NativeTrainer::save, nb::call_guard<nb::gil_scoped_release>())
      .def("load", &NativeTrainer::load, nb::call_guard<nb::gil_scoped_release>());

  // tiny-cuda-nn's Python Network: any input width, padded to the network's alignment.
  m.def("create_network",
        [](int64_t n_input_dims, int64_t n_output_dims, const std::string& network, const std::string& device,
           int cpu_precision, bool strict) {
          const json config = config_arg(network, "network");
          const uint32_t n_in = width_arg(n_input_dims, "network.n_input_dims");
          const uint32_t n_out = width_arg(n_output_dims, "network.n_output_dims");
          return build(options(device, cpu_precision), strict, [&](const BuildOptions& o) {
            return std::shared_ptr<DifferentiableObject>(create_padded_network(n_in, n_out, config, o));
          });
        });
  // `output_dtype`: a dtype code for the features, or -1 for the encoding's own. GPU encodings
  // write F16 or F32 as asked; CPU ones write their compute dtype (the Python layer converts).
  m.def("create_encoding",
        [](int64_t n_input_dims, const std::string& encoding, const std::string& device, int cpu_precision,
           int output_dtype, bool strict) {
          const json config = config_arg(encoding, "encoding");
          const uint32_t n_in = width_arg(n_input_dims, "encoding.n_input_dims");
          const BuildOptions base = options(device, cpu_precision);
          return build(base, strict, [&](const BuildOptions& o) {
            std::unique_ptr<Encoding> e = create_encoding(config, n_in, o);
            if (output_dtype >= 0 && base.device == Device::CUDA && dtype_code(output_dtype) != e->output_dtype())
              e->set_output_dtype(dtype_code(output_dtype));
            return std::shared_ptr<DifferentiableObject>(std::move(e));
          });
        });
  m.def("create_network_with_input_encoding",
        [](int64_t n_input_dims, int64_t n_output_dims, const std::string& encoding, const std::string& network,
           const std::string& device, int cpu_precision, bool strict) {
          const json enc = config_arg(encoding, "encoding"), net = config_arg(network, "network");
          const uint32_t n_in = width_arg(n_input_dims, "encoding.n_input_dims");
          const uint32_t n_out = width_arg(n_output_dims, "network.n_output_dims");
          return build(options(device, cpu_precision), strict, [&](const BuildOptions& o) {
            return std::shared_ptr<DifferentiableObject>(create_network_with_input_encoding(n_in, n_out, enc, net, o));
          });
        });
  m.def("free_temporary_memory", &free_temporary_memory, nb::call_guard<nb::gil_scoped_release>(),
        "gives the GPU memory tinyfuse's pools keep for reuse back to the driver, and the host scratch kept "
        "between calls back to the system");

  // learn-image's and learn-sdf's shared pieces (src/jobs), so that samples/learn_image.py and
  // samples/learn_sdf.py run the same jobs as the CLI: the default configs, the built-in target and
  // the loss plot. Images are RGB FP32 values in [0, 1], rows from the top, as bytes (the plot with
  // its width and height).
  m.def("learn_image_default_config", [] { return jobs::default_learn_image_config().dump(); });
  m.def("learn_sdf_default_config", [] { return jobs::default_learn_sdf_config().dump(); });
  m.def("loss_plot", [](const std::vector<float>& losses) {
    const jobs::Image image = jobs::render_loss_plot(losses);
    return nb::make_tuple(image.width, image.height,
                          nb::bytes(reinterpret_cast<const char*>(image.rgb.data()), image.rgb.size() * sizeof(float)));
  });
  m.def("test_pattern", [](int size) {
    if (size < 1 || size > 8192) throw ShapeError("test_pattern: size must be in [1, 8192], got " + std::to_string(size));
    const jobs::Image image = jobs::make_test_pattern(size);
    return nb::bytes(reinterpret_cast<const char*>(image.rgb.data()), image.rgb.size() * sizeof(float));
  });
}
