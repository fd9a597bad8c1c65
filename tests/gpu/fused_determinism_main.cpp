// tinyfuse_fused_determinism: builds a fused network (--otype, default Width64FusedMLP) with
// fixed seeds, runs fixed inputs at fixed batch sizes, and writes a JSON record of the outputs
// (SHA-256 of the bytes, first and last rows in hex) to --out. Two runs in fresh processes must
// write byte-identical files (checked by test_fused_qualification.cpp).
// Exit status: 0 written, 77 skipped (no GPU, or no CUDA implementation of the otype in this
// build; the reason on stdout), 1 error, 2 bad command line.
#include <exception>
#include <fstream>
#include <iostream>
#include <string>

#include "gpu/fused_test_support.h"

using namespace tinyfuse;
using namespace tinyfuse::testing;

int main(int argc, char** argv) {
  std::string otype = "Width64FusedMLP", out;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    if (key == "--otype") otype = argv[i + 1];
    else if (key == "--out") out = argv[i + 1];
    else {
      std::cerr << "usage: tinyfuse_fused_determinism [--otype OTYPE] --out PATH\n";
      return 2;
    }
  }
  if (out.empty() || argc % 2 == 0) {
    std::cerr << "usage: tinyfuse_fused_determinism [--otype OTYPE] --out PATH\n";
    return 2;
  }
  try {
    if (gpu_count() == 0) {
      std::cout << "skipped: no GPU\n";
      return 77;
    }
    std::string why_not;
    std::unique_ptr<Network> net = create_fused_network(otype, why_not);
    if (!net) {
      std::cout << "skipped: " << why_not << '\n';
      return 77;
    }
    DeviceParams params(*net, fused_test_params(*net, kDeterminismParamSeed));
    json doc = {{"otype", otype},
                {"param_seed", kDeterminismParamSeed},
                {"input_seed", kDeterminismInputSeed},
                {"param_dtype", to_string(net->param_dtype())},
                {"output_dtype", to_string(net->output_dtype())},
                {"runs", json::array()}};
    for (int64_t batch : determinism_batches()) doc["runs"].push_back(determinism_record(*net, batch));
    std::ofstream f(out, std::ios::binary | std::ios::trunc);
    f << doc.dump(2) << '\n';
    f.close();
    if (!f) {
      std::cerr << "tinyfuse_fused_determinism: cannot write " << out << '\n';
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tinyfuse_fused_determinism: " << e.what() << '\n';
    return 1;
  }
}
